"""``--publish s3://BUCKET[/PREFIX]``: make a bucket hold exactly the built site.

What is published is what the build wrote: its documents rendered again by
the build's own renderer, and the other generated files' bytes from the
build's result (reading a million files back from the disk costs about five
times as much: docs/deploy-object-storage.md). A user's own files in the
output folder (a CNAME, a ``_headers``) are never published, and
``_redirects`` neither: it is a rule file for Netlify and Cloudflare Pages,
which S3 would serve as a file.

The bucket is not listed. A state object, ``PREFIX/.ratings-api/state.gz``,
records what every published file holds: each article's document by the
article's numbers (id, sum, count) and the renderer's stamp, every other file
by its MD5, the digest S3 reports as the ETag of a plain upload. A publish
reads it (one request), compares the catalogue's 64-bit columns with the
state's (a memory comparison, no rendering: a no-op at a million articles
costs about what reading the state costs), uploads the files that differ,
removes the files no longer built, and writes it again. ``--repair`` lists
the bucket instead and compares ETags with every file's MD5, for a bucket
changed by hand.

The state's bytes, gzipped: one line of JSON (format, cache_control, stamp,
articles N, files {path: MD5}), then three columns of N signed 64-bit
little-endian numbers: ids, sums, counts. A count of -1 marks a document
whose bytes are not known, "" a file's. Documents of a catalogue whose
numbers need more than 64 bits are recorded among the files, by MD5.

Order, so that an interruption at any point converges at the next run: the
state is first rewritten with every file about to be touched marked
unknown; then uploads, then removals, then the final state.
Each state write is conditional on the state read (If-Match / If-None-Match),
so two publishes at once cannot lose each other's marks: the later one
merges and exits 2, asking for a rerun. Objects are replaced whole by S3,
never partly written.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import sys
import threading
import time
import zlib
from array import array
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

from ratings_api.errors import InputError
from ratings_api.hosting import NOT_FOUND_PAGE, REDIRECTS
from ratings_api.loader import MAX_ID, Catalogue
from ratings_api.rating import ARTICLES_PATH, Renderer
from ratings_api.record import shared_columns

if TYPE_CHECKING:
    from ratings_api.build import Result

if TYPE_CHECKING:
    from boto3.session import Session
    from mypy_boto3_s3 import S3Client
    from obstore import Attributes
    from obstore.store import S3Store

REQUIREMENTS: Final = "requirements-publish.txt"
CACHE_CONTROL: Final = "public, max-age=0, must-revalidate"  # the API's (server.py)
STATE_DIR: Final = ".ratings-api"
STATE_NAME: Final = f"{STATE_DIR}/state.gz"
STATE_FORMAT: Final = 2  # new headers re-upload every file once; another format: --repair
NOT_PUBLISHED: Final = frozenset({REDIRECTS})  # host rules, meaningless to S3
DEFAULT_MAX_REMOVALS: Final = 256  # as hugo deploy's --maxDeletes
# A store 30 ms away takes at most workers / 0.03 s uploads a second (Little's law):
# 32 caps a publish near 1,000/s, under this machine's 2,200/s nearby; 64 lifts the cap
# to 2,100/s. Nearby, 32 and 64 measured alike, A/B/A/B (bench/publish.py --workers-sweep).
DEFAULT_WORKERS: Final = 64
DELETE_BATCH: Final = 1000  # DeleteObjects' limit
UNKNOWN: Final = ""  # the state's digest of a file whose bytes are not known
UNKNOWN_COUNT: Final = -1  # the state's count of an article whose document is not known
STATE_LEVEL: Final = 1  # gzip's: 24 MB of columns at 1M in 0.17 s, 4.2 MB (level 6: 1.4 s, 3.7)
CHUNK: Final = 4096  # numbers compared at a time when looking for the few that differ
DOCUMENT: Final = re.compile(re.escape(ARTICLES_PATH) + r"/([1-9][0-9]*)/rating/index\.json")
RETRIES: Final = {"mode": "standard", "total_max_attempts": 5}
EXAMPLES: Final = 10  # paths listed by --check
TYPES: Final = {
    ".json": "application/json",
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
}


@dataclass(frozen=True)
class Target:
    """Where to publish: a bucket and a key prefix ("" or without slashes at its ends)."""

    bucket: str
    prefix: str

    def key(self, path: str) -> str:
        return f"{self.prefix}/{path}" if self.prefix else path

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}".rstrip("/")


@dataclass
class State:
    """What the bucket holds, as the state object records it (see the module's text)."""

    stamp: str = ""  # the renderer's: the documents' format and base URL
    ids: Sequence[int] = field(default_factory=list)
    sums: Sequence[int] = field(default_factory=list)
    counts: Sequence[int] = field(default_factory=list)  # UNKNOWN_COUNT: not known
    files: dict[str, str] = field(default_factory=dict)  # MD5, or UNKNOWN
    etag: str | None = None  # the state object's, when read or written

    def entries(self) -> Iterator[tuple[str, bool]]:
        """Each file recorded, and whether its bytes are known."""
        for article_id, count in zip(self.ids, self.counts, strict=True):
            yield document_path(article_id), count != UNKNOWN_COUNT
        for path, digest in self.files.items():
            yield path, digest != UNKNOWN


@dataclass(frozen=True)
class Plan:
    uploads: list[tuple[str, int]]  # path, and its article's place in the catalogue or -1
    removals: list[str]
    unchanged: int

    def touched(self) -> list[str]:
        return [*(path for path, _ in self.uploads), *self.removals]


@dataclass(frozen=True)
class Outcome:
    """What a publish did (or, checking, would do)."""

    plan: Plan
    requests: int
    raced: bool = False


def document_path(article_id: int) -> str:
    return f"{ARTICLES_PATH}/{article_id}/rating/index.json"


def document_id(path: str) -> int | None:
    """The article whose document ``path`` is, if it is one."""
    match = DOCUMENT.fullmatch(path)
    return None if match is None else int(match[1])


def parse_target(text: str) -> Target:
    """``s3://BUCKET[/PREFIX]`` as a Target, or an InputError saying what is wrong."""
    parts = urlsplit(text)
    if parts.scheme != "s3" or not parts.netloc or parts.query or parts.fragment:
        raise InputError(f"--publish: expected s3://BUCKET[/PREFIX], found '{text}'")
    prefix = parts.path.strip("/")
    if "//" in prefix or any(part in (".", "..") for part in prefix.split("/")):
        raise InputError(f"--publish: the prefix must not have empty, . or .. parts: '{text}'")
    return Target(parts.netloc, prefix)


@dataclass(frozen=True)
class Site:
    """The files a publish puts in the bucket, by their path below the output folder."""

    catalogue: Catalogue
    render: Renderer
    others: Mapping[str, bytes]

    def paths(self) -> Iterator[tuple[str, int]]:
        """Each file's path, with its article's place in the catalogue (-1 for the others)."""
        for place, article_id in enumerate(self.catalogue.ids):
            yield document_path(article_id), place
        for path in sorted(self.others):
            if path not in NOT_PUBLISHED:
                yield path, -1

    def body(self, path: str, place: int) -> bytes:
        if place < 0:
            return self.others[path]
        catalogue = self.catalogue
        return self.render(catalogue.ids[place], catalogue.sums[place], catalogue.counts[place])

    def digests(self) -> dict[str, tuple[str, int]]:
        """Each file's MD5 (hex) and place."""
        return {path: (_md5(self.body(path, place)), place) for path, place in self.paths()}

    def state(self) -> tuple[State, dict[str, tuple[str, int]]]:
        """The state that records this site; and its files recorded by MD5, with their places.

        The documents are recorded by their numbers, unless a number needs more
        than 64 bits: then all of them by MD5, rendered here.
        """
        catalogue = self.catalogue
        columns = shared_columns(catalogue.ids, catalogue.sums, catalogue.counts)
        if columns is None:
            files = self.digests()
            ids: Sequence[int] = []
            sums: Sequence[int] = []
            counts: Sequence[int] = []
        else:
            others = (path for path in sorted(self.others) if path not in NOT_PUBLISHED)
            files = {path: (_md5(self.others[path]), -1) for path in others}
            ids, sums, counts = columns
        digests = {path: digest for path, (digest, _) in files.items()}
        return State(self.render.stamp, ids, sums, counts, digests), files


def _md5(body: bytes) -> str:
    return hashlib.md5(body, usedforsecurity=False).hexdigest()


def site_of(result: Result) -> Site:
    """The files the build of ``result`` wrote."""
    assert result.catalogue is not None and result.render is not None
    return Site(result.catalogue, result.render, result.extras)


def content_type(path: str) -> str:
    """The Content-Type the API's server sends; 404.html holds the JSON error body."""
    if path == NOT_FOUND_PAGE:
        return "application/json"
    return TYPES.get(os.path.splitext(path)[1], "application/octet-stream")


def plan(site: Site, published: State) -> tuple[Plan, State]:
    """What makes the bucket, recorded as ``published``, hold ``site``; and the state after."""
    local, files = site.state()
    changed, gone = _changed_articles(local, published)
    uploads = [(document_path(local.ids[place]), place) for place in changed]
    uploads += [
        (path, place)
        for path, (digest, place) in files.items()
        if published.files.get(path) != digest
    ]
    removals = {document_path(article_id) for article_id in gone} - files.keys()
    listed: set[int] | None = None  # the catalogue's ids, if a recorded file needs them
    for path in published.files.keys() - files.keys():
        article_id = document_id(path)
        if article_id is not None:
            listed = set(local.ids) if listed is None else listed
            if article_id in listed:
                continue  # now recorded by its numbers, and uploaded
        removals.add(path)
    unchanged = len(local.ids) + len(files) - len(uploads)
    return Plan(uploads, sorted(removals), unchanged), local


def plan_by_digests(
    site: Site, local: Mapping[str, tuple[str, int]], published: Mapping[str, str]
) -> tuple[Plan, State]:
    """As ``plan``, for ``published`` files known by their MD5 (a listing's ETags).

    ``local`` is ``site.digests()``.
    """
    uploads = [
        (path, place) for path, (digest, place) in local.items() if published.get(path) != digest
    ]
    removals = sorted(path for path in published if path not in local)
    return Plan(uploads, removals, len(local) - len(uploads)), site.state()[0]


def _changed_articles(local: State, published: State) -> tuple[list[int], list[int]]:
    """The places of the local articles whose documents differ, and the ids no longer listed."""
    same_stamp = local.stamp == published.stamp
    if same_stamp and _same_numbers(local.ids, published.ids):
        # The usual publish: the same articles in the same order. Only the few
        # numbers that differ are looked at one by one.
        differ = _differing(local.sums, published.sums) | _differing(local.counts, published.counts)
        return sorted(differ), []
    where = {article_id: place for place, article_id in enumerate(published.ids)}
    sums, counts = published.sums, published.counts
    changed = []
    for place, article_id in enumerate(local.ids):
        at = where.pop(article_id, None)
        if (
            at is None
            or not same_stamp
            or sums[at] != local.sums[place]
            or counts[at] != local.counts[place]
        ):
            changed.append(place)
    return changed, list(where)


def _same_numbers(one: Sequence[int], other: Sequence[int]) -> bool:
    if len(one) != len(other):
        return False
    if isinstance(one, (memoryview, array)) and isinstance(other, (memoryview, array)):
        return memoryview(one) == memoryview(other)  # compared in C
    return list(one) == list(other)


def _differing(local: Sequence[int], published: Sequence[int]) -> set[int]:
    """The places where two columns of one length differ, looked for a chunk at a time."""
    found: set[int] = set()
    for start in range(0, len(local), CHUNK):
        end = min(len(local), start + CHUNK)
        if not _same_numbers(local[start:end], published[start:end]):
            found.update(n for n in range(start, end) if local[n] != published[n])
    return found


def marked(state: State, paths: Iterable[str]) -> State:
    """A copy of ``state`` with each file of ``paths`` recorded as not known."""
    ids, sums, counts = (_array(column) for column in (state.ids, state.sums, state.counts))
    files = dict(state.files)
    wanted = set()
    for path in paths:
        article_id = document_id(path)
        if path in files or article_id is None or article_id > MAX_ID:
            files[path] = UNKNOWN
        if article_id is not None and article_id <= MAX_ID:
            wanted.add(article_id)
    if wanted:
        for place, article_id in enumerate(ids):
            if article_id in wanted:
                counts[place] = UNKNOWN_COUNT
                wanted.discard(article_id)
        new = sorted(wanted)
        ids.extend(new)
        sums.extend(0 for _ in new)
        counts.extend(UNKNOWN_COUNT for _ in new)
    return State(state.stamp, ids, sums, counts, files, state.etag)


def _array(column: Sequence[int]) -> array[int]:
    """A copy of ``column`` that can grow."""
    if isinstance(column, memoryview):
        copy = array("q")
        copy.frombytes(column.cast("B"))  # in C; array("q", column) takes each number in turn
        return copy
    return array("q", column)


# The state object


def encode_state(state: State) -> bytes:
    """The state's bytes: the same bytes for the same state."""
    head = {
        "format": STATE_FORMAT,
        "cache_control": CACHE_CONTROL,
        "stamp": state.stamp,
        "articles": len(state.ids),
        "files": state.files,
    }
    text = json.dumps(head, sort_keys=True, separators=(",", ":")).encode() + b"\n"
    columns = [_little_endian(column) for column in (state.ids, state.sums, state.counts)]
    return gzip.compress(b"".join([text, *columns]), compresslevel=STATE_LEVEL, mtime=0)


def decode_state(data: bytes, etag: str) -> State:
    """The state read back; one written with other headers marks every file unknown."""
    try:
        raw = gzip.decompress(data)
        end = raw.index(b"\n")
        head = json.loads(raw[:end])
        if head["format"] != STATE_FORMAT:
            raise ValueError("another format")
        size, files, stamp = head["articles"], head["files"], head["stamp"]
        body = memoryview(raw)[end + 1 :]
        if (
            not isinstance(size, int)
            or len(body) != 3 * 8 * size
            or not isinstance(stamp, str)
            or not isinstance(files, dict)
            or not all(isinstance(value, str) for value in files.values())
        ):
            raise ValueError("not whole")
    except (OSError, EOFError, zlib.error, ValueError, KeyError, TypeError):
        raise InputError(
            f"{STATE_NAME}: not a state this version can read; --repair lists the bucket "
            "and writes a new one"
        ) from None
    ids, sums, counts = (_numbers(body[n * 8 * size : (n + 1) * 8 * size]) for n in range(3))
    if head["cache_control"] != CACHE_CONTROL:  # every object has the wrong header
        counts = array("q", [UNKNOWN_COUNT]) * size
        files = dict.fromkeys(files, UNKNOWN)
    return State(stamp, ids, sums, counts, files, etag)


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


# The bucket


class Bucket:
    """The S3 calls a publish makes, each request counted (retries included)."""

    def __init__(self, client: S3Client, target: Target, session: Session | None = None) -> None:
        self.client = client
        self.target = target
        self._session = session
        self._objects: S3Store | None = None
        self._requests = 0
        self._lock = threading.Lock()
        client.meta.events.register("before-send.s3", self._count)

    def _count(self, **_: Any) -> None:
        with self._lock:
            self._requests += 1

    @property
    def requests(self) -> int:
        return self._requests

    def read_state(self, *, repair: bool = False) -> State:
        """The state in the bucket; with ``repair``, one that cannot be read counts as none."""
        from botocore.exceptions import ClientError

        key = self.target.key(STATE_NAME)
        try:
            answer = self.client.get_object(Bucket=self.target.bucket, Key=key)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") == "NoSuchKey":
                return State()
            raise
        data, etag = answer["Body"].read(), answer["ETag"]
        try:
            return decode_state(data, etag)
        except InputError:
            if repair:
                return State(etag=etag)
            raise

    def write_state(self, state: State) -> bool:
        """Write ``state`` if the stored one is still the one read; False if not."""
        from botocore.exceptions import ClientError

        condition = {"IfMatch": state.etag} if state.etag else {"IfNoneMatch": "*"}
        try:
            answer = self.client.put_object(
                Bucket=self.target.bucket,
                Key=self.target.key(STATE_NAME),
                Body=encode_state(state),
                ContentType="application/gzip",
                CacheControl="no-store",
                **condition,  # type: ignore[arg-type]
            )
        except ClientError as error:
            if _status(error) in (409, 412):
                return False
            raise
        state.etag = answer["ETag"]
        return True

    def objects(self) -> S3Store:
        """The uploads' client: obstore, at boto3's endpoint and region, with its credentials.

        Made once, before the uploads' threads start. An upload costs boto3
        about 3 ms of CPU under the GIL and obstore 0.4 ms outside it: a first
        publish of 10,000 documents here took 46 s with boto3, 9 s with obstore
        (docs/deploy-object-storage.md).
        """
        if self._objects is None:
            from obstore.auth.boto3 import Boto3CredentialProvider
            from obstore.store import S3Store

            endpoint = self.client.meta.endpoint_url
            self._objects = S3Store(
                self.target.bucket,
                endpoint=endpoint,
                region=self.client.meta.region_name or "us-east-1",
                credential_provider=Boto3CredentialProvider(self._session),
                client_options={
                    "allow_http": endpoint.startswith("http://"),
                    "connect_timeout": timedelta(seconds=5),
                    "timeout": timedelta(seconds=30),
                },
                retry_config={
                    "max_retries": 4,
                    "retry_timeout": timedelta(seconds=60),
                    "backoff": {
                        "init_backoff": timedelta(milliseconds=100),
                        "max_backoff": timedelta(seconds=5),
                        "base": 2,
                    },
                },
            )
        return self._objects

    def upload(self, path: str, body: bytes) -> None:
        """Put one file, whole: its payload's SHA-256 is signed, and checked by the store."""
        from obstore import put

        attributes: Attributes = {
            "Content-Type": content_type(path),
            "Cache-Control": CACHE_CONTROL,
        }
        put(self.objects(), self.target.key(path), body, attributes=attributes, use_multipart=False)
        with self._lock:
            self._requests += 1

    def remove(self, paths: Sequence[str]) -> None:
        answer = self.client.delete_objects(
            Bucket=self.target.bucket,
            Delete={"Objects": [{"Key": self.target.key(path)} for path in paths], "Quiet": True},
        )
        failed = answer.get("Errors", [])
        if failed:
            first = failed[0]
            raise InputError(
                f"{self.target}: cannot remove {first.get('Key')}: {first.get('Code')} "
                f"({len(failed)} failed)"
            )

    def listing(self) -> dict[str, str]:
        """Every object under the prefix: its path below the prefix and its ETag's MD5."""
        start = f"{self.target.prefix}/" if self.target.prefix else ""
        pages = self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.target.bucket, Prefix=start
        )
        found = {}
        for page in pages:
            for item in page.get("Contents", []):
                found[item["Key"][len(start) :]] = item["ETag"].strip('"')
        return found


def _status(error: Exception) -> int:
    response = getattr(error, "response", {}) or {}
    return int(response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))


# A publish


def publish(
    site: Site,
    target: Target,
    *,
    check: bool = False,
    repair: bool = False,
    max_removals: int = DEFAULT_MAX_REMOVALS,
    workers: int = DEFAULT_WORKERS,
    progress: Callable[[str, int, int], None] | None = None,
) -> Outcome:
    """Make ``target`` hold the files of ``site``; with ``check``, only plan it."""
    session = open_session()
    client = open_client(session, workers)
    from botocore.exceptions import BotoCoreError, ClientError
    from obstore.exceptions import BaseError

    try:
        bucket = Bucket(client, target, session)
        return _publish(bucket, site, check, repair, max_removals, workers, progress)
    except (BotoCoreError, ClientError) as error:
        # The SDK's own message may quote the request: ours names no secret.
        raise InputError(_explain(target, error)) from None
    except BaseError as error:  # an upload's (obstore), after its retries
        raise InputError(_explain_upload(target, client.meta.endpoint_url, error)) from None
    finally:
        client.close()


def _publish(
    bucket: Bucket,
    site: Site,
    check: bool,
    repair: bool,
    max_removals: int,
    workers: int,
    progress: Callable[[str, int, int], None] | None,
) -> Outcome:
    state = bucket.read_state(repair=repair)
    if repair:
        recorded = {path for path, _ in state.entries()}
        local = site.digests()
        todo, final = plan_by_digests(site, local, _repaired(bucket.listing(), recorded, local))
    else:
        todo, final = plan(site, state)
    if check:
        return Outcome(todo, bucket.requests)
    _guard(bucket.target, todo, max_removals)
    touched = todo.touched()
    if not touched:
        if repair and encode_state(final) != encode_state(state):  # the bucket right, the state off
            final.etag = state.etag
            return Outcome(todo, bucket.requests, _write_merged(bucket, final, touched))
        return Outcome(todo, bucket.requests)
    marks = marked(state, touched)
    raced = _write_merged(bucket, marks, touched)
    _upload(bucket, site, todo.uploads, workers, progress)
    for start in range(0, len(todo.removals), DELETE_BATCH):
        bucket.remove(todo.removals[start : start + DELETE_BATCH])
        if progress is not None:
            progress("removing", min(start + DELETE_BATCH, len(todo.removals)), len(todo.removals))
    final.etag = marks.etag
    raced = _write_merged(bucket, final, touched) or raced
    return Outcome(todo, bucket.requests, raced)


def _repaired(
    listed: dict[str, str], recorded: set[str], local: Mapping[str, object]
) -> dict[str, str]:
    """The published files as a listing shows them, with their MD5s.

    Only files the generator writes count: those recorded, those of the site,
    and any article document (of an article no longer listed). The rest of
    the bucket is the user's.
    """
    return {
        path: digest
        for path, digest in listed.items()
        if path in recorded or path in local or document_id(path) is not None
    }


def _guard(target: Target, todo: Plan, max_removals: int) -> None:
    count = len(todo.removals)
    if count > max_removals:
        raise InputError(
            f"{target}: this publish would remove {count:,} files, more than "
            f"--max-removals {max_removals}; nothing was changed. If that is meant, "
            f"run again with --max-removals {count}"
        )


def _write_merged(bucket: Bucket, state: State, touched: Sequence[str]) -> bool:
    """Write ``state`` over the one read (its etag); True if another publish wrote it since.

    Then the other publish's state is kept, with every file this one touched
    marked unknown: its bytes are whichever upload came last.
    """
    if bucket.write_state(state):
        return False
    for _ in range(10):
        current = marked(bucket.read_state(), touched)
        if bucket.write_state(current):
            state.etag = current.etag
            return True
    raise InputError(f"{bucket.target}: the state keeps changing: is another publish running?")


def _upload(
    bucket: Bucket,
    site: Site,
    uploads: Sequence[tuple[str, int]],
    workers: int,
    progress: Callable[[str, int, int], None] | None,
) -> None:
    if not uploads:
        return
    bucket.objects()  # made here, not by the threads at once
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(_upload_one, bucket, site, path, place) for path, place in uploads]
        try:
            for done, future in enumerate(_completed(futures), 1):
                future.result()
                if progress is not None and (done % 100 == 0 or done == len(uploads)):
                    progress("uploading", done, len(uploads))
        except BaseException:
            for future in futures:
                future.cancel()
            raise


def _completed(futures: list[Future[None]]) -> Iterator[Future[None]]:
    from concurrent.futures import as_completed

    return as_completed(futures)


def _upload_one(bucket: Bucket, site: Site, path: str, place: int) -> None:
    bucket.upload(path, site.body(path, place))


# The client and its failures


def require_client() -> None:
    """An InputError naming the requirements file if boto3 or obstore is not installed."""
    try:
        import boto3  # noqa: F401
        import obstore  # noqa: F401
    except ImportError:
        raise InputError(
            f"--publish needs boto3 and obstore: pip install -r {REQUIREMENTS}"
        ) from None


def open_session() -> Session:
    """The standard AWS variables and files (credentials, region, endpoint, profile)."""
    require_client()
    import boto3

    return boto3.session.Session()


def open_client(session: Session, workers: int) -> S3Client:
    """A boto3 S3 client of ``session``, with retries: all but the uploads."""
    from botocore.config import Config

    config = Config(
        retries=RETRIES,  # type: ignore[arg-type]
        max_pool_connections=workers,
        connect_timeout=5,
        read_timeout=30,
        # The state's bodies are signed (SigV4's payload hash): a CRC32 on top would
        # be CPU for nothing.
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
    )
    return session.client("s3", config=config)


def _explain(target: Target, error: Exception) -> str:
    """One line about a failure the SDK gave up on (after its retries)."""
    from botocore import exceptions

    if isinstance(error, exceptions.NoCredentialsError):
        return (
            f"{target}: no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, "
            "or AWS_PROFILE"
        )
    if isinstance(error, (exceptions.EndpointConnectionError, exceptions.ConnectionClosedError)):
        return f"{target}: cannot reach {_endpoint(error)} (AWS_ENDPOINT_URL)"
    if isinstance(error, (exceptions.ReadTimeoutError, exceptions.ConnectTimeoutError)):
        return f"{target}: {_endpoint(error)} did not answer in time (AWS_ENDPOINT_URL)"
    if isinstance(error, exceptions.ClientError):
        code = error.response.get("Error", {}).get("Code", "")
        if code == "NoSuchBucket":
            return f"{target}: no such bucket"
        if (
            code in ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "Forbidden")
            or _status(error) == 403
        ):
            return (
                f"{target}: access denied ({code or 403}): check the credentials "
                "(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_PROFILE) and their permissions"
            )
        return f"{target}: the store refused: {code or _status(error)}"
    return f"{target}: {type(error).__name__}"


def _explain_upload(target: Target, endpoint: str, error: Exception) -> str:
    """One line about an upload that failed (obstore's), naming no secret."""
    from obstore import exceptions

    if isinstance(error, (exceptions.PermissionDeniedError, exceptions.UnauthenticatedError)):
        return (
            f"{target}: access denied (403): check the credentials "
            "(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_PROFILE) and their permissions"
        )
    if isinstance(error, exceptions.NotFoundError):
        return f"{target}: no such bucket"
    text = str(error).lower()
    if any(word in text for word in ("connect", "sending request", "timed out", "timeout")):
        return f"{target}: cannot reach {_safe_url(endpoint)} (AWS_ENDPOINT_URL)"
    return f"{target}: an upload failed: {type(error).__name__}"


def _endpoint(error: BaseException) -> str:
    """The endpoint's scheme, host and port, never any user name or password in it."""
    return _safe_url(str(getattr(error, "kwargs", {}).get("endpoint_url", "")))


def _safe_url(url: str) -> str:
    parts = urlsplit(url)
    if not parts.hostname:
        return "the endpoint"
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{parts.hostname}{port}"


def describe(target: Target, outcome: Outcome, seconds: float, check: bool) -> str:
    """The summary line of a publish."""
    todo = outcome.plan
    verb = ("to upload", "to remove") if check else ("uploaded", "removed")
    return (
        f"{'checked' if check else 'published'} {target}: {len(todo.uploads):,} {verb[0]}, "
        f"{len(todo.removals):,} {verb[1]}, {todo.unchanged:,} unchanged; "
        f"{outcome.requests:,} request{'' if outcome.requests == 1 else 's'} in {seconds:.2f} s"
    )


def examples(todo: Plan) -> list[str]:
    """The first few files --check would upload or remove."""
    listed = [f"upload {path}" for path, _ in todo.uploads[:EXAMPLES]]
    listed += [f"remove {path}" for path in todo.removals[: EXAMPLES - len(listed)]]
    return listed


def timed(action: Callable[[], Outcome]) -> tuple[Outcome, float]:
    started = time.perf_counter()
    outcome = action()
    return outcome, time.perf_counter() - started
