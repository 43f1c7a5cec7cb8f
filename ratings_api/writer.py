"""Bring the output folder in line with the catalogue, touching only what changed.

The generator owns exactly the files ``away/api/articles/<id>/rating/index.json``
(and their folders) below the output folder, and the other files it is given
(``extras``). Nothing else there is removed or rewritten: a ``CNAME``, or a file
of the user's inside an article's folder, stays.

A file is written only when its bytes differ from those on disk, first to a
temporary file beside the build lock (``build_lock.py``), then renamed over its target:
a reader, a kill or a full disk sees each file old and whole or new and whole.
No link below the output folder is followed to write or remove: a folder is
checked with ``lstat`` before the build writes in it (a link there is an error
that names it), and the rename replaces a link where a file goes, never what it
points to. One process, plain ``os`` calls on paths: the same code on every system.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final

from ratings_api import build_lock
from ratings_api.contract import ARTICLES_PATH
from ratings_api.errors import InputError
from ratings_api.loader import Catalogue
from ratings_api.rating import Renderer
from ratings_api.rules import ID_TEXT

EXAMPLES: Final = 5  # how many paths --check names
ARTICLES_PER_PROGRESS: Final = 4096  # articles between two progress reports
ARTICLE_DOCUMENT: Final = "rating/index.json"  # below an article's folder
# What the build of earlier versions kept inside the output folder: removed on sight.
OLD_STATE_NAME: Final = re.compile(r"\.generate-(?:[0-9]+\.tmp|state|state\.tmp)")
BINARY: Final = getattr(os, "O_BINARY", 0)  # Windows: no newline translation
# A linked document reads as different, and is replaced, where the system can tell.
READ: Final = os.O_RDONLY | BINARY | getattr(os, "O_NOFOLLOW", 0)
CREATE: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | BINARY  # O_EXCL: never through a link


@dataclass
class Changes:
    """What a build did, or with ``dry_run`` what it would do."""

    written: int = 0
    removed: int = 0
    unchanged: int = 0
    # The first paths changed: documents, other generated files, stale documents, old state.
    examples: list[str] = field(default_factory=list)

    def example(self, path: str) -> None:
        if len(self.examples) < EXAMPLES:
            self.examples.append(path)


@dataclass
class _Writer:
    root: str
    tmp: str  # the temporary file, beside the build lock ("" with dry_run)
    dry_run: bool
    changes: Changes = field(default_factory=Changes)

    def write(self, path: str, body: bytes) -> None:
        """Replace ``path`` with a file of ``body`` (with ``dry_run``, only count it)."""
        if not self.dry_run:
            fd = os.open(self.tmp, CREATE, 0o644)
            try:
                done = os.write(fd, body)
                while done < len(body):
                    done += os.write(fd, body[done:])
            finally:
                os.close(fd)
            os.replace(self.tmp, path)
        self.changes.written += 1
        self.changes.example(path)


def sync_site(
    root: str,
    catalogue: Catalogue,
    render: Renderer,
    *,
    extras: Mapping[str, bytes] | None = None,
    dry_run: bool = False,
    progress: Callable[[int], None] | None = None,
    waiting: build_lock.OnBuildWait | None = None,
) -> Changes:
    """Write each file that differs and remove the stale documents; ``dry_run``: only count.

    ``extras`` are other generated files, by their path below ``root`` (such
    as ``_redirects``): written the same way, never removed. ``progress`` is
    called now and then with the number of articles done. ``waiting`` is told
    when another build holds the folder, before this one waits for it.
    """
    try:
        if not dry_run:
            os.makedirs(root, exist_ok=True)
        there = os.path.isdir(root)  # false for a check only: nothing to lock, all to write
        lock = build_lock.build_lock(root, write=not dry_run, waiting=waiting)
        with lock if there else contextlib.nullcontext(None) as folder:
            tmp = "" if folder is None else os.path.join(folder, build_lock.TEMP_FILE)
            writer = _Writer(root, tmp, dry_run)
            stale = _sync_documents(writer, catalogue, render, progress)
            _sync_extras(writer, extras or {})
            _remove_stale(writer, stale)
            if there:  # else a check, with no output folder yet
                _remove_old_state(writer)
            return writer.changes
    except FileExistsError:  # makedirs' word for a file where the folder should be
        raise _write_error(root, NotADirectoryError(errno.ENOTDIR, "Not a directory")) from None
    except OSError as error:
        raise _write_error(root, error) from None


def _sync_documents(
    writer: _Writer,
    catalogue: Catalogue,
    render: Renderer,
    progress: Callable[[int], None] | None,
) -> list[int]:
    """Each article's document, in the order of the input; the ids of stale ones, in order."""
    articles = os.path.join(writer.root, ARTICLES_PATH)
    there = _folders(writer.root, ARTICLES_PATH, create=bool(catalogue.ids) and not writer.dry_run)
    others = _entries(articles) if there else set()  # less each article's: the stale, the user's
    ids, sums, counts = catalogue.ids, catalogue.sums, catalogue.counts
    for index, article_id in enumerate(ids):
        if progress is not None and index % ARTICLES_PER_PROGRESS == 0:
            progress(index)
        name = str(article_id)
        folder = f"{articles}/{name}"  # not os.path.join, slow for a loop run once an article
        body = render(article_id, sums[index], counts[index])
        try:
            _sync_document(writer, folder, body, name in others)
        except OSError as error:
            raise _write_error(f"{folder}/{ARTICLE_DOCUMENT}", error) from None
        others.discard(name)
    if progress is not None:
        progress(len(ids))
    # An article folder's name is an id as the input writes it, of any length (not the
    # contract's ARTICLE_ID), so that a document for an id now refused is still removed.
    return sorted(int(name) for name in others if ID_TEXT.fullmatch(name))


def _sync_document(writer: _Writer, folder: str, body: bytes, there: bool) -> None:
    """One article's document: unchanged, or written (in folders made, if it is new)."""
    path = f"{folder}/{ARTICLE_DOCUMENT}"
    if there and _holds(path, body):
        writer.changes.unchanged += 1
        return
    if there and not writer.dry_run:  # listed by _entries, no link: its rating folder checked
        build_lock.real_folder(f"{folder}/rating", create=True)
    elif not writer.dry_run:  # a new article: its folders are made, no question asked
        os.mkdir(folder)
        os.mkdir(f"{folder}/rating")
    writer.write(path, body)


def _entries(articles: str) -> set[str]:
    """The names in the articles folder; a link named as an article's folder is an error."""
    names = set()
    with os.scandir(articles) as entries:
        for entry in entries:
            if entry.is_symlink() and ID_TEXT.fullmatch(entry.name):
                raise build_lock.symlink_error(entry.path)
            names.add(entry.name)
    return names


def _holds(path: str, body: bytes) -> bool:
    """Whether the file ``path`` holds exactly ``body``: false if missing (or a link)."""
    try:
        fd = os.open(path, READ)
    except OSError as error:
        if error.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
            return False
        raise
    try:
        return os.read(fd, len(body) + 1) == body  # one byte past is enough to differ
    finally:
        os.close(fd)


def _sync_extras(writer: _Writer, extras: Mapping[str, bytes]) -> None:
    """The few other generated files, after the documents."""
    for name, body in sorted(extras.items()):
        path = os.path.join(writer.root, name)
        try:
            present = _folders(writer.root, os.path.dirname(name), create=not writer.dry_run)
            if present and _holds(path, body):
                writer.changes.unchanged += 1
                continue
            writer.write(path, body)
        except OSError as error:
            raise _write_error(path, error) from None


def _folders(root: str, path: str, *, create: bool) -> bool:
    """Whether each folder of ``path`` below ``root`` is there (made if ``create``), no link."""
    parts = path.split("/")
    return all(
        build_lock.real_folder(os.path.join(root, *parts[: n + 1]), create=create)
        for n in range(len(parts))
    )


def _remove_stale(writer: _Writer, stale: list[int]) -> None:
    """The documents of articles no longer listed, and their folders once empty: the articles
    folder too once no article is left, unless the user keeps files there."""
    articles = os.path.join(writer.root, ARTICLES_PATH)
    for article_id in stale:
        folder = os.path.join(articles, str(article_id))
        path = os.path.join(folder, ARTICLE_DOCUMENT)
        try:
            if not _folders(articles, f"{article_id}/rating", create=False):
                continue  # a folder of the user's that happens to look like an id
            # A check looks; a build removes the name itself: a link goes, never what it points to.
            (os.lstat if writer.dry_run else os.unlink)(path)
        except (FileNotFoundError, NotADirectoryError):
            continue  # a file of the user's, or a folder without a document
        except OSError as error:
            raise _write_error(path, error) from None
        if not writer.dry_run:
            _remove_empty([os.path.join(folder, "rating"), folder, articles])
        writer.changes.removed += 1
        writer.changes.example(path)


def _remove_old_state(writer: _Writer) -> None:
    """Earlier versions kept their record and temporary files in the output folder."""
    with os.scandir(writer.root) as entries:
        names = sorted(entry.name for entry in entries if OLD_STATE_NAME.fullmatch(entry.name))
    for name in names:
        path = os.path.join(writer.root, name)
        if not writer.dry_run:
            build_lock.remove_file(path)
        writer.changes.removed += 1
        writer.changes.example(path)


def _remove_empty(folders: list[str]) -> None:
    """Remove each folder in turn, stopping at the first that is not empty."""
    for folder in folders:
        try:
            os.rmdir(folder)
        except OSError as error:
            if error.errno in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOENT):
                return
            raise


def _write_error(path: str, error: OSError) -> InputError:
    return InputError(f"{path}: cannot write: {error.strerror}")
