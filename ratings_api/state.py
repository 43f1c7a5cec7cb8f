"""Where a build keeps what is not published: its lock, its record, its temporary files.

They live in a folder of their own beside the output folder: for ``site``,
``.site.generate`` in the same parent. Beside, not inside, so that the output
folder holds exactly what is published (the same input gives the same tree,
byte for byte, and no host recipe needs exclusions); in the same parent, so
that it is on the same file system and a temporary file renamed into the
output stays one atomic rename(2). An output folder that is a mount point
has no such place, and is refused with a message that says what to do.

The lock is ``flock`` on the ``lock`` file there: the kernel releases it when
its holder dies, however it dies, so a killed build never leaves a stale lock.
The writer processes a build forks inherit the locked descriptor, so the lock
is held until the last of them is gone. A build waits for another build on the
same folder to finish (and says so, naming its process id) rather than
stopping: the second build then runs on a whole tree and the result is what
running them one after the other gives. ``--check`` takes the lock shared: it
waits for a build under way, and never creates the folder (it writes nothing).
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Final

from ratings_api.errors import InputError

STATE_SUFFIX: Final = ".generate"
LOCK_NAME: Final = "lock"
TMP_NAME: Final = re.compile(r"write-[0-9]+\.tmp|record\.tmp")  # a killed build's leftovers
WRITER_FOLDER: Final = re.compile(r"writer-[0-9]+")
FOLDER_FLAGS: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# What opening a link with FOLDER_FLAGS fails with: ENOTDIR on Linux, ELOOP on macOS.
LINKED_FOLDER: Final = (errno.ENOTDIR, errno.ELOOP)

Waiting = Callable[[int | None], None]  # told the other build's process id, if known


@dataclass(frozen=True)
class State:
    path: str
    fd: int


def state_path(output: str) -> str:
    """The state folder of ``output``: ``.<name>.generate`` beside its real path."""
    parent, name = os.path.split(os.path.realpath(output))
    if not name:
        raise InputError(f"{output}: the root of the file system cannot be the output folder")
    return os.path.join(parent, f".{name}{STATE_SUFFIX}")


@contextmanager
def locked_state(
    output: str, root_fd: int, *, write: bool, waiting: Waiting | None = None
) -> Iterator[State | None]:
    """The state folder, locked for this build (shared for a check); None if a check finds none.

    Made if needed when ``write``. The lock is released on leaving.
    """
    path = state_path(output)
    parent = os.path.dirname(path)
    if os.stat(parent).st_dev != os.fstat(root_fd).st_dev:
        raise InputError(
            f"{output}: a mount point: the build keeps its state beside the output folder, "
            f"in {path}, on the same file system; build into a folder inside the mount instead"
        )
    if write:
        try:
            os.mkdir(path)
        except FileExistsError:
            pass
    state_fd = _open_state(path, write)
    if state_fd is None:
        yield None
        return
    try:
        lock_fd = _lock(state_fd, path, write, waiting)
        try:
            yield State(path, state_fd)
        finally:
            if lock_fd is not None:
                os.close(lock_fd)  # the writers are gone by now: this releases the lock
    finally:
        os.close(state_fd)


def _open_state(path: str, write: bool) -> int | None:
    try:
        return os.open(path, FOLDER_FLAGS)
    except FileNotFoundError:
        if write:
            raise
        return None
    except OSError as error:
        if error.errno in LINKED_FOLDER and os.path.islink(path):
            raise symlink_error(path) from None
        raise


def _lock(state_fd: int, path: str, write: bool, waiting: Waiting | None) -> int | None:
    flags = (os.O_RDWR | os.O_CREAT if write else os.O_RDONLY) | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(LOCK_NAME, flags, 0o644, dir_fd=state_fd)
    except OSError as error:
        if error.errno == errno.ENOENT and not write:
            return None  # no build ever took it
        if error.errno == errno.ELOOP:
            raise symlink_error(os.path.join(path, LOCK_NAME)) from None
        raise
    operation = fcntl.LOCK_EX if write else fcntl.LOCK_SH
    try:
        try:
            fcntl.flock(fd, operation | fcntl.LOCK_NB)
        except BlockingIOError:
            if waiting is not None:
                waiting(_holder(fd))
            fcntl.flock(fd, operation)
        if write:  # for the message of a build that has to wait
            os.ftruncate(fd, 0)
            os.pwrite(fd, b"%d\n" % os.getpid(), 0)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _holder(fd: int) -> int | None:
    """The process id the lock's holder wrote, if it has written it yet."""
    try:
        return int(os.pread(fd, 32, 0))
    except ValueError:
        return None


def remove_leftovers(state_fd: int) -> None:
    """Temporary files and writers' folders a killed build left; never through a link."""
    with os.scandir(state_fd) as entries:
        found = [(entry.name, entry.is_dir(follow_symlinks=False)) for entry in entries]
    for name, folder in found:
        if WRITER_FOLDER.fullmatch(name) and folder:
            inside = os.open(name, FOLDER_FLAGS, dir_fd=state_fd)
            try:
                remove_leftovers(inside)
            finally:
                os.close(inside)
            os.rmdir(name, dir_fd=state_fd)
        elif TMP_NAME.fullmatch(name) or WRITER_FOLDER.fullmatch(name):
            os.unlink(name, dir_fd=state_fd)


def writer_folder(state_fd: int, number: int) -> int:
    """A folder of one writer's own for its temporary file.

    Each writer process creates and renames its files in a folder no other
    writer touches, so they do not queue for the same folder's lock.
    """
    name = f"writer-{number}"
    os.mkdir(name, dir_fd=state_fd)  # the build removed any leftover first
    return os.open(name, FOLDER_FLAGS, dir_fd=state_fd)


def symlink_error(path: str) -> InputError:
    return InputError(
        f"{path}: is a symbolic link: the build follows none where it writes; remove it"
    )
