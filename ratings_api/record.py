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

Its columns, and the catalogue's, are held in memory mapped shared and
anonymous (``shared_columns``), not in the heap: a forked writer process gets
no copy of the page table entries of such a mapping, and its resident memory
grows only by the pages of the batches it reads. Heap memory would count whole
in every writer's resident size: at a million articles, three processes
summed 471 MB that way, against the issue's 400 (319 MB now).
"""

from __future__ import annotations

import errno
import mmap
import os
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, cast

RECORD_NAME: Final = "record"
RECORD_TMP: Final = "record.tmp"
MAGIC: Final = b"ratings-api build record 2\n"
COLUMNS: Final = 6  # ids, sums, counts, inodes, times, sizes
HEAD_MAX: Final = 65536  # bytes read for the lines before the columns (the stamp holds a URL)
FolderIdentity = tuple[int, int, int, int, int]  # device, inode, ctime, links, size
Column = memoryview  # of signed 64-bit numbers ("q"), in shared memory


def shared_memory(size: int) -> memoryview:
    """``size`` bytes of zeros, mapped shared and anonymous: see the module's text."""
    return memoryview(mmap.mmap(-1, max(1, size)))[:size]


def shared_columns(
    ids: Sequence[int], sums: Sequence[int], counts: Sequence[int]
) -> tuple[Column, Column, Column] | None:
    """A catalogue's columns in shared memory, or None if a number needs more than 64 bits.

    Columns that are all in shared memory already (this function's result)
    are taken as they are.
    """
    shared = (ids, sums, counts)
    if all(isinstance(column, memoryview) for column in shared):
        return cast("tuple[Column, Column, Column]", shared)
    size = len(ids)
    memory = shared_memory(3 * 8 * size)
    ids_, sums_, counts_ = (memory[n * 8 * size : (n + 1) * 8 * size].cast("q") for n in range(3))
    try:
        for target, column in ((ids_, ids), (sums_, sums), (counts_, counts)):
            target[:] = array("q", column)
    except OverflowError:
        return None
    return ids_, sums_, counts_


def folder_identity(status: os.stat_result) -> FolderIdentity:
    """What changes when an entry is added to, removed from or renamed in a folder."""
    return (status.st_dev, status.st_ino, status.st_ctime_ns, status.st_nlink, status.st_size)


@dataclass
class Record:
    """Parallel columns, one entry an article, in the order of the input."""

    stamp: str  # what else every document depends on: the format and the base URL
    folder: FolderIdentity  # the articles folder, as the build left it
    ids: Column
    sums: Column
    counts: Column
    inodes: Column
    times: Column
    sizes: Column

    def columns(self) -> tuple[Column, ...]:
        return self.ids, self.sums, self.counts, self.inodes, self.times, self.sizes


def read_record(state_fd: int) -> Record | None:
    """The record in the state folder, or None if there is none or it is not whole."""
    try:
        fd = os.open(RECORD_NAME, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=state_fd)
    except OSError as error:
        if error.errno in (errno.ENOENT, errno.ELOOP):
            return None  # none, or a link put there: not ours to follow
        raise
    with os.fdopen(fd, "rb") as file:
        data = shared_memory(os.fstat(file.fileno()).st_size)
        if file.readinto(data) != len(data) or file.read(1):
            return None  # changed while read: not ours, or not whole
    if bytes(data[: len(MAGIC)]) != MAGIC:
        return None
    head = bytes(data[len(MAGIC) : len(MAGIC) + HEAD_MAX]).split(b"\n", 3)
    if len(head) < 4:
        return None
    try:
        stamp = head[0].decode()
        numbers = tuple(int(number) for number in head[1].split())
        size = int(head[2])
    except ValueError:
        return None
    start = len(MAGIC) + sum(len(line) + 1 for line in head[:3])
    if len(numbers) != 5 or len(data) - start != COLUMNS * 8 * size:
        return None
    body = data[start:]
    columns = [body[n * 8 * size : (n + 1) * 8 * size].cast("q") for n in range(COLUMNS)]
    folder = (numbers[0], numbers[1], numbers[2], numbers[3], numbers[4])
    return Record(stamp, folder, *columns)


def write_record(state_fd: int, record: Record) -> None:
    """Save the record whole or not at all (a temporary file renamed into place)."""
    fd = create_exclusive(state_fd, RECORD_TMP)
    with os.fdopen(fd, "wb") as file:
        folder = b" ".join(b"%d" % number for number in record.folder)
        file.write(MAGIC + record.stamp.encode() + b"\n" + folder + b"\n%d\n" % len(record.ids))
        for column in record.columns():
            file.write(column)
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
