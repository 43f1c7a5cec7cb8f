"""What the last build wrote, so that the next one can skip what has not changed.

For every article the record keeps its id, sum and count, and the inode,
modification time and size its document had when the build left it. A later
build that finds an article's numbers unchanged and one ``stat`` of its file
matching the record knows the document is still right, without rendering or
reading it: one system call instead of three, and no rendering.

The record is a hint, never the truth: a file replaced by hand or by
``git checkout`` has another inode or time and is compared in full, and a
build removes the record before it writes anything, so a build that dies
leaves none and the next one checks every document.

Its name starts with a dot, like the temporary files: Netlify and GitHub
Pages publish no dotfiles, and the WhiteNoise app and nginx serve none.
"""

from __future__ import annotations

import os
from array import array
from dataclasses import dataclass
from typing import Final

RECORD_NAME: Final = ".generate-state"
MAGIC: Final = b"ratings-api build record 1\n"
COLUMNS: Final = 6  # ids, sums, counts, inodes, times, sizes


def empty(size: int) -> array[int]:
    """A column of ``size`` zeros."""
    return from_bytes(bytes(8 * size))


def from_bytes(data: bytes | memoryview) -> array[int]:
    column = array("q")  # array("q", data) would take each byte for an item
    column.frombytes(data)
    return column


@dataclass
class Record:
    """Parallel columns, one entry an article, in the order of the input."""

    stamp: str  # what else every document depends on: the format and the base URL
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


def read_record(root_fd: int) -> Record | None:
    """The record in the output folder, or None if there is none or it is not whole."""
    try:
        fd = os.open(RECORD_NAME, os.O_RDONLY, dir_fd=root_fd)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as file:
        data = file.read()
    if not data.startswith(MAGIC):
        return None
    stamp_end = data.find(b"\n", len(MAGIC))
    size_end = data.find(b"\n", stamp_end + 1)
    try:
        stamp = data[len(MAGIC) : stamp_end].decode()
        size = int(data[stamp_end + 1 : size_end])
    except ValueError:
        return None
    body = memoryview(data)[size_end + 1 :]
    if stamp_end < 0 or size_end < 0 or len(body) != COLUMNS * 8 * size:
        return None
    columns = [from_bytes(body[n * 8 * size : (n + 1) * 8 * size]) for n in range(COLUMNS)]
    return Record(stamp, *columns)


def write_record(root_fd: int, record: Record) -> None:
    """Save the record whole or not at all (a temporary file renamed into place)."""
    tmp = f"{RECORD_NAME}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644, dir_fd=root_fd)
    with os.fdopen(fd, "wb") as file:
        file.write(MAGIC + record.stamp.encode() + b"\n" + b"%d\n" % len(record.ids))
        for column in record.columns():
            column.tofile(file)
    os.replace(tmp, RECORD_NAME, src_dir_fd=root_fd, dst_dir_fd=root_fd)


def remove_record(root_fd: int) -> None:
    try:
        os.unlink(RECORD_NAME, dir_fd=root_fd)
    except FileNotFoundError:
        pass
