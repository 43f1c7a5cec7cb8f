"""``--publish s3://BUCKET[/PREFIX]``: make a bucket hold exactly the built site.

What is published is what the build wrote: its documents rendered again by
the build's own renderer, and the other generated files' bytes from the
build's result. A user's own files in the output folder (a CNAME, a
``_headers``) are never published, and ``_redirects`` neither: it is a rule
file for Netlify and Cloudflare Pages, which S3 would serve as a file.

The bucket is not listed. The state object (ratings_api/bucket_state.py)
records what every published file holds. A publish reads it (one request),
plans by comparing the catalogue's numbers with the state's (no rendering: a
no-op costs about what reading the state costs), uploads the files that
differ, removes the files no longer built, and writes the state again.
``--repair`` lists the bucket instead and compares ETags with every file's
MD5, for a bucket changed by hand or a state that cannot be read.

Why any interleaving of publishes converges
-------------------------------------------

A publish of catalogue C runs this loop, at most ATTEMPTS times:

1. read the state S and its version V (the ETag; none if there is no state);
2. plan(C, S): the uploads and removals that make a bucket recorded as S
   hold C's site, and F, the state that records C's site. A pure function:
   nothing else goes in;
3. write M = S with every file the plan touches marked unknown, *if the
   state is still V*; it becomes version V1;
4. upload, then remove;
5. write F *if the state is still V1*. Done.

If a conditional write finds another version (412 or 409), go back to 1: read
again, plan again. Never write over a version the plan was not made from.

The invariant: *a file the state records as known holds what the state says*,
for every version written. Every write is conditional on the version before
it, so the versions form one chain and each is derived from its predecessor:

- M only turns known files into unknown ones: it cannot break the invariant.
- F is written over V1, the marks of this very publish, so no other publish
  wrote in between. Every file F records as known is either untouched by
  this plan (known, and the same, in S, so it held that already), or touched
  by it: marked unknown at step 3, then written by this publish at step 4.
  Another publish Q that writes such a file after our marks either wrote its
  marks before ours (then its final write conflicts with ours, it reads F,
  plans again and uploads again whatever F records differently from its
  catalogue) or after ours (then ours conflicts: we plan again).
- A publish that stops anywhere (killed, interrupted, its store gone) leaves
  the last version it wrote: S, or M with its files marked unknown. The
  next publish re-uploads them; nothing recorded as known is wrong.

So the next publish of any catalogue that runs alone makes the bucket exactly
that catalogue's site, and ``--check`` (steps 1-2) says "current" only when
every file is known and the same. A conflict costs a new read and plan, and
the uploads of the files another publish touched meanwhile; past ATTEMPTS
conflicts in a row the publish stops with one line (exit 2).

The window left open: while Q is still uploading a file it marked, another
publish P may read Q's marks, upload that file and record it (P's final write
succeeds: Q wrote nothing since P's marks). If Q's upload lands after P's,
the state is wrong until Q's final write, which conflicts, reads P's state
and uploads the file again. If Q dies in between (killed while a frozen
upload of it lands late), nothing says so. A publish that dies stops
uploading then, so this needs two publishes uploading the same file at once
and the slower one killed: a CI concurrency group (one publish per target at
a time) rules it out, and ``--repair`` fixes such a bucket.

A reply lost after the store did the write (the SDK retries, and the retry
finds the condition false) is not a conflict: the stored state is read back
and, if its bytes are the ones written, it is ours.

Objects are replaced whole by S3, never partly written. Uploads run on one
asyncio loop, a bounded window of them in flight (memory is the same for ten
uploads or a million), fed from the plan's iterator, and cancelled at once by
Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import os
import secrets
import signal
import time
from array import array
from collections.abc import Callable, Coroutine, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Final, overload
from urllib.parse import urlsplit

from ratings_api.bucket_state import (
    CACHE_CONTROL,
    STATE_NAME,
    State,
    decode,
    document_id,
    document_path,
    encode,
)
from ratings_api.bucket_state import marked as marked_state
from ratings_api.errors import InputError
from ratings_api.hosting import NOT_FOUND_PAGE, REDIRECTS
from ratings_api.loader import MAX_ID, Catalogue
from ratings_api.rating import Renderer

if TYPE_CHECKING:
    from boto3.session import Session
    from mypy_boto3_s3 import S3Client
    from obstore import Attributes
    from obstore.store import S3Store

    from ratings_api.build import Result

# The state's format lives in bucket_state; these names stay importable from here.
encode_state = encode
decode_state = decode
__all__ = ["CACHE_CONTROL", "STATE_NAME", "State", "decode_state", "encode_state", "marked"]

REQUIREMENTS: Final = "requirements-publish.txt"
NOT_PUBLISHED: Final = frozenset({REDIRECTS})  # host rules, meaningless to S3
DEFAULT_MAX_REMOVALS: Final = 256  # as hugo deploy's --maxDeletes
# A store 30 ms away takes at most workers / 0.03 s uploads a second (Little's law):
# 32 caps a publish near 1,000/s, under this machine's 2,200/s nearby; 64 lifts the cap
# to 2,100/s. Nearby, 32 and 64 measured alike, A/B/A/B (bench/publish.py --workers-sweep).
DEFAULT_WORKERS: Final = 64
ATTEMPTS: Final = 10  # plans in a row whose state write met another publish's
DELETE_BATCH: Final = 1000  # DeleteObjects' limit
CHUNK: Final = 4096  # numbers compared at a time when looking for the few that differ
RETRIES: Final = {"mode": "standard", "total_max_attempts": 5}
EXAMPLES: Final = 10  # paths listed by --check
PROGRESS_EVERY: Final = 100  # uploads between two progress reports
STOP_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM)
DEFAULT_REGION: Final = "us-east-1"  # S3's, where neither the user nor the bucket says
EXPIRED: Final = frozenset(
    {"ExpiredToken", "ExpiredTokenException", "InvalidToken", "TokenRefreshRequired"}
)
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


class Uploads(Sequence[tuple[str, int]]):
    """The files to upload (path, and the article's place or -1), each path made when asked.

    A first publish of a million articles holds a column of a million places
    (8 MB) here, not a million tuples of paths (about 150 MB).
    """

    def __init__(
        self, ids: Sequence[int], places: Sequence[int], others: Sequence[tuple[str, int]]
    ) -> None:
        self._ids = ids
        self._places = places
        self._others = others

    def __len__(self) -> int:
        return len(self._places) + len(self._others)

    @overload
    def __getitem__(self, index: int) -> tuple[str, int]: ...

    @overload
    def __getitem__(self, index: slice) -> list[tuple[str, int]]: ...

    def __getitem__(self, index: int | slice) -> tuple[str, int] | list[tuple[str, int]]:
        if isinstance(index, slice):
            return [self[n] for n in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        if index < len(self._places):
            place = self._places[index]
            return document_path(self._ids[place]), place
        return self._others[index - len(self._places)]

    def articles(self) -> Iterator[int]:
        """The ids of the documents to upload, by their places."""
        ids = self._ids
        return (ids[place] for place in self._places)

    @property
    def others(self) -> Sequence[tuple[str, int]]:
        return self._others

    def __iter__(self) -> Iterator[tuple[str, int]]:
        ids = self._ids
        for place in self._places:
            yield document_path(ids[place]), place
        yield from self._others

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]


@dataclass(frozen=True)
class Plan:
    uploads: Sequence[tuple[str, int]]  # path, and its article's place in the catalogue or -1
    removals: list[str]
    unchanged: int

    def touched(self) -> Iterator[str]:
        """Every path the plan uploads or removes, made one at a time."""
        yield from (path for path, _ in self.uploads)
        yield from self.removals


@dataclass(frozen=True)
class Outcome:
    """What a publish did (or, checking, would do): its last plan, and how many it made."""

    plan: Plan
    requests: int
    plans: int = 1  # more than one: another publish wrote the state meanwhile


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
        columns = _columns(catalogue)
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


def _columns(catalogue: Catalogue) -> tuple[array[int], array[int], array[int]] | None:
    """The catalogue's numbers as 64-bit columns; None if one needs more."""
    try:
        return array("q", catalogue.ids), array("q", catalogue.sums), array("q", catalogue.counts)
    except OverflowError:
        return None


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
    """What makes the bucket, recorded as ``published``, hold ``site``; and the state after.

    A pure function of its arguments: the same site and state, the same plan.
    """
    local, files = site.state()
    changed, gone = _changed_articles(local, published)
    others = [
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
    uploads = Uploads(local.ids, changed, others)
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


def _changed_articles(local: State, published: State) -> tuple[array[int], list[int]]:
    """The places of the local articles whose documents differ, and the ids no longer listed."""
    same_stamp = local.stamp == published.stamp
    if same_stamp and _same_numbers(local.ids, published.ids):
        # The usual publish: the same articles in the same order. Only the few
        # numbers that differ are looked at one by one.
        differ = _differing(local.sums, published.sums) | _differing(local.counts, published.counts)
        return array("q", sorted(differ)), []
    if not published.ids:  # a first publish: every document, no dictionary of nothing
        return array("q", range(len(local.ids))), []
    where = {article_id: place for place, article_id in enumerate(published.ids)}
    sums, counts = published.sums, published.counts
    changed = array("q")
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


def marked(state: State, touched: Iterable[str]) -> State:
    """A copy of ``state`` with each file of ``touched`` (paths) recorded as not known."""
    articles, paths = _split(state, touched)
    return marked_state(state, dict.fromkeys(articles), paths)


def marks_of(state: State, todo: Plan) -> State:
    """``state`` with every file ``todo`` touches recorded as not known.

    The documents it uploads go by their places: a first publish of a million
    makes no million paths to parse back.
    """
    uploads = todo.uploads
    if isinstance(uploads, Uploads):
        articles, paths = _split(state, (path for path, _ in uploads.others))
        gone, more = _split(state, todo.removals)
        return marked_state(
            state, itertools.chain(uploads.articles(), articles, gone), paths + more
        )
    return marked(state, todo.touched())


def _split(state: State, touched: Iterable[str]) -> tuple[list[int], list[str]]:
    """The ids of the documents the state records by their numbers; the other paths."""
    articles, paths = [], []
    for path in touched:
        article_id = document_id(path)
        if article_id is None or article_id > MAX_ID or path in state.files:
            paths.append(path)
        else:
            articles.append(article_id)
    return articles, paths


# The bucket


@dataclass(frozen=True)
class Read:
    """The state as read, with the version (ETag) a write over it is conditional on."""

    state: State
    version: str | None  # None: there was no state object
    data: bytes = b""  # the object's bytes, as read


class Bucket:
    """The S3 calls a publish makes, each request counted (retries included)."""

    def __init__(self, client: S3Client, target: Target, session: Session | None = None) -> None:
        self.client = client
        self.target = target
        self._session = session
        self._objects: S3Store | None = None
        self._requests = 0
        client.meta.events.register("before-send.s3", self._count)

    def _count(self, **_: Any) -> None:
        self._requests += 1  # boto3's calls and the uploads all run on this one thread

    @property
    def requests(self) -> int:
        return self._requests

    def read_state(self, *, repair: bool = False) -> Read:
        """The state in the bucket; with ``repair``, one that cannot be read counts as none."""
        stored = self._get_state()
        if stored is None:
            return Read(State(), None)
        data, version = stored
        try:
            return Read(decode(data), version, data)
        except InputError:
            if repair:
                return Read(State(), version, data)
            raise

    def _get_state(self) -> tuple[bytes, str] | None:
        from botocore.exceptions import ClientError

        try:
            answer = self.client.get_object(
                Bucket=self.target.bucket, Key=self.target.key(STATE_NAME)
            )
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") == "NoSuchKey":
                return None
            raise
        return answer["Body"].read(), answer["ETag"]

    def write_state(self, state: State, version: str | None) -> str | None:
        """Write ``state`` if the stored one is still ``version`` (None: if there is none).

        The new version; None if another publish wrote the state since. A
        conflict after a retry may be our own write whose reply was lost: the
        token each write carries tells.
        """
        from botocore.exceptions import ClientError

        body = encode(replace(state, token=secrets.token_hex(16)))
        condition = {"IfMatch": version} if version is not None else {"IfNoneMatch": "*"}
        try:
            answer = self.client.put_object(
                Bucket=self.target.bucket,
                Key=self.target.key(STATE_NAME),
                Body=body,
                ContentType="application/gzip",
                CacheControl="no-store",
                **condition,  # type: ignore[arg-type]
            )
        except ClientError as error:
            if _status(error) not in (409, 412):
                raise
            stored = self._get_state()
            return stored[1] if stored is not None and stored[0] == body else None
        return answer["ETag"]

    def objects(self) -> S3Store:
        """The uploads' client: obstore, at boto3's endpoint and the bucket's region.

        An upload costs boto3 about 3 ms of CPU under the GIL and obstore 0.4 ms
        outside it (docs/deploy-object-storage.md).
        """
        if self._objects is None:
            from obstore.auth.boto3 import Boto3CredentialProvider
            from obstore.store import S3Store

            endpoint = self.client.meta.endpoint_url
            self._objects = S3Store(
                self.target.bucket,
                endpoint=endpoint,
                region=self.region(),
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

    def region(self) -> str:
        """The region the user configured; if none, the bucket's own (one HEAD request).

        boto3 follows a bucket's region redirect by itself; obstore signs for the
        region it is given, and a bucket in another region refuses it.
        """
        configured = self._session.region_name if self._session is not None else None
        if configured:
            return configured
        from botocore.exceptions import ClientError

        try:
            answer = self.client.head_bucket(Bucket=self.target.bucket)
            headers = answer["ResponseMetadata"]["HTTPHeaders"]
        except ClientError as error:
            # A redirect's answer names the region too, and so does a refusal: a
            # publisher may put objects without the right to list the bucket.
            headers = error.response.get("ResponseMetadata", {}).get("HTTPHeaders", {})
            if _status(error) not in (301, 400, 403):
                raise
        return headers.get("x-amz-bucket-region") or DEFAULT_REGION

    async def upload(self, path: str, body: bytes) -> None:
        """Put one file, whole: its payload's SHA-256 is signed, and checked by the store."""
        from obstore import put_async

        attributes: Attributes = {
            "Content-Type": content_type(path),
            "Cache-Control": CACHE_CONTROL,
        }
        await put_async(
            self.objects(), self.target.key(path), body, attributes=attributes, use_multipart=False
        )
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
    """Make ``target`` hold the files of ``site``; with ``check``, only plan it.

    ``workers``: the uploads in flight at a time.
    """
    require_client()
    from botocore.exceptions import BotoCoreError, ClientError
    from obstore.exceptions import BaseError

    client: S3Client | None = None
    try:
        # Inside the try: a profile, endpoint or region the SDK cannot use fails here.
        session = open_session()
        client = open_client(session, target)
        bucket = Bucket(client, target, session)
        options = Options(check, repair, max_removals, workers, progress)
        return _publish(bucket, site, options)
    except (BotoCoreError, ClientError) as error:
        # The SDK's own message may quote the request: ours names no secret.
        raise InputError(_explain(target, error)) from None
    except BaseError as error:  # an upload's (obstore), after its retries
        endpoint = client.meta.endpoint_url if client is not None else ""
        raise InputError(_explain_upload(target, endpoint, error)) from None
    finally:
        if client is not None:
            client.close()


@dataclass(frozen=True)
class Options:
    check: bool
    repair: bool
    max_removals: int
    workers: int
    progress: Callable[[str, int, int], None] | None


def _publish(bucket: Bucket, site: Site, options: Options) -> Outcome:
    """Read, plan, mark, upload, remove, write; read and plan again after a conflict."""
    read = bucket.read_state(repair=options.repair)
    if options.repair:
        todo, final = _plan_repair(bucket, site, read.state)
    else:
        todo, final = plan(site, read.state)
    if options.check:
        return Outcome(todo, bucket.requests)
    for attempt in range(1, ATTEMPTS + 1):
        _guard(bucket.target, todo, options.max_removals)
        if _carry_out(bucket, site, read, todo, final, options):
            return Outcome(todo, bucket.requests, attempt)
        # Another publish wrote the state since it was read: this plan is stale.
        read = bucket.read_state(repair=options.repair)
        todo, final = plan(site, read.state)
    raise InputError(f"{bucket.target}: the state keeps changing: is another publish running?")


def _carry_out(
    bucket: Bucket, site: Site, read: Read, todo: Plan, final: State, options: Options
) -> bool:
    """Do ``todo``, planned from ``read``; False if a state write met another version."""
    version = read.version
    if todo.uploads or todo.removals:
        version = bucket.write_state(marks_of(read.state, todo), version)
        if version is None:
            return False
        _upload(bucket, site, todo.uploads, options.workers, options.progress)
        _remove(bucket, todo.removals, options.progress)
    elif not options.repair or encode(final) == encode(replace(read.state, token="")):
        return True  # the bucket and its state are the site's already
    return bucket.write_state(final, version) is not None


def _plan_repair(bucket: Bucket, site: Site, state: State) -> tuple[Plan, State]:
    recorded = {path for path, _ in state.entries()}
    local = site.digests()
    return plan_by_digests(site, local, _repaired(bucket.listing(), recorded, local))


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


def _remove(
    bucket: Bucket, removals: Sequence[str], progress: Callable[[str, int, int], None] | None
) -> None:
    for start in range(0, len(removals), DELETE_BATCH):
        bucket.remove(removals[start : start + DELETE_BATCH])
        if progress is not None:
            progress("removing", min(start + DELETE_BATCH, len(removals)), len(removals))


def _upload(
    bucket: Bucket,
    site: Site,
    uploads: Sequence[tuple[str, int]],
    window: int,
    progress: Callable[[str, int, int], None] | None,
) -> None:
    """Upload each file, at most ``window`` in flight, on one asyncio loop.

    Ctrl-C or SIGTERM cancels the uploads in flight at once (a thread pool
    would wait for them, up to the retries' timeout, when the store stalls),
    then goes to the handler that was there before, as if the signal came now.
    """
    if not uploads:
        return
    bucket.objects()  # made (and the region asked) before the loop runs
    caught: list[int] = []
    previous = {number: signal.getsignal(number) for number in STOP_SIGNALS}
    try:
        asyncio.run(
            _cancelled_by_signals(_upload_all(bucket, site, uploads, window, progress), caught)
        )
    except asyncio.CancelledError:
        if not caught:
            raise
    finally:
        for number, handler in previous.items():
            if signal.getsignal(number) is not handler and handler is not None:
                signal.signal(number, handler)  # asyncio puts back the default, not this
    for signum in caught[:1]:
        handler = previous[signal.Signals(signum)]
        if callable(handler):
            handler(signum, None)
        elif handler == signal.SIG_DFL:
            signal.raise_signal(signum)  # the default action: stop as the signal would


async def _cancelled_by_signals(work: Coroutine[Any, Any, None], caught: list[int]) -> None:
    """Run ``work``; a stop signal cancels it (noted in ``caught``)."""
    task = asyncio.ensure_future(work)
    loop = asyncio.get_running_loop()

    def stop(number: int) -> None:
        caught.append(number)
        task.cancel()

    for number in STOP_SIGNALS:
        if signal.getsignal(number) is not signal.SIG_IGN:
            with contextlib.suppress(ValueError, RuntimeError):  # not the main thread
                loop.add_signal_handler(number, stop, number)
    await task


async def _upload_all(
    bucket: Bucket,
    site: Site,
    uploads: Sequence[tuple[str, int]],
    window: int,
    progress: Callable[[str, int, int], None] | None,
) -> None:
    """``window`` workers, each taking the next upload from one shared iterator.

    Each body is rendered when its upload starts: never all of them at once.
    """
    todo = iter(uploads)
    total = len(uploads)
    done = 0

    async def worker() -> None:
        nonlocal done
        for path, place in todo:  # one thread: no two workers take the same item
            await bucket.upload(path, site.body(path, place))
            done += 1
            if progress is not None and (done % PROGRESS_EVERY == 0 or done == total):
                progress("uploading", done, total)

    workers = [asyncio.ensure_future(worker()) for _ in range(min(max(1, window), total))]
    try:
        await asyncio.gather(*workers)  # the first failure, at once
    finally:
        for task in workers:
            task.cancel()
        # Collected, so that no failure is left for asyncio to print at exit.
        await asyncio.gather(*workers, return_exceptions=True)


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
    import boto3

    return boto3.session.Session()


def open_client(session: Session, target: Target) -> S3Client:
    """A boto3 S3 client of ``session``, with retries: all but the uploads."""
    from botocore.config import Config

    config = Config(
        retries=RETRIES,  # type: ignore[arg-type]
        connect_timeout=5,
        read_timeout=30,
        # The state's bodies are signed (SigV4's payload hash): a CRC32 on top would
        # be CPU for nothing.
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
    )
    try:
        return session.client("s3", config=config)
    except ValueError:
        # botocore's message quotes the endpoint, and a key may be written in it.
        raise InputError(
            f"{target}: the endpoint (AWS_ENDPOINT_URL, or endpoint_url in the AWS config) "
            "is not a URL such as https://HOST[:PORT]"
        ) from None


def _explain(target: Target, error: Exception) -> str:
    """One line about a failure the SDK gave up on (after its retries)."""
    from botocore import exceptions

    if isinstance(error, exceptions.ProfileNotFound):
        profile = error.kwargs.get("profile", "")
        return (
            f"{target}: AWS_PROFILE: no profile '{profile}' in the AWS config or credentials files"
        )
    if isinstance(error, exceptions.NoRegionError):
        return f"{target}: no region: set AWS_REGION, or region in the AWS config"
    if isinstance(error, (exceptions.SSOError, exceptions.TokenRetrievalError)):
        return (
            f"{target}: the profile's sign-in has expired or was never made: "
            "run aws sso login, then publish again"
        )
    if isinstance(error, exceptions.CredentialRetrievalError):
        return f"{target}: the profile's credential_process failed: run it by hand to see why"
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
        if code in EXPIRED:
            return (
                f"{target}: the credentials have expired ({code}): get new ones "
                "(AWS_SESSION_TOKEN, or aws sso login), then publish again"
            )
        if (
            code in ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "Forbidden")
            or _status(error) == 403
        ):
            return _access_denied(target, code or "403")
        return f"{target}: the store refused: {code or _status(error)}"
    return f"{target}: {type(error).__name__}"


def _explain_upload(target: Target, endpoint: str, error: Exception) -> str:
    """One line about an upload that failed (obstore's), naming no secret."""
    from obstore import exceptions

    if isinstance(error, (exceptions.PermissionDeniedError, exceptions.UnauthenticatedError)):
        return _access_denied(target, "403")
    if isinstance(error, exceptions.NotFoundError):
        return f"{target}: no such bucket"
    text = str(error).lower()
    if any(word in text for word in ("connect", "sending request", "timed out", "timeout")):
        return f"{target}: cannot reach {_safe_url(endpoint)} (AWS_ENDPOINT_URL)"
    return f"{target}: an upload failed: {type(error).__name__}"


def _access_denied(target: Target, code: str) -> str:
    """The one line for credentials the store refused, whichever client met them."""
    return (
        f"{target}: access denied ({code}): check the credentials "
        "(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_PROFILE) and their permissions"
    )


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
        + (
            f"; planned {outcome.plans} times, as another publish wrote the state meanwhile"
            if outcome.plans > 1
            else ""
        )
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
