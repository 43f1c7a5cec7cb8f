"""What the last build wrote, so that the next one can skip what has not changed.

For every article the record keeps its id, sum and count, and the inode,
modification time and size its document had when the build left it. A later
build that finds an article's numbers unchanged and one ``lstat`` of its file
matching the record knows the document is still right, without rendering or
reading it: one system call instead of three, and no rendering.

It also keeps the identity of the articles folder itself (device, inode,
change time, link count, size) as the build left it. A folder someone adds
there (``99/rating/index.json`` by hand, or by a ``git checkout`` of an old
site) changes that folder, and its change time cannot be set back by hand:
the next build then lists the folder and removes what no article claims.
When the folder is as the build left it, no listing is needed: one ``fstat``.

The record is a hint, never the truth: a file replaced by hand or by
``git checkout`` has another inode or time and is compared in full, and a
build removes the record before it writes anything, so a build that dies
leaves none and the next one checks every document.

It lives in the build's state folder beside the output folder (see
``state.py``), never in what is published.
"""

from __future__ import annotations

import errno
import os
from array import array
from dataclasses import dataclass
from typing import Final

RECORD_NAME: Final = "record"
RECORD_TMP: Final = "record.tmp"
MAGIC: Final = b"ratings-api build record 2\n"
COLUMNS: Final = 6  # ids, sums, counts, inodes, times, sizes
FolderIdentity = tuple[int, int, int, int, int]  # device, inode, ctime, links, size


def empty(size: int) -> array[int]:
    """A column of ``size`` zeros."""
    return from_bytes(bytes(8 * size))


def from_bytes(data: bytes | memoryview) -> array[int]:
    column = array("q")  # array("q", data) would take each byte for an item
    column.frombytes(data)
    return column


def folder_identity(status: os.stat_result) -> FolderIdentity:
    """What changes when an entry is added to, removed from or renamed in a folder."""
    return (status.st_dev, status.st_ino, status.st_ctime_ns, status.st_nlink, status.st_size)


@dataclass
class Record:
    """Parallel columns, one entry an article, in the order of the input."""

    stamp: str  # what else every document depends on: the format and the base URL
    folder: FolderIdentity  # the articles folder, as the build left it
    ids: array[int]
    sums: array[int]
    counts: array[int]
    inodes: array[int]
    times: array[int]
    sizes: array[int]

    def columns(self) -> tuple[array[int], ...]:
        return self.ids, self.sums, self.counts, self.inodes, self.times, self.sizes


def columns_for(
    ids: list[int], sums: list[int], counts: list[int]
) -> tuple[array[int], array[int], array[int]] | None:
    """The catalogue as record columns, or None if a number needs more than 64 bits."""
    try:
        return array("q", ids), array("q", sums), array("q", counts)
    except OverflowError:
        return None


def read_record(state_fd: int) -> Record | None:
    """The record in the state folder, or None if there is none or it is not whole."""
    try:
        fd = os.open(RECORD_NAME, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=state_fd)
    except OSError as error:
        if error.errno in (errno.ENOENT, errno.ELOOP):
            return None  # none, or a link put there: not ours to follow
        raise
    with os.fdopen(fd, "rb") as file:
        data = file.read()
    if not data.startswith(MAGIC):
        return None
    lines = data[len(MAGIC) :].split(b"\n", 3)
    if len(lines) < 4:
        return None
    try:
        stamp = lines[0].decode()
        numbers = tuple(int(number) for number in lines[1].split())
        size = int(lines[2])
    except ValueError:
        return None
    body = memoryview(lines[3])
    if len(numbers) != 5 or len(body) != COLUMNS * 8 * size:
        return None
    columns = [from_bytes(body[n * 8 * size : (n + 1) * 8 * size]) for n in range(COLUMNS)]
    folder = (numbers[0], numbers[1], numbers[2], numbers[3], numbers[4])
    return Record(stamp, folder, *columns)


def write_record(state_fd: int, record: Record) -> None:
    """Save the record whole or not at all (a temporary file renamed into place)."""
    fd = create_exclusive(state_fd, RECORD_TMP)
    with os.fdopen(fd, "wb") as file:
        folder = b" ".join(b"%d" % number for number in record.folder)
        file.write(MAGIC + record.stamp.encode() + b"\n" + folder + b"\n%d\n" % len(record.ids))
        for column in record.columns():
            column.tofile(file)
    os.replace(RECORD_TMP, RECORD_NAME, src_dir_fd=state_fd, dst_dir_fd=state_fd)


def remove_record(state_fd: int) -> None:
    try:
        os.unlink(RECORD_NAME, dir_fd=state_fd)
    except FileNotFoundError:
        pass


def create_exclusive(dir_fd: int, name: str) -> int:
    """A new file ``name`` for writing, never through a link: whatever was there goes first.

    O_EXCL fails on any existing name, a link included, so nothing it points
    to is ever opened; a leftover of a killed build is removed and made anew.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        return os.open(name, flags, 0o644, dir_fd=dir_fd)
    except FileExistsError:
        os.unlink(name, dir_fd=dir_fd)
        return os.open(name, flags, 0o644, dir_fd=dir_fd)
