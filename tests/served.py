"""A real ``python generate.py --serve`` on 127.0.0.1, on a port of the system's choosing,
started and awaited by the contract suite's own helpers, and stopped as ``--serve`` is
meant to stop: SIGINT (it finishes a rebuild)."""

from __future__ import annotations

import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.contract import Host, stop
from tests.hosts import SERVING, serve_command, started

# A running server: its address, the folder it serves (beside ratings.yaml), its log (the
# build's summary, then a line per request) and its process.
Served = Host


@contextmanager
def serving(
    folder: Path, ratings: str, *options: str, command: Callable[..., list[str]] = serve_command
) -> Iterator[Served]:
    """Write ``ratings`` to ``folder/ratings.yaml`` and serve its site until the block ends.

    ``command`` makes the server's command line from ``options``.
    """
    (folder / "ratings.yaml").write_text(ratings, encoding="utf-8")
    served = started("generate --serve", folder / "site", command(*options), SERVING)
    served.base_url = served.address  # none given: the served address is the base URL
    try:
        yield served
    finally:
        assert served.process is not None
        stop(served.process, signal.SIGINT)
