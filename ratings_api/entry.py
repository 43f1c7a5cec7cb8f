"""The commands' entry point: the platform checked before the rest is imported.

The writer and the server import ``fcntl`` and read ``os.O_DIRECTORY`` when
they are imported, so on a system without them (Windows) importing the
command line itself fails with a traceback, before ``cli.main`` could say why
in one line. This module imports nothing of that until the check has passed.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from ratings_api.platforms import unsupported


def main(argv: Sequence[str] | None = None) -> int:
    """``python generate.py`` and ``ratings-api``: refuse an unsupported system, then run."""
    problem = unsupported()
    if problem is not None:
        print(problem, file=sys.stderr)
        return 2
    from ratings_api.cli import main as run

    return run(argv)
