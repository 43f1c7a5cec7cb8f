"""Bring the output folder in line with the catalogue, touching only what changed.

The generator owns exactly the files ``away/api/articles/<id>/rating/index.json``
(and their folders) below the output folder, plus its one temporary file,
``.generate.tmp``. Nothing else there is ever removed or rewritten, so a
``CNAME`` or ``_headers`` a user keeps in ``site/`` stays.

Every write goes to the temporary file first and is then renamed over its
target. rename(2) is atomic within a file system, so a reader, a crash or a
full disk sees each document either old and whole or new and whole. The
temporary file lives at one fixed place: a killed build leaves at most that
one file behind, and the next build overwrites and consumes it.

Paths are opened relative to directory descriptors with ``os`` calls: for a
million articles, ``pathlib`` objects and ``open()`` file objects cost more
than the system calls themselves.
"""
from __future__ import annotations

import errno
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

from ratings_api.errors import InputError
from ratings_api.rating import ARTICLES_PATH

TMP_NAME: Final = ".generate.tmp"
DOCUMENT: Final = "rating/index.json"
ID_NAME: Final = re.compile(r"[1-9][0-9]*")
EXAMPLES: Final = 5  # how many paths --check names


@dataclass
class Changes:
    """What a build did, or with ``dry_run`` what it would do."""

    written: int = 0
    removed: int = 0
    unchanged: int = 0
    examples: list[str] = field(default_factory=list)

    def note(self, path: str) -> None:
        if len(self.examples) < EXAMPLES:
            self.examples.append(path)


def sync_site(
    root: str, documents: Iterable[tuple[int, bytes]], *, dry_run: bool = False
) -> Changes:
    """Write each ``(article id, document)`` that differs and remove the stale ones."""
    articles_dir = os.path.join(root, ARTICLES_PATH)
    try:
        if not dry_run:
            os.makedirs(articles_dir, exist_ok=True)
        elif not os.path.isdir(articles_dir):
            return _all_missing(root, documents)
        root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as error:
        raise _write_error(root, error) from None
    try:
        articles_fd = os.open(ARTICLES_PATH, os.O_RDONLY | os.O_DIRECTORY, dir_fd=root_fd)
        try:
            return _sync(root, root_fd, articles_fd, documents, dry_run)
        finally:
            os.close(articles_fd)
    finally:
        os.close(root_fd)


def _all_missing(root: str, documents: Iterable[tuple[int, bytes]]) -> Changes:
    changes = Changes()
    for article_id, _ in documents:
        changes.written += 1
        changes.note(os.path.join(root, ARTICLES_PATH, str(article_id), DOCUMENT))
    return changes


def _sync(
    root: str,
    root_fd: int,
    articles_fd: int,
    documents: Iterable[tuple[int, bytes]],
    dry_run: bool,
) -> Changes:
    changes = Changes()
    # One listing up front: a new article's folder cannot hold a document, so
    # it is written without first trying to read one, and what is left in
    # ``existing`` at the end is stale.
    existing = _article_folders(articles_fd)
    listed = 0
    for article_id, body in documents:
        listed += 1
        name = str(article_id)
        path = f"{name}/{DOCUMENT}"
        try:
            if name in existing:
                existing.remove(name)
                if _current(articles_fd, path, len(body)) == body:
                    changes.unchanged += 1
                    continue
            elif not dry_run:
                os.mkdir(name, dir_fd=articles_fd)
                os.mkdir(f"{name}/rating", dir_fd=articles_fd)
            changes.written += 1
            if dry_run:
                changes.note(os.path.join(root, ARTICLES_PATH, path))
            else:
                _replace(root_fd, articles_fd, name, body)
        except OSError as error:
            raise _write_error(os.path.join(root, ARTICLES_PATH, path), error) from None
    _remove_stale(root, articles_fd, existing, changes, dry_run)
    _remove_leftover_tmp(root, root_fd, changes, dry_run)
    if not listed and not dry_run:
        try:
            _prune_empty(root_fd)
        except OSError as error:
            raise _write_error(os.path.join(root, ARTICLES_PATH), error) from None
    return changes


def _current(dir_fd: int, path: str, size: int) -> bytes | None:
    """The file's bytes, or None when missing; one byte past ``size`` is enough to differ."""
    try:
        fd = os.open(path, os.O_RDONLY, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    try:
        return os.read(fd, size + 1)
    finally:
        os.close(fd)


def _article_folders(articles_fd: int) -> set[str]:
    """The names of the folders the generator may have made: ids as it writes them."""
    with os.scandir(articles_fd) as entries:
        return {entry.name for entry in entries if ID_NAME.fullmatch(entry.name)}


def _replace(root_fd: int, articles_fd: int, name: str, body: bytes) -> None:
    fd = os.open(TMP_NAME, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644, dir_fd=root_fd)
    try:
        view = memoryview(body)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
    target = f"{name}/{DOCUMENT}"
    try:
        os.replace(TMP_NAME, target, src_dir_fd=root_fd, dst_dir_fd=articles_fd)
    except FileNotFoundError:  # the article's folder is there, but not its rating/
        os.mkdir(f"{name}/rating", dir_fd=articles_fd)
        os.replace(TMP_NAME, target, src_dir_fd=root_fd, dst_dir_fd=articles_fd)


def _remove_stale(
    root: str, articles_fd: int, stale: set[str], changes: Changes, dry_run: bool
) -> None:
    for name in sorted(stale, key=int):
        path = f"{name}/{DOCUMENT}"
        try:
            if dry_run:
                os.stat(path, dir_fd=articles_fd)
            else:
                os.unlink(path, dir_fd=articles_fd)
                _remove_empty(articles_fd, (f"{name}/rating", name))
        except FileNotFoundError:
            continue  # a folder of the user's that happens to look like an id
        except OSError as error:
            raise _write_error(os.path.join(root, ARTICLES_PATH, path), error) from None
        changes.removed += 1
        changes.note(os.path.join(root, ARTICLES_PATH, path))


def _remove_leftover_tmp(root: str, root_fd: int, changes: Changes, dry_run: bool) -> None:
    """A killed build may have left its temporary file; a finished one never does."""
    try:
        if dry_run:
            os.stat(TMP_NAME, dir_fd=root_fd)
            changes.note(os.path.join(root, TMP_NAME))
        else:
            os.unlink(TMP_NAME, dir_fd=root_fd)
    except FileNotFoundError:
        return
    changes.removed += 1


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
