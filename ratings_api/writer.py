"""Bring the output folder in line with the catalogue, touching only what changed.

The generator owns exactly the files ``away/api/articles/<id>/rating/index.json``
(and their folders) below the output folder, the other files it is given
(``extras``), its record ``.generate-state`` and its temporary files
``.generate-*.tmp``. Nothing else there is ever removed or rewritten, so a
``CNAME`` or ``_headers`` a user keeps in ``site/`` stays.

Every write goes to a temporary file first and is then renamed over its
target. rename(2) is atomic within a file system, so a reader, a crash or a
full disk sees each document either old and whole or new and whole. The
temporary files live at fixed places in the output folder, one per writer:
a killed build leaves at most those behind, and the next build consumes them.

The work is nearly all system calls, which release the GIL, so a few threads
write at once: on two cores, two threads write a fresh tree about 1.9 times
as fast as one. Paths are opened relative to directory descriptors with
``os`` calls: for a million articles, ``pathlib`` objects and ``open()`` file
objects cost more than the system calls themselves. What lets an unchanged
article cost one ``stat`` is the record (see ``record.py``).
"""

from __future__ import annotations

import errno
import os
import re
import threading
from array import array
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Final

from ratings_api.errors import InputError
from ratings_api.loader import Catalogue
from ratings_api.rating import ARTICLES_PATH, Renderer
from ratings_api.record import (
    Record,
    columns_for,
    empty,
    read_record,
    remove_record,
    write_record,
)

WORKERS: Final = min(4, os.cpu_count() or 1)
BATCH: Final = 256  # articles a worker takes at a time
PROGRESS_EVERY: Final = 0.25  # seconds between two progress reports
DOCUMENT: Final = "rating/index.json"
ID_NAME: Final = re.compile(r"[1-9][0-9]*")
TMP_NAME: Final = re.compile(r"\.generate-(?:[0-9]+|state)\.tmp")
EXAMPLES: Final = 5  # how many paths --check names


@dataclass
class Changes:
    """What a build did, or with ``dry_run`` what it would do."""

    written: int = 0
    removed: int = 0
    unchanged: int = 0
    # The first few paths changed, each after its place: documents to write
    # (0, position in the input), whichever thread finished first; then other
    # generated files (1, n), stale documents (2, n) and leftovers (3, n).
    noted: list[tuple[tuple[int, int], str]] = field(default_factory=list)

    def note(self, place: tuple[int, int], path: str) -> None:
        if len(self.noted) < EXAMPLES:
            self.noted.append((place, path))

    @property
    def examples(self) -> list[str]:
        return [path for _, path in sorted(self.noted)[:EXAMPLES]]

    def add(self, other: Changes) -> None:
        self.written += other.written
        self.removed += other.removed
        self.unchanged += other.unchanged
        self.noted += other.noted


@dataclass
class _Site:
    """The output folder and the articles, as the writers share them."""

    root: str
    root_fd: int
    articles_fd: int
    dry_run: bool
    catalogue: Catalogue
    render: Renderer
    previous: _Previous
    # What the new record says of each article's file; filled by index, which
    # needs no lock: each index belongs to one batch, and one thread.
    inodes: array[int] = field(init=False)
    times: array[int] = field(init=False)
    sizes: array[int] = field(init=False)
    failed: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        size = len(self.catalogue.ids)
        self.inodes, self.times, self.sizes = empty(size), empty(size), empty(size)

    def path(self, name: str) -> str:
        return os.path.join(self.root, ARTICLES_PATH, name)

    def keep(self, index: int, status: os.stat_result) -> None:
        self.inodes[index] = status.st_ino
        self.times[index] = status.st_mtime_ns
        self.sizes[index] = status.st_size


class _Previous:
    """What the output folder held before: from the record, or from a listing."""

    def __init__(self, articles_fd: int, record: Record | None, catalogue: Catalogue) -> None:
        self.record = record
        self.folders: set[str] | None = None  # article folders on disk, without a record
        self.places: dict[int, int] | None = None  # id -> index in the record
        if record is None:
            self.folders = _article_folders(articles_fd)
        elif record.ids.tolist() != catalogue.ids:
            self.places = {article_id: n for n, article_id in enumerate(record.ids)}

    def place(self, index: int, article_id: int) -> int | None:
        """Where the record has this article, if it has it."""
        if self.places is None:
            return index  # same articles in the same order: the usual rebuild
        return self.places.get(article_id)

    def stale(self, listed: list[int]) -> list[str]:
        """The article folders whose documents are not wanted any more, in order."""
        if self.record is None:
            return sorted(self.folders or (), key=int)  # what no document claimed
        if self.places is None:
            return []  # the very articles of the record
        return [str(article_id) for article_id in sorted(set(self.record.ids) - set(listed))]


class _Batches:
    """Hands out the articles' indexes in numbered ranges, to any number of threads."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._lock = threading.Lock()
        self.handed = 0  # articles handed out so far

    def next(self) -> range | None:
        with self._lock:
            start = self.handed
            if start >= self._size:
                return None
            self.handed = min(start + BATCH, self._size)
            return range(start, self.handed)


def sync_site(
    root: str,
    catalogue: Catalogue,
    render: Renderer,
    *,
    extras: Mapping[str, bytes] | None = None,
    dry_run: bool = False,
    progress: Callable[[int], None] | None = None,
) -> Changes:
    """Write each article's document that differs and remove the stale ones.

    ``extras`` are other generated files, by their path below ``root`` (such
    as ``_redirects``): written the same way, never removed. ``progress`` is
    called now and then, from this thread, with the number of articles
    handed to the writers so far.
    """
    articles_dir = os.path.join(root, ARTICLES_PATH)
    try:
        if not dry_run:
            os.makedirs(articles_dir, exist_ok=True)
        elif not os.path.isdir(articles_dir):
            changes = _all_missing(root, catalogue)
            _sync_extras(root, extras or {}, changes, dry_run)
            return changes
        root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as error:
        raise _write_error(root, error) from None
    try:
        articles_fd = os.open(ARTICLES_PATH, os.O_RDONLY | os.O_DIRECTORY, dir_fd=root_fd)
        try:
            changes = _sync(root, root_fd, articles_fd, catalogue, render, dry_run, progress)
        finally:
            os.close(articles_fd)
    finally:
        os.close(root_fd)
    _sync_extras(root, extras or {}, changes, dry_run)
    return changes


def _all_missing(root: str, catalogue: Catalogue) -> Changes:
    changes = Changes(written=len(catalogue.ids))
    for place, article_id in enumerate(catalogue.ids[:EXAMPLES]):
        changes.note((0, place), os.path.join(root, ARTICLES_PATH, str(article_id), DOCUMENT))
    return changes


def _sync(
    root: str,
    root_fd: int,
    articles_fd: int,
    catalogue: Catalogue,
    render: Renderer,
    dry_run: bool,
    progress: Callable[[int], None] | None,
) -> Changes:
    try:
        record = read_record(root_fd)
        if record is not None and record.stamp != render.stamp:
            record = None  # every document changes anyway
        if not dry_run:
            remove_record(root_fd)  # a build that dies from here on leaves none
        previous = _Previous(articles_fd, record, catalogue)
    except OSError as error:
        raise _write_error(root, error) from None
    site = _Site(root, root_fd, articles_fd, dry_run, catalogue, render, previous)
    changes = _write_all(site, progress)
    _remove_stale(site, changes)
    _remove_leftover_tmp(site, changes)
    try:
        if not catalogue.ids and not dry_run:
            _prune_empty(root_fd)
        if not dry_run:
            _save_record(site)
    except OSError as error:
        raise _write_error(root, error) from None
    return changes


def _write_all(site: _Site, progress: Callable[[int], None] | None) -> Changes:
    batches = _Batches(len(site.catalogue.ids))
    changes = Changes()
    with ThreadPoolExecutor(WORKERS, thread_name_prefix="writer") as pool:
        running = {pool.submit(_write_batches, site, batches, n) for n in range(WORKERS)}
        while running:
            done, running = wait(running, PROGRESS_EVERY, FIRST_EXCEPTION)
            for future in done:
                changes.add(future.result())  # the first error stops the build here
            if progress is not None:
                progress(batches.handed)
    return changes


def _write_batches(site: _Site, batches: _Batches, number: int) -> Changes:
    """One writer's loop: take a batch, sync its documents, until none is left."""
    changes = Changes()
    tmp = f".generate-{number}.tmp"
    ids = site.catalogue.ids
    try:
        while not site.failed.is_set() and (batch := batches.next()) is not None:
            for index in batch:
                if _unchanged_by_record(site, index) or not _sync_document(site, tmp, index):
                    changes.unchanged += 1
                else:
                    changes.written += 1
                    changes.note((0, index), site.path(f"{ids[index]}/{DOCUMENT}"))
    except BaseException:
        site.failed.set()  # the other writers stop at their next batch
        raise
    return changes


def _unchanged_by_record(site: _Site, index: int) -> bool:
    """Whether the record vouches for this article's document: same numbers, same file."""
    record = site.previous.record
    if record is None:
        return False
    catalogue = site.catalogue
    article_id = catalogue.ids[index]
    place = site.previous.place(index, article_id)
    if (
        place is None
        or record.sums[place] != catalogue.sums[index]
        or record.counts[place] != catalogue.counts[index]
    ):
        return False
    try:
        status = os.stat(f"{article_id}/{DOCUMENT}", dir_fd=site.articles_fd)
    except FileNotFoundError:
        return False
    except OSError as error:
        raise _write_error(site.path(f"{article_id}/{DOCUMENT}"), error) from None
    if (status.st_ino, status.st_mtime_ns, status.st_size) != (
        record.inodes[place],
        record.times[place],
        record.sizes[place],
    ):
        return False
    site.keep(index, status)
    return True


def _sync_document(site: _Site, tmp: str, index: int) -> bool:
    """Whether the document differs from the file (and unless dry_run, write it)."""
    catalogue = site.catalogue
    article_id = catalogue.ids[index]
    name = str(article_id)
    path = f"{name}/{DOCUMENT}"
    body = site.render(article_id, catalogue.sums[index], catalogue.counts[index])
    try:
        if _may_exist(site, name):
            status = _same_file(site.articles_fd, path, body)
            if status is not None:
                site.keep(index, status)
                return False
        if not site.dry_run:
            site.keep(index, _replace(site, tmp, name, body))
    except OSError as error:
        raise _write_error(site.path(path), error) from None
    return True


def _may_exist(site: _Site, name: str) -> bool:
    """False when the listing shows the article's folder is not there (then it is made)."""
    folders = site.previous.folders
    if folders is None or name in folders:
        if folders is not None:
            folders.remove(name)  # one set operation: atomic, and no other thread has this name
        return True
    if not site.dry_run:
        os.mkdir(name, dir_fd=site.articles_fd)
        os.mkdir(f"{name}/rating", dir_fd=site.articles_fd)
    return False


def _article_folders(articles_fd: int) -> set[str]:
    """The names of the folders the generator may have made: ids as it writes them."""
    with os.scandir(articles_fd) as entries:
        return {entry.name for entry in entries if ID_NAME.fullmatch(entry.name)}


def _same_file(dir_fd: int | None, path: str, body: bytes) -> os.stat_result | None:
    """The file's status if it holds exactly ``body``; None if it differs or is missing."""
    try:
        fd = os.open(path, os.O_RDONLY, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    try:
        if os.read(fd, len(body) + 1) != body:  # one byte past is enough to differ
            return None
        return os.fstat(fd)
    finally:
        os.close(fd)


def _replace(site: _Site, tmp: str, name: str, body: bytes) -> os.stat_result:
    """Write ``body`` as the article's document; the status the document then has."""
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644, dir_fd=site.root_fd)
    try:
        view = memoryview(body)
        while view:
            view = view[os.write(fd, view) :]
        status = os.fstat(fd)  # the rename keeps the inode, size and time
    finally:
        os.close(fd)
    target = f"{name}/{DOCUMENT}"
    try:
        os.replace(tmp, target, src_dir_fd=site.root_fd, dst_dir_fd=site.articles_fd)
    except FileNotFoundError:  # a folder is missing: the record had the article, the disk not
        for folder in (name, f"{name}/rating"):
            try:
                os.mkdir(folder, dir_fd=site.articles_fd)
            except FileExistsError:
                pass
        os.replace(tmp, target, src_dir_fd=site.root_fd, dst_dir_fd=site.articles_fd)
    return status


def _sync_extras(root: str, extras: Mapping[str, bytes], changes: Changes, dry_run: bool) -> None:
    """The few other generated files, one by one, after the documents."""
    for place, (name, body) in enumerate(sorted(extras.items())):
        assert not os.path.isabs(name) and ".." not in name.split("/"), name
        path = os.path.join(root, name)
        try:
            if _same_file(None, path, body) is not None:
                changes.unchanged += 1
                continue
            changes.written += 1
            changes.note((1, place), path)
            if not dry_run:
                os.makedirs(os.path.dirname(path), exist_ok=True)
                tmp = os.path.join(root, ".generate-0.tmp")  # the writers are done with it
                with open(tmp, "wb") as file:
                    file.write(body)
                os.replace(tmp, path)
        except OSError as error:
            raise _write_error(path, error) from None


def _remove_stale(site: _Site, changes: Changes) -> None:
    """Remove the documents of articles no longer listed."""
    stale = site.previous.stale(site.catalogue.ids)
    for place, name in enumerate(stale):
        path = f"{name}/{DOCUMENT}"
        try:
            if site.dry_run:
                os.stat(path, dir_fd=site.articles_fd)
            else:
                os.unlink(path, dir_fd=site.articles_fd)
                _remove_empty(site.articles_fd, (f"{name}/rating", name))
        except FileNotFoundError:
            continue  # a folder of the user's that happens to look like an id
        except OSError as error:
            raise _write_error(site.path(path), error) from None
        changes.removed += 1
        changes.note((2, place), site.path(path))


def _remove_leftover_tmp(site: _Site, changes: Changes) -> None:
    """A killed build may have left temporary files; a finished one never does."""
    with os.scandir(site.root_fd) as entries:
        leftovers = sorted(entry.name for entry in entries if TMP_NAME.fullmatch(entry.name))
    for place, name in enumerate(leftovers):
        try:
            if not site.dry_run:
                os.unlink(name, dir_fd=site.root_fd)
        except OSError as error:
            raise _write_error(os.path.join(site.root, name), error) from None
        changes.removed += 1
        changes.note((3, place), os.path.join(site.root, name))


def _save_record(site: _Site) -> None:
    catalogue = site.catalogue
    columns = columns_for(catalogue.ids, catalogue.sums, catalogue.counts)
    if columns is None:
        return  # numbers past 64 bits: the next build compares every document
    write_record(
        site.root_fd, Record(site.render.stamp, *columns, site.inodes, site.times, site.sizes)
    )


def _prune_empty(root_fd: int) -> None:
    """With no article left, remove the API folders too, unless the user keeps files there."""
    parts = ARTICLES_PATH.split("/")
    _remove_empty(root_fd, ["/".join(parts[:n]) for n in range(len(parts), 0, -1)])


def _remove_empty(dir_fd: int, folders: Iterable[str]) -> None:
    """Remove each folder in turn, stopping at the first that is not empty."""
    for folder in folders:
        try:
            os.rmdir(folder, dir_fd=dir_fd)
        except OSError as error:
            if error.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOENT):
                return
            raise


def _write_error(path: str, error: OSError) -> InputError:
    return InputError(f"{path}: cannot write: {error.strerror}")
