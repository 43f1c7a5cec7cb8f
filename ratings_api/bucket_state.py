"""What a publish compares: the state object it keeps in the bucket, and the plan.

The state, ``PREFIX/.ratings-api/state.gz``, records what every published file
holds, so that a publish need not list the bucket: each article's document by
the article's numbers (id, sum, count) and the renderer's stamp, every other
file by its MD5 (the ETag S3 gives a plain upload). ``plan`` compares it with
the site: a pure function, no I/O (ratings_api/publish.py talks to the store).

Its bytes, gzipped: one line of JSON, ``{"articles": N, "cache_control": ...,
"files": {path: MD5}, "format": 2, "stamp": ...}`` (keys sorted), then three
columns of N signed 64-bit little-endian numbers: ids, sums, counts. A count
of -1 marks a document whose bytes are not known, "" a file's. A state of a
later ``format`` is refused with its own message, any other damage as
unreadable: ``--repair`` replaces it by listing the bucket.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import re
import sys
import zlib
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import chain
from typing import Final, NamedTuple

from ratings_api.contract import ARTICLES_PATH, CACHE_CONTROL
from ratings_api.errors import InputError
from ratings_api.loader import Catalogue
from ratings_api.rating import Renderer

STATE_NAME: Final = ".ratings-api/state.gz"
FORMAT: Final = 2
UNKNOWN: Final = ""  # the state's digest of a file whose bytes are not known
UNKNOWN_COUNT: Final = -1  # the state's count of an article whose document is not known
LEVEL: Final = 1  # gzip's: the columns of a million articles in a fraction of level 6's time
CHUNK: Final = 4096  # numbers compared at a time when looking for the few that differ
DOCUMENT: Final = re.compile(re.escape(ARTICLES_PATH) + r"/([1-9][0-9]*)/rating/index\.json")
# The head's fields besides its format, and their types.
HEAD: Final = {"articles": int, "stamp": str, "cache_control": str, "files": dict}
UNREADABLE: Final = (
    f"{STATE_NAME}: not a state this version can read; --repair lists the bucket "
    "and writes a new one"
)


@dataclass(frozen=True)
class BucketState:
    """What the bucket holds, as the state object records it (see the module's text)."""

    stamp: str = ""  # the renderer's: the documents' format and base URL
    ids: Sequence[int] = ()
    sums: Sequence[int] = ()
    counts: Sequence[int] = ()  # UNKNOWN_COUNT: not known
    files: Mapping[str, str] = field(default_factory=dict)  # MD5, or UNKNOWN

    def entries(self) -> Iterator[tuple[str, bool]]:
        """Each file recorded, and whether its bytes are known."""
        for article_id, count in zip(self.ids, self.counts, strict=True):
            yield document_path(article_id), count != UNKNOWN_COUNT
        for path, digest in self.files.items():
            yield path, digest != UNKNOWN


def document_path(article_id: int) -> str:
    return f"{ARTICLES_PATH}/{article_id}/rating/index.json"


def document_id(path: str) -> int | None:
    """The article whose document ``path`` is, if it is one."""
    match = DOCUMENT.fullmatch(path)
    return None if match is None else int(match[1])


def encode(state: BucketState, token: str = "") -> bytes:
    """The state's bytes: the same bytes for the same state and ``token``.

    A write sets a random token, read by no one: the writer knows its own write's
    bytes when the reply was lost."""
    head = {
        "format": FORMAT,
        "cache_control": CACHE_CONTROL,
        "stamp": state.stamp,
        "articles": len(state.ids),
        "files": dict(state.files),
    }
    if token:
        head["token"] = token
    out = io.BytesIO()
    # Column by column: never the columns of a million articles joined in one copy.
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=LEVEL, mtime=0) as packed:
        packed.write(json.dumps(head, sort_keys=True, separators=(",", ":")).encode() + b"\n")
        for column in (state.ids, state.sums, state.counts):
            packed.write(memoryview(_little_endian(column)))
    return out.getvalue()


def decode(data: bytes) -> BucketState:
    """The state read back; one written with other headers marks every file unknown."""
    try:
        raw = gzip.decompress(data)
        end = raw.index(b"\n")
        head = json.loads(raw[:end])
    except (OSError, EOFError, zlib.error, ValueError, RecursionError):  # deep nesting: the last
        raise InputError(UNREADABLE) from None
    body = memoryview(raw)[end + 1 :]
    version = head.get("format") if isinstance(head, dict) else None
    if type(version) is int and version > FORMAT:
        raise InputError(
            f"{STATE_NAME}: written by a newer version of ratings-api (state format "
            f"{version}; this one reads {FORMAT}): upgrade it, or --repair lists the bucket "
            "and writes a state of this version"
        )
    if (
        version != FORMAT
        or any(type(head.get(key)) is not kind for key, kind in HEAD.items())
        or not 0 <= 24 * head["articles"] == len(body)  # three columns of 8-byte numbers
        or not all(isinstance(value, str) for value in head["files"].values())
    ):
        raise InputError(UNREADABLE)
    size, files = head["articles"], head["files"]
    ids, sums, counts = (
        _little_endian(body[n * 8 * size : (n + 1) * 8 * size].cast("q")) for n in range(3)
    )
    if head["cache_control"] != CACHE_CONTROL:  # every object has the wrong header
        counts = array("q", [UNKNOWN_COUNT]) * size
        files = dict.fromkeys(files, UNKNOWN)
    return BucketState(head["stamp"], ids, sums, counts, files)


def _little_endian(column: Sequence[int]) -> array[int] | memoryview:
    """The numbers as the state stores them: a copy only of a list, or on a big-endian machine."""
    numbers = column if isinstance(column, (array, memoryview)) else array("q", column)
    if sys.byteorder == "little":
        return numbers
    swapped = array("q", numbers)  # pragma: no cover - no big-endian machine here
    swapped.byteswap()  # pragma: no cover
    return swapped  # pragma: no cover


# The site, and the plan that makes a bucket hold it


class Site(NamedTuple):
    """The files a publish puts in the bucket: the documents, rendered when asked, and the rest."""

    catalogue: Catalogue
    render: Renderer
    others: Mapping[str, bytes]  # by path below the output folder

    def documents(self) -> Iterator[tuple[str, int]]:
        """Each document's path, and its article's place in the catalogue."""
        for place, article_id in enumerate(self.catalogue.ids):
            yield document_path(article_id), place

    def body(self, path: str, place: int) -> bytes:
        """The bytes of the document at ``place``, or (``place`` -1) of the file ``path``."""
        if place < 0:
            return self.others[path]
        numbers = self.catalogue
        return self.render(numbers.ids[place], numbers.sums[place], numbers.counts[place])


class Plan(NamedTuple):
    """The uploads and removals that make a bucket hold a site."""

    ids: Sequence[int]  # the catalogue's, recorded by numbers: the documents' paths
    documents: Sequence[int]  # the places of the documents to upload
    others: list[str]  # the files recorded by MD5 to upload
    removals: list[str]
    unchanged: int

    def uploads(self) -> Iterator[tuple[str, int]]:
        """Each file to upload and its place, its path made when asked."""
        ids = self.ids
        yield from ((document_path(ids[place]), place) for place in self.documents)
        yield from ((path, -1) for path in self.others)

    @property
    def upload_count(self) -> int:
        return len(self.documents) + len(self.others)

    @property
    def changes(self) -> int:
        """The files it uploads or removes."""
        return self.upload_count + len(self.removals)


def local_state(site: Site) -> BucketState:
    """The state that records ``site``: its documents by their numbers, which fit 64 bits
    (rules.MAX), its other files by MD5."""
    files = {path: _md5(body) for path, body in sorted(site.others.items())}
    numbers = site.catalogue
    ids, sums, counts = (array("q", c) for c in (numbers.ids, numbers.sums, numbers.counts))
    return BucketState(site.render.stamp, ids, sums, counts, files)


def _md5(body: bytes) -> str:
    return hashlib.md5(body, usedforsecurity=False).hexdigest()


def plan(site: Site, published: BucketState) -> tuple[Plan, BucketState]:
    """What makes a bucket recorded as ``published`` hold ``site``; and the state after.

    A pure function of its arguments: the same site and state, the same plan.
    """
    local = local_state(site)
    documents, gone = _changed(local, published)
    others = [path for path, digest in local.files.items() if published.files.get(path) != digest]
    # Documents recorded by MD5 (a repair's listing, or a state of a version that let
    # numbers pass 64 bits) are uploaded if listed, and so recorded by their numbers
    # from then on; removed if not. Whatever the published numbers say of them too.
    by_digest = [path for path in published.files if path not in local.files]
    listed = set(local.ids) if any(map(document_id, by_digest)) else set()
    again = listed.intersection(map(document_id, by_digest))
    if again and len(documents) < len(local.ids):
        places = (place for place, article_id in enumerate(local.ids) if article_id in again)
        documents = array("q", sorted({*documents, *places}))
    removals = [path for path in map(document_path, gone) if path not in local.files]
    removals += [path for path in by_digest if document_id(path) not in listed]
    unchanged = len(local.ids) + len(local.files) - len(documents) - len(others)
    return Plan(local.ids, documents, others, sorted(removals), unchanged), local


def listed_state(site: Site, listed: Mapping[str, str], recorded: set[str]) -> BucketState:
    """A listing (each object's ETag, its MD5) as a state, for ``plan`` to repair from.

    Only the files the generator writes count: those ``recorded``, those of the
    site, and any article's document; the rest of the bucket is the user's. A
    document whose bytes are the site's is recorded by the numbers that made it.
    """
    local = local_state(site)
    ours = {
        path: etag
        for path, etag in listed.items()
        if path in recorded or path in local.files or document_id(path) is not None
    }
    same = array("q")
    for path, place in site.documents():
        if ours.get(path) == _md5(site.body(path, place)):
            same.append(place)
            del ours[path]
    ids, sums, counts = (
        array("q", (c[p] for p in same)) for c in (local.ids, local.sums, local.counts)
    )
    return BucketState(local.stamp, ids, sums, counts, ours)


def _changed(local: BucketState, published: BucketState) -> tuple[Sequence[int], list[int]]:
    """The places of the local documents that differ, and the ids no longer listed."""
    same_stamp = local.stamp == published.stamp
    if same_stamp and _same(local.ids, published.ids):
        # The usual publish: the same articles in the same order. Only the few
        # numbers that differ are looked at one by one.
        differ = set(_differing(local.sums, published.sums))
        differ.update(_differing(local.counts, published.counts))
        return array("q", sorted(differ)), []
    if not published.ids:  # a first publish: every document, no dictionary of nothing
        return array("q", range(len(local.ids))), []
    where = {article_id: place for place, article_id in enumerate(published.ids)}
    sums, counts = published.sums, published.counts
    changed = array("q")
    numbers = zip(local.ids, local.sums, local.counts, strict=True)
    for place, (article_id, total, count) in enumerate(numbers):
        at = where.pop(article_id, -1)
        if at < 0 or not same_stamp or sums[at] != total or counts[at] != count:
            changed.append(place)
    return changed, list(where)


def _same(one: Sequence[int], other: Sequence[int]) -> bool:
    """Whether two columns of 64-bit numbers are equal, compared in C."""
    # Arrays, or views of a state read: never lists.
    return len(one) == len(other) and (not one or memoryview(one) == memoryview(other))  # type: ignore[arg-type]


def _differing(local: Sequence[int], published: Sequence[int]) -> Iterator[int]:
    """The places where two columns of one length differ, looked for a chunk at a time."""
    for start in range(0, len(local), CHUNK):
        end = min(len(local), start + CHUNK)
        if not _same(local[start:end], published[start:end]):
            yield from (n for n in range(start, end) if local[n] != published[n])


def marked(final: BucketState, todo: Plan) -> BucketState:
    """``final`` with every file ``todo`` uploads or removes recorded as not known.

    What the bucket may hold while ``todo`` runs: it only turns files the
    published state knows into unknown ones, so it never records a wrong file.
    """
    counts = array("q", final.counts)
    for place in todo.documents:
        counts[place] = UNKNOWN_COUNT
    files = {**final.files, **dict.fromkeys(chain(todo.others, todo.removals), UNKNOWN)}
    return replace(final, counts=counts, files=files)


def unknown(state: BucketState, paths: Iterable[str]) -> BucketState:
    """``state`` with each of ``paths`` recorded as not known, added where it records none.

    It records nothing wrong whatever those files hold, and the next plan
    uploads or removes each of them.
    """
    wanted = set(paths)
    ids = {document_id(path) for path in wanted}
    counts, found = array("q", state.counts), set()
    for place, article_id in enumerate(state.ids):
        if article_id in ids:
            counts[place] = UNKNOWN_COUNT
            found.add(document_path(article_id))
    rest = (path for path in wanted if path not in found or path in state.files)
    return replace(state, counts=counts, files={**state.files, **dict.fromkeys(rest, UNKNOWN)})
