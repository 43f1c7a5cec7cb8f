"""Bring the output folder in line with the catalogue, touching only what changed.

The generator owns exactly the files ``away/api/articles/<id>/rating/index.json``
(and their folders) below the output folder, and the other files it is given
(``extras``). Nothing else there is ever removed or rewritten, so a ``CNAME``
or ``_headers`` a user keeps in ``site/`` stays. Its lock, record and
temporary files live beside the output folder, in its state folder
(``state.py``): the output folder holds what is published, and nothing else.

Every write goes to a temporary file in the state folder first and is then
renamed over its target. rename(2) is atomic within a file system, so a
reader, a crash, a kill or a full disk sees each document either old and whole
or new and whole.

No symbolic link below the output folder is ever followed to write, truncate
or remove: temporary files are made with O_EXCL, documents are compared with
O_NOFOLLOW, and a write into a folder the build did not just make opens each
folder with O_NOFOLLOW. A link where the build writes a file is replaced by
the file (the link goes, never what it points to); a link where the build
needs a folder of its own is an error that names it.

The writing is done by forked processes (``workers.py``), or in this
process when one CPU is all there is. Paths are opened relative to directory
descriptors with ``os`` calls: for a million articles, ``pathlib`` objects and
``open()`` file objects cost more than the system calls themselves. What lets
an unchanged article cost one ``lstat`` is the record (``record.py``).
"""

from __future__ import annotations

import dataclasses
import errno
import gc
import os
import re
import stat
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from ratings_api.errors import InputError
from ratings_api.loader import Catalogue
from ratings_api.rating import ARTICLES_PATH, Renderer
from ratings_api.record import (
    Column,
    Record,
    create_exclusive,
    folder_identity,
    read_record,
    remove_record,
    shared_columns,
    shared_memory,
    write_record,
)
from ratings_api.state import (
    FOLDER_FLAGS,
    LINKED_FOLDER,
    State,
    Waiting,
    locked_state,
    remove_leftovers,
    symlink_error,
    writer_folder,
)
from ratings_api.workers import PIPE_TOKENS, available_cpus, run_processes

BATCH: Final = 256  # articles a writer takes at a time, at least
PROGRESS_EVERY: Final = 0.25  # seconds between two progress reports
DOCUMENT: Final = "rating/index.json"
ID_NAME: Final = re.compile(r"[1-9][0-9]*")
# What the build of earlier versions kept inside the output folder: removed on sight.
OLD_STATE_NAME: Final = re.compile(r"\.generate-(?:[0-9]+\.tmp|state|state\.tmp)")
EXAMPLES: Final = 5  # how many paths --check names


@dataclass
class Changes:
    """What a build did, or with ``dry_run`` what it would do."""

    written: int = 0
    removed: int = 0
    unchanged: int = 0
    # The first few paths changed, each after its place: documents to write
    # (0, position in the input), whichever writer finished first; then other
    # generated files (1, n), stale documents (2, n) and old state files (3, n).
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


class _Shared:
    """Numbers the writers fill in, one slot each, in memory shared across fork()."""

    def __init__(self, size: int, workers: int) -> None:
        column = 8 * size
        view = shared_memory(8 * (3 * size + workers))
        self.inodes, self.times, self.sizes = (
            view[n * column : (n + 1) * column].cast("q") for n in range(3)
        )
        self.done = view[3 * column :].cast("q")  # articles, per writer

    def keep(self, index: int, status: os.stat_result) -> None:
        self.inodes[index] = status.st_ino
        self.times[index] = status.st_mtime_ns
        self.sizes[index] = status.st_size


@dataclass
class _Site:
    """The output folder and the articles, as the writers share them."""

    root: str
    root_fd: int
    articles_fd: int
    state_fd: int
    dry_run: bool
    ids: Sequence[int]
    sums: Sequence[int]
    counts: Sequence[int]
    render: Renderer
    previous: _Previous
    shared: _Shared

    def path(self, name: str) -> str:
        return os.path.join(self.root, ARTICLES_PATH, name)


class _Previous:
    """What the output folder held before: from the record, and a listing where needed."""

    def __init__(self, site_path: str, articles_fd: int, record: Record | None, ids: Sequence[int]):
        self.record = record
        self.folders: set[int] | None = None  # article folders on disk, when listed
        self.places: dict[int, int] | None = None  # id -> index in the record
        if record is None or record.folder != folder_identity(os.fstat(articles_fd)):
            self.folders = _article_folders(site_path, articles_fd)  # new entries: strays?
        if record is not None and not _same_ids(record.ids, ids):
            self.places = {article_id: n for n, article_id in enumerate(record.ids)}
        # No article folder there (a first build, or site/ deleted): every article's
        # folder is made, no question asked, whatever the record says.
        self.fresh = self.folders is not None and not self.folders

    def place(self, index: int, article_id: int) -> int | None:
        """Where the record has this article, if it has it."""
        if self.places is None:
            return index  # same articles in the same order: the usual rebuild
        return self.places.get(article_id)

    def may_exist(self, article_id: int) -> bool:
        return self.folders is None or article_id in self.folders

    def stale(self, listed: Sequence[int]) -> list[int]:
        """The article folders whose documents are not wanted any more, in order."""
        if self.folders is not None:
            return sorted(self.folders.difference(listed))
        if self.record is None or self.places is None:
            return []  # the very articles of the record, and the folder as it left it
        return sorted(set(self.record.ids).difference(listed))


def _same_ids(recorded: Column, ids: Sequence[int]) -> bool:
    if isinstance(ids, memoryview):
        return recorded == ids
    return len(recorded) == len(ids) and recorded.tolist() == list(ids)


def sync_site(
    root: str,
    catalogue: Catalogue,
    render: Renderer,
    *,
    extras: Mapping[str, bytes] | None = None,
    dry_run: bool = False,
    progress: Callable[[int], None] | None = None,
    jobs: int | None = None,
    waiting: Waiting | None = None,
) -> Changes:
    """Write each article's document that differs and remove the stale ones.

    ``extras`` are other generated files, by their path below ``root`` (such
    as ``_redirects``): written the same way, never removed. ``progress`` is
    called now and then, from this thread, with the number of articles
    handed to the writers so far. ``jobs`` is the number of writer processes
    at most (default: the CPUs this process may use). ``waiting`` is told
    when another build holds the folder, before this one waits for it.
    """
    try:
        if not dry_run:
            os.makedirs(root, exist_ok=True)
        elif not os.path.isdir(root):
            return _all_missing(root, catalogue, extras or {})
        root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileExistsError:  # makedirs' word for a file where the folder should be
        raise _write_error(root, NotADirectoryError(errno.ENOTDIR, "Not a directory")) from None
    except OSError as error:
        raise _write_error(root, error) from None
    try:
        with locked_state(root, root_fd, write=not dry_run, waiting=waiting) as state:
            return _sync_locked(
                root, root_fd, state, catalogue, render, extras or {}, dry_run, progress, jobs
            )
    except OSError as error:
        raise _write_error(root, error) from None
    finally:
        os.close(root_fd)


def _sync_locked(
    root: str,
    root_fd: int,
    state: State | None,
    catalogue: Catalogue,
    render: Renderer,
    extras: Mapping[str, bytes],
    dry_run: bool,
    progress: Callable[[int], None] | None,
    jobs: int | None,
) -> Changes:
    changes = Changes()
    _remove_old_state(root, root_fd, changes, dry_run)
    record = None
    if state is not None:
        record = read_record(state.fd)
        if record is not None and record.stamp != render.stamp:
            record = None  # every document changes anyway
        if not dry_run:
            remove_record(state.fd)  # a build that dies from here on leaves none
            remove_leftovers(state.fd)
    articles_fd = _open_folders(root_fd, root, ARTICLES_PATH, create=not dry_run)
    if articles_fd is None:  # --check, and no articles folder yet
        changes.add(_all_missing(root, catalogue, {}))
        _sync_extras(root, root_fd, -1, extras, changes, dry_run)
        return changes
    try:
        columns = shared_columns(catalogue.ids, catalogue.sums, catalogue.counts)
        ids, sums, counts = columns or (catalogue.ids, catalogue.sums, catalogue.counts)
        previous = _Previous(root, articles_fd, record, ids)
        workers = _workers(jobs, len(ids))
        shared = _Shared(len(ids), workers)
        site = _Site(
            root, root_fd, articles_fd, -1 if state is None else state.fd, dry_run,
            ids, sums, counts, render, previous, shared,
        )  # fmt: skip
        changes.add(_write_all(site, workers, progress))
        if state is not None and not dry_run:
            remove_leftovers(state.fd)  # the writers' folders, empty now
        _remove_stale(site, changes)
        if not ids and not dry_run:
            _prune_empty(root_fd)
        _sync_extras(root, root_fd, site.state_fd, extras, changes, dry_run)
        if not dry_run and columns is not None and state is not None:
            folder = folder_identity(os.fstat(articles_fd))
            write_record(
                state.fd,
                Record(render.stamp, folder, *columns, shared.inodes, shared.times, shared.sizes),
            )
    finally:
        os.close(articles_fd)
    return changes


def _all_missing(root: str, catalogue: Catalogue, extras: Mapping[str, bytes]) -> Changes:
    changes = Changes(written=len(catalogue.ids) + len(extras))
    for place, article_id in enumerate(catalogue.ids[:EXAMPLES]):
        changes.note((0, place), os.path.join(root, ARTICLES_PATH, str(article_id), DOCUMENT))
    for place, name in enumerate(sorted(extras)):
        changes.note((1, place), os.path.join(root, name))
    return changes


# --- the writers -----------------------------------------------------------


def _workers(jobs: int | None, size: int) -> int:
    """Writer processes: one in-process writer where a fork cannot pay (or is unsafe)."""
    wanted = available_cpus() if jobs is None else jobs
    workers = min(wanted, -(-size // BATCH))
    # Forking a process that runs other threads (the server's) copies their
    # locks in whatever state they are: write in this process instead.
    if workers <= 1 or threading.active_count() > 1:
        return 1
    return workers


def _write_all(site: _Site, workers: int, progress: Callable[[int], None] | None) -> Changes:
    size = len(site.ids)
    batch = max(BATCH, -(-size // PIPE_TOKENS))
    if workers == 1:
        return _write_here(site, batch, progress)

    def work(number: int, next_batch: Callable[[], int | None]) -> Changes:
        gc.disable()  # a collection would touch, and so copy, every shared object
        changes = Changes()
        tmp = f"write-{number}.tmp"
        mine = (
            site
            if site.dry_run
            else dataclasses.replace(site, state_fd=_writer_folder(site, number))
        )
        while (start := next_batch()) is not None:
            indexes = range(start * batch, min(size, (start + 1) * batch))
            _write_range(mine, indexes, tmp, changes)
            site.shared.done[number] += len(indexes)
        return changes

    def tick() -> None:
        if progress is not None:
            progress(sum(site.shared.done))

    results = run_processes(workers, -(-size // batch), work, tick, PROGRESS_EVERY, site.root)
    changes = Changes()
    for result in results:
        assert isinstance(result, Changes)
        changes.add(result)
    return changes


def _writer_folder(site: _Site, number: int) -> int:
    try:
        return writer_folder(site.state_fd, number)
    except OSError as error:
        raise _write_error(site.root, error) from None


def _write_here(site: _Site, batch: int, progress: Callable[[int], None] | None) -> Changes:
    """The single writer: in this process, no fork."""
    changes = Changes()
    reported = time.monotonic()
    for start in range(0, len(site.ids), batch):
        _write_range(site, range(start, min(len(site.ids), start + batch)), "write-0.tmp", changes)
        if progress is not None and time.monotonic() - reported >= PROGRESS_EVERY:
            progress(start + batch)
            reported = time.monotonic()
    return changes


def _write_range(site: _Site, indexes: range, tmp: str, changes: Changes) -> None:
    if site.previous.fresh and not site.dry_run:
        indexes = _write_fresh(site, indexes, tmp, changes)
    for index in indexes:
        if _unchanged_by_record(site, index) or not _sync_document(site, tmp, index):
            changes.unchanged += 1
        else:
            changes.written += 1
            if len(changes.noted) < EXAMPLES:
                changes.note((0, index), site.path(f"{site.ids[index]}/{DOCUMENT}"))


def _write_fresh(site: _Site, indexes: range, tmp: str, changes: Changes) -> range:
    """Into an empty articles folder: the general steps, without their questions.

    Most of a first build's time is here, so it is one loop with no calls but
    the system calls and rendering. Returns the indexes it left undone: from
    the first that failed, which the general path then takes, and reports.
    """
    ids, sums, counts, render = site.ids, site.sums, site.counts, site.render
    articles_fd, state_fd = site.articles_fd, site.state_fd
    inodes, times, sizes = site.shared.inodes, site.shared.times, site.shared.sizes
    mkdir, open_, write, fstat, close, replace = (
        os.mkdir, os.open, os.write, os.fstat, os.close, os.replace
    )  # fmt: skip
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    done = indexes.start
    try:
        for index in indexes:
            article_id = ids[index]
            body = render(article_id, sums[index], counts[index])
            folder = f"{article_id}/rating"
            mkdir(str(article_id), dir_fd=articles_fd)
            mkdir(folder, dir_fd=articles_fd)
            fd = open_(tmp, flags, 0o644, dir_fd=state_fd)
            try:
                if write(fd, body) != len(body):
                    raise OSError(errno.EIO, "short write")  # the general path retries
                status = fstat(fd)
            finally:
                close(fd)
            replace(tmp, f"{folder}/index.json", src_dir_fd=state_fd, dst_dir_fd=articles_fd)
            inodes[index], times[index] = status.st_ino, status.st_mtime_ns
            sizes[index] = status.st_size
            done = index + 1
    except OSError:
        pass  # the general path knows what to do, or what to say
    finished = range(indexes.start, done)
    changes.written += len(finished)
    for index in finished[: max(0, EXAMPLES - len(changes.noted))]:
        changes.note((0, index), site.path(f"{ids[index]}/{DOCUMENT}"))
    return range(done, indexes.stop)


def _unchanged_by_record(site: _Site, index: int) -> bool:
    """Whether the record vouches for this article's document: same numbers, same file."""
    record = site.previous.record
    if record is None:
        return False
    article_id = site.ids[index]
    place = site.previous.place(index, article_id)
    if (
        place is None
        or record.sums[place] != site.sums[index]
        or record.counts[place] != site.counts[index]
    ):
        return False
    path = f"{article_id}/{DOCUMENT}"
    try:
        status = os.stat(path, dir_fd=site.articles_fd, follow_symlinks=False)
    except (FileNotFoundError, NotADirectoryError):
        return False
    except OSError as error:
        raise _write_error(site.path(path), error) from None
    if (status.st_ino, status.st_mtime_ns, status.st_size) != (
        record.inodes[place],
        record.times[place],
        record.sizes[place],
    ):
        return False
    site.shared.keep(index, status)
    return True


def _sync_document(site: _Site, tmp: str, index: int) -> bool:
    """Whether the document differs from the file (and unless dry_run, write it)."""
    article_id = site.ids[index]
    name = str(article_id)
    path = f"{name}/{DOCUMENT}"
    body = site.render(article_id, site.sums[index], site.counts[index])
    try:
        if site.previous.may_exist(article_id):
            status = _same_file(site.articles_fd, path, body)
            if status is not None:
                site.shared.keep(index, status)
                return False
            if not site.dry_run:
                site.shared.keep(index, _replace_in(site, tmp, name, body))
        elif not site.dry_run:
            try:
                os.mkdir(name, dir_fd=site.articles_fd)
                os.mkdir(f"{name}/rating", dir_fd=site.articles_fd)
            except FileExistsError:  # made since the listing: a fresh write cut short
                site.shared.keep(index, _replace_in(site, tmp, name, body))
                return True
            status = _write_tmp(site.state_fd, tmp, body)
            os.replace(tmp, path, src_dir_fd=site.state_fd, dst_dir_fd=site.articles_fd)
            site.shared.keep(index, status)  # the rename keeps the inode, size and time
    except OSError as error:
        raise _write_error(site.path(path), error) from None
    return True


def _article_folders(root: str, articles_fd: int) -> set[int]:
    """The ids of the folders the generator may have made: ids as it writes them."""
    folders = set()
    with os.scandir(articles_fd) as entries:
        for entry in entries:
            if ID_NAME.fullmatch(entry.name):
                if entry.is_symlink():
                    raise symlink_error(os.path.join(root, ARTICLES_PATH, entry.name))
                folders.add(int(entry.name))
    return folders


def _same_file(dir_fd: int, path: str, body: bytes) -> os.stat_result | None:
    """The file's status if it holds exactly ``body``; None if it differs, is missing or a link."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError as error:
        if error.errno in (errno.ENOENT, errno.ELOOP, errno.ENOTDIR):
            return None
        raise
    try:
        if os.read(fd, len(body) + 1) != body:  # one byte past is enough to differ
            return None
        return os.fstat(fd)
    finally:
        os.close(fd)


def _write_tmp(state_fd: int, tmp: str, body: bytes) -> os.stat_result:
    fd = create_exclusive(state_fd, tmp)
    try:
        view = memoryview(body)
        while view:
            view = view[os.write(fd, view) :]
        return os.fstat(fd)
    finally:
        os.close(fd)


def _replace_in(site: _Site, tmp: str, name: str, body: bytes) -> os.stat_result:
    """Write ``body`` as the document of an article whose folder may exist, through no link."""
    folder = _open_folders(site.articles_fd, site.path(""), f"{name}/rating", create=True)
    assert folder is not None
    try:
        status = _write_tmp(site.state_fd, tmp, body)
        os.replace(tmp, "index.json", src_dir_fd=site.state_fd, dst_dir_fd=folder)
        return status
    finally:
        os.close(folder)


def _open_folders(dir_fd: int, shown: str, path: str, *, create: bool) -> int | None:
    """A descriptor of the folder ``path`` below ``dir_fd``, each part opened without
    following a link (made if missing when ``create``); None if missing and not ``create``."""
    fd = dir_fd
    try:
        for part in path.split("/"):
            shown = os.path.join(shown, part)
            child = _open_folder(fd, part, shown, create)
            # Whatever interrupts these lines (Ctrl-C raises here, between any two of
            # them), ``fd`` is the one descriptor still to close: never one closed already.
            previous, fd = fd, dir_fd if child is None else child
            if previous != dir_fd:
                os.close(previous)
            if child is None:
                return None
    except BaseException:
        if fd != dir_fd:
            os.close(fd)
        raise
    return fd


def _open_folder(dir_fd: int, name: str, shown: str, create: bool) -> int | None:
    for attempt in range(2):
        try:
            return os.open(name, FOLDER_FLAGS, dir_fd=dir_fd)
        except FileNotFoundError:
            if not create or attempt:
                return None if not create else _raise_missing(shown)
            try:
                os.mkdir(name, dir_fd=dir_fd)
            except FileExistsError:
                pass  # another writer made it meanwhile
        except OSError as error:
            if error.errno in LINKED_FOLDER and _is_link(dir_fd, name):
                raise symlink_error(shown) from None
            raise
    raise AssertionError("unreachable")


def _is_link(dir_fd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _raise_missing(shown: str) -> int:
    raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), shown)


# --- the other files -------------------------------------------------------


def _sync_extras(
    root: str,
    root_fd: int,
    state_fd: int,
    extras: Mapping[str, bytes],
    changes: Changes,
    dry_run: bool,
) -> None:
    """The few other generated files, one by one, after the documents."""
    for place, (name, body) in enumerate(sorted(extras.items())):
        assert not os.path.isabs(name) and ".." not in name.split("/"), name
        path = os.path.join(root, name)
        folder, base = os.path.split(name)
        try:
            dir_fd = _open_folders(root_fd, root, folder, create=not dry_run) if folder else root_fd
            if dir_fd is not None:
                try:
                    if _same_file(dir_fd, base, body) is not None:
                        changes.unchanged += 1
                        continue
                    if not dry_run:
                        _write_tmp(state_fd, "write-0.tmp", body)  # the writers are done
                        os.replace("write-0.tmp", base, src_dir_fd=state_fd, dst_dir_fd=dir_fd)
                finally:
                    if dir_fd != root_fd:
                        os.close(dir_fd)
        except OSError as error:
            raise _write_error(path, error) from None
        changes.written += 1
        changes.note((1, place), path)


def _remove_stale(site: _Site, changes: Changes) -> None:
    """Remove the documents of articles no longer listed, never through a link."""
    for place, article_id in enumerate(site.previous.stale(site.ids)):
        name = str(article_id)
        path = site.path(f"{name}/{DOCUMENT}")
        try:
            folder = _open_folders(site.articles_fd, site.path(""), f"{name}/rating", create=False)
            if folder is None:
                continue  # a folder of the user's that happens to look like an id
            try:
                if site.dry_run:
                    os.stat("index.json", dir_fd=folder, follow_symlinks=False)
                else:
                    os.unlink("index.json", dir_fd=folder)
            finally:
                os.close(folder)
            if not site.dry_run:
                _remove_empty(site.articles_fd, (f"{name}/rating", name))
        except FileNotFoundError:
            continue
        except OSError as error:
            raise _write_error(path, error) from None
        changes.removed += 1
        changes.note((2, place), path)


def _remove_old_state(root: str, root_fd: int, changes: Changes, dry_run: bool) -> None:
    """Earlier versions kept their record and temporary files in the output folder."""
    with os.scandir(root_fd) as entries:
        names = sorted(entry.name for entry in entries if OLD_STATE_NAME.fullmatch(entry.name))
    for place, name in enumerate(names):
        try:
            if not dry_run:
                os.unlink(name, dir_fd=root_fd)
        except OSError as error:
            raise _write_error(os.path.join(root, name), error) from None
        changes.removed += 1
        changes.note((3, place), os.path.join(root, name))


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
