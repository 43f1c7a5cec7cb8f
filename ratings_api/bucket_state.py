"""The state object a publish keeps in the bucket: ``PREFIX/.ratings-api/state.gz``.

It records what every published file holds, so that a publish need not list
the bucket: each article's document by the article's numbers (id, sum, count)
and the renderer's stamp, every other file by its MD5 (the ETag S3 gives a
plain upload).

Its bytes, gzipped: one line of JSON, ``{"articles": N, "cache_control": ...,
"files": {path: MD5}, "format": 2, "stamp": ...}`` (keys sorted), then three
columns of N signed 64-bit little-endian numbers: ids, sums, counts. A count
of -1 marks a document whose bytes are not known, "" a file's. The same state
always gives the same bytes.

``format`` changes when a reader of the old one would misread the new one. A
state of a later format is refused with its own message (this version cannot
know what it says); any other damage is refused as unreadable. Both are
InputErrors: one line, and ``--repair`` replaces the state by listing the
bucket.
"""

from __future__ import annotations

import gzip
import io
import json
import re
import sys
import zlib
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Final

from ratings_api.errors import InputError
from ratings_api.rating import ARTICLES_PATH

STATE_DIR: Final = ".ratings-api"
STATE_NAME: Final = f"{STATE_DIR}/state.gz"
FORMAT: Final = 2
CACHE_CONTROL: Final = "public, max-age=0, must-revalidate"  # the API's (server.py)
UNKNOWN: Final = ""  # the state's digest of a file whose bytes are not known
UNKNOWN_COUNT: Final = -1  # the state's count of an article whose document is not known
LEVEL: Final = 1  # gzip's: 24 MB of columns at 1M in 0.17 s, 4.2 MB (level 6: 1.4 s, 3.7)
HEAD_KEYS: Final = frozenset({"articles", "cache_control", "files", "format", "stamp"})
DOCUMENT: Final = re.compile(re.escape(ARTICLES_PATH) + r"/([1-9][0-9]*)/rating/index\.json")
UNREADABLE: Final = (
    f"{STATE_NAME}: not a state this version can read; --repair lists the bucket "
    "and writes a new one"
)


@dataclass(frozen=True)
class State:
    """What the bucket holds, as the state object records it (see the module's text)."""

    stamp: str = ""  # the renderer's: the documents' format and base URL
    ids: Sequence[int] = field(default_factory=list)
    sums: Sequence[int] = field(default_factory=list)
    counts: Sequence[int] = field(default_factory=list)  # UNKNOWN_COUNT: not known
    files: dict[str, str] = field(default_factory=dict)  # MD5, or UNKNOWN
    # A random token each write sets: the writer knows its own write when a reply is lost.
    token: str = ""

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


def encode(state: State) -> bytes:
    """The state's bytes: the same bytes for the same state."""
    head = {
        "format": FORMAT,
        "cache_control": CACHE_CONTROL,
        "stamp": state.stamp,
        "articles": len(state.ids),
        "files": state.files,
    }
    if state.token:
        head["token"] = state.token
    text = json.dumps(head, sort_keys=True, separators=(",", ":")).encode() + b"\n"
    out = io.BytesIO()
    # Column by column: never the 24 MB of a million articles' columns joined in one copy.
    with gzip.GzipFile(fileobj=out, mode="wb", compresslevel=LEVEL, mtime=0) as packed:
        packed.write(text)
        for column in (state.ids, state.sums, state.counts):
            packed.write(_little_endian(column))
    return out.getvalue()


def decode(data: bytes) -> State:
    """The state read back; one written with other headers marks every file unknown."""
    try:
        raw = gzip.decompress(data)
        end = raw.index(b"\n")
        head = json.loads(raw[:end])
    except (OSError, EOFError, zlib.error, ValueError):
        raise InputError(UNREADABLE) from None
    if not isinstance(head, dict):
        raise InputError(UNREADABLE)
    version = head.get("format")
    if isinstance(version, int) and not isinstance(version, bool) and version > FORMAT:
        raise InputError(
            f"{STATE_NAME}: written by a newer version of ratings-api (state format "
            f"{version}; this one reads {FORMAT}): upgrade it, or --repair lists the bucket "
            "and writes a state of this version"
        )
    body = memoryview(raw)[end + 1 :]
    if version != FORMAT or not _whole(head, body):
        raise InputError(UNREADABLE)
    size, files = head["articles"], head["files"]
    ids, sums, counts = (_numbers(body[n * 8 * size : (n + 1) * 8 * size]) for n in range(3))
    if head["cache_control"] != CACHE_CONTROL:  # every object has the wrong header
        counts = array("q", [UNKNOWN_COUNT]) * size
        files = dict.fromkeys(files, UNKNOWN)
    token = head.get("token", "")
    return State(head["stamp"], ids, sums, counts, files, token if isinstance(token, str) else "")


def _whole(head: dict[str, object], body: memoryview) -> bool:
    """Whether the head has every key, each of its type, and the columns its length."""
    size, files = head.get("articles"), head.get("files")
    return (
        head.keys() >= HEAD_KEYS
        and type(size) is int
        and size >= 0
        and len(body) == 3 * 8 * size
        and isinstance(head["stamp"], str)
        and isinstance(head["cache_control"], str)
        and isinstance(files, dict)
        and all(isinstance(value, str) for value in files.values())
    )


def marked(state: State, articles: Iterable[int], paths: Iterable[str]) -> State:
    """A copy of ``state`` with the touched files recorded as not known.

    ``articles``: the ids whose documents are recorded by their numbers, each
    once; ``paths``: every other file (documents recorded by MD5 among them).
    """
    ids, sums, counts = (_array(column) for column in (state.ids, state.sums, state.counts))
    files = dict(state.files)
    for path in paths:
        files[path] = UNKNOWN
    if not ids:  # a first publish: no set of a million ids to look them up
        new = array("q", articles)
    else:
        wanted = set(articles)
        for place, article_id in enumerate(ids):
            if article_id in wanted:
                counts[place] = UNKNOWN_COUNT
                wanted.discard(article_id)
        new = array("q", sorted(wanted))
    ids.extend(new)
    sums.extend(array("q", bytes(8 * len(new))))
    counts.extend(array("q", [UNKNOWN_COUNT]) * len(new))
    return State(state.stamp, ids, sums, counts, files)  # no token: each write sets its own


def _array(column: Sequence[int]) -> array[int]:
    """A copy of ``column`` that can grow."""
    if isinstance(column, memoryview):
        copy = array("q")
        copy.frombytes(column.cast("B"))  # in C; array("q", column) takes each number in turn
        return copy
    return array("q", column)


def _little_endian(column: Sequence[int]) -> memoryview:
    numbers = column if isinstance(column, memoryview) else memoryview(array("q", column))
    if sys.byteorder == "little":
        return numbers
    swapped = array("q", numbers)  # pragma: no cover - no big-endian machine here
    swapped.byteswap()  # pragma: no cover
    return memoryview(swapped)  # pragma: no cover


def _numbers(data: memoryview) -> Sequence[int]:
    if sys.byteorder == "little":
        return data.cast("q")
    swapped = array("q", data.cast("q"))  # pragma: no cover - no big-endian machine here
    swapped.byteswap()  # pragma: no cover
    return swapped  # pragma: no cover
