"""The build lock: one build (or ``--check``) of an output folder at a time.

The lock lives *beside* the output folder, in its parent: for ``site`` it is
the file ``.site.generate/lock``, and the same folder holds the one temporary
file each document is written to before its rename (``write.tmp``). Beside, so
that the output folder holds exactly what is published; in the parent, so that
the rename from there into the output stays one atomic rename on one file
system (which is why an output folder that is a mount point is refused).

The lock is the system's lock on that file (``flock``; on Windows
``msvcrt.locking``), which the kernel releases when its holder dies, however it
dies. A second build, or ``--check``, waits for it and says so once.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Final

from ratings_api.errors import InputError

if sys.platform == "win32":
    import msvcrt
else:
    import fcntl

LOCK_FOLDER_SUFFIX: Final = ".generate"  # ".site.generate" for site
BUILD_LOCK_FILE: Final = "lock"
TEMP_FILE: Final = "write.tmp"  # each document's bytes, before the rename
PID_BYTES: Final = 32  # the holder's process id; Windows locks the byte after it
BUILD_LOCK_RETRY: Final = 0.05  # seconds between two tries of a held lock

OnBuildWait = Callable[[int | None], None]  # told the other build's process id, if known


def lock_folder(output: str) -> str:
    """The folder of ``output``'s build lock: ``.<name>.generate`` beside its real path."""
    parent, name = os.path.split(os.path.realpath(output))
    if not name:
        raise InputError(f"{output}: the root of the file system cannot be the output folder")
    return os.path.join(parent, f".{name}{LOCK_FOLDER_SUFFIX}")


@contextmanager
def build_lock(output: str, *, write: bool, waiting: OnBuildWait | None) -> Iterator[str | None]:
    """The lock folder's path, its lock held while inside; made if missing when ``write``.

    None for a check (``write`` false) where no build ever ran: nothing to wait for.
    """
    path = lock_folder(output)
    if os.stat(os.path.dirname(path)).st_dev != os.stat(output).st_dev:
        raise InputError(
            f"{output}: a mount point: the build keeps its lock and temporary file beside the "
            f"output folder, in {path}, on the same file system; build into a folder inside the "
            "mount instead"
        )
    lock = os.path.join(path, BUILD_LOCK_FILE)
    if not real_folder(path, create=write) or not (write or os.path.lexists(lock)):
        yield None
        return
    if os.path.islink(lock):  # lstat: the link itself, never followed
        raise symlink_error(lock)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT if write else os.O_RDONLY, 0o644)
    try:
        if not _try_lock(fd):
            if waiting is not None:  # told the process id the holder wrote, if written yet
                os.lseek(fd, 0, os.SEEK_SET)
                pid = os.read(fd, PID_BYTES).strip()
                waiting(int(pid) if pid.isdigit() else None)
            while not _try_lock(fd):
                time.sleep(BUILD_LOCK_RETRY)
        if write:  # for the message of a build that has to wait
            pid = b"%d\n" % os.getpid()
            os.lseek(fd, 0, os.SEEK_SET)
            os.write(fd, pid)
            os.ftruncate(fd, len(pid))
            remove_file(os.path.join(path, TEMP_FILE))  # a killed build's
        yield path
    finally:
        os.close(fd)  # which releases the lock


def _try_lock(fd: int) -> bool:
    """Take the lock if no other process holds it; whether it was taken."""
    try:
        if sys.platform == "win32":
            os.lseek(fd, PID_BYTES, os.SEEK_SET)  # Windows' locks keep others from reading
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        else:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as error:
        if error.errno in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EACCES, errno.EDEADLK):
            return False
        raise
    return True


def real_folder(path: str, *, create: bool) -> bool:
    """Whether ``path`` is a folder, made if missing when ``create``; a link there is an error.

    ``lstat`` sees the link itself: no link is ever followed to write or remove.
    """
    if create:  # there already, or made meanwhile by another build: looked at below
        with contextlib.suppress(FileExistsError):
            os.mkdir(path)
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return False
    if stat.S_ISLNK(mode):
        raise symlink_error(path)
    if not stat.S_ISDIR(mode):
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), path)
    return True


def remove_file(path: str) -> None:
    """Remove the file (or link) ``path``, if there is one."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def symlink_error(path: str) -> InputError:
    return InputError(
        f"{path}: is a symbolic link: the build follows none where it writes; remove it"
    )
