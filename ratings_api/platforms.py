"""Which systems the generator runs on: POSIX ones (Linux, macOS), not Windows.

The writer and the server open every file relative to an open folder
(``dir_fd``, ``O_DIRECTORY``), never following a symlink (``O_NOFOLLOW``): it
is what keeps a build and a request inside the site's folder, whatever links
or renames happen meanwhile. Windows offers none of the three to Python, so
there the generator stops at once with one line rather than fail half-way
with an AttributeError.

Every other call the package makes exists on both Linux and macOS, or has a
fallback where it is missing (tests/test_portable.py holds the list). The
tests run on Linux only: macOS is tested there by taking out of ``os`` and
the other modules the names macOS's Python lacks, not on a Mac.
"""

from __future__ import annotations

import os
import sys
from typing import Final

SUPPORTED: Final = "POSIX systems (Linux, macOS)"
# The calls the writer and the server make with dir_fd (os.replace is os.rename's
# twin, and is listed under it).
DIR_FD_CALLS: Final = ("open", "stat", "mkdir", "unlink", "rmdir", "rename")


def unsupported() -> str | None:
    """Why this system cannot run the generator, or None when it can."""
    missing = [flag for flag in ("O_DIRECTORY", "O_NOFOLLOW") if not hasattr(os, flag)]
    calls = {getattr(os, name) for name in DIR_FD_CALLS}
    if not calls <= os.supports_dir_fd:
        missing.append("dir_fd")
    if not missing:
        return None
    return (
        f"this system ({sys.platform}) lacks {', '.join(missing)}: "
        f"ratings-api runs on {SUPPORTED} only"
    )
