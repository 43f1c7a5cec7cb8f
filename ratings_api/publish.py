"""``--publish s3://BUCKET[/PREFIX]``: make a bucket hold exactly the built site.

What is published is what the build wrote: its documents rendered again by
the build's own renderer, and the other generated files' bytes from the
build's result (reading a million files back from the disk costs about five
times as much: docs/deploy-object-storage.md). A user's own files in the
output folder (a CNAME, a ``_headers``) are never published, and
``_redirects`` neither: it is a rule file for Netlify and Cloudflare Pages,
which S3 would serve as a file.

The bucket is not listed. A state object, ``PREFIX/.ratings-api/state.json.gz``,
records the MD5 of every file published, the digest S3 reports as the ETag
of a plain upload: a publish reads it (one request), uploads the files whose
digest differs, removes the files no longer built, and writes it again.
``--repair`` lists the bucket instead and compares ETags, for a bucket
changed by hand.

Order, so that an interruption at any point converges at the next run: the
state is first rewritten with every file about to be touched marked
unknown ("" for a digest); then uploads, then removals, then the final state.
Each state write is conditional on the state read (If-Match / If-None-Match),
so two publishes at once cannot lose each other's marks: the later one
merges and exits 2, asking for a rerun. Objects are replaced whole by S3,
never partly written.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final
from urllib.parse import urlsplit

from ratings_api.errors import InputError
from ratings_api.hosting import NOT_FOUND_PAGE, REDIRECTS
from ratings_api.loader import Catalogue
from ratings_api.rating import ARTICLES_PATH, Renderer

if TYPE_CHECKING:
    from ratings_api.build import Result

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

REQUIREMENTS: Final = "requirements-publish.txt"
CACHE_CONTROL: Final = "public, max-age=0, must-revalidate"  # the API's (server.py)
STATE_DIR: Final = ".ratings-api"
STATE_NAME: Final = f"{STATE_DIR}/state.json.gz"
STATE_FORMAT: Final = 1  # a new one (or new headers) re-uploads every file once
NOT_PUBLISHED: Final = frozenset({REDIRECTS})  # host rules, meaningless to S3
DEFAULT_MAX_REMOVALS: Final = 256  # as hugo deploy's --maxDeletes
# Measured with bench/publish.py against SeaweedFS here: more workers gained nothing.
DEFAULT_WORKERS: Final = 16
DELETE_BATCH: Final = 1000  # DeleteObjects' limit
UNKNOWN: Final = ""  # the state's digest of a file whose bytes are not known
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
    """The state object: each published file's MD5 (or UNKNOWN), and its ETag when read."""

    files: dict[str, str] = field(default_factory=dict)
    etag: str | None = None


@dataclass(frozen=True)
class Plan:
    uploads: list[str]
    removals: list[str]
    unchanged: int


@dataclass(frozen=True)
class Outcome:
    """What a publish did (or, checking, would do)."""

    plan: Plan
    requests: int
    raced: bool = False


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
            yield f"{ARTICLES_PATH}/{article_id}/rating/index.json", place
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
        md5 = hashlib.md5
        return {
            path: (md5(self.body(path, place), usedforsecurity=False).hexdigest(), place)
            for path, place in self.paths()
        }


def site_of(result: Result) -> Site:
    """The files the build of ``result`` wrote."""
    assert result.catalogue is not None and result.render is not None
    return Site(result.catalogue, result.render, result.extras)


def content_type(path: str) -> str:
    """The Content-Type the API's server sends; 404.html holds the JSON error body."""
    if path == NOT_FOUND_PAGE:
        return "application/json"
    return TYPES.get(os.path.splitext(path)[1], "application/octet-stream")


def plan(local: dict[str, str], published: dict[str, str]) -> Plan:
    """What makes the bucket, recorded as ``published``, hold ``local``."""
    uploads = [path for path, digest in local.items() if published.get(path) != digest]
    removals = sorted(path for path in published if path not in local)
    return Plan(uploads, removals, len(local) - len(uploads))


# The state object


def encode_state(files: dict[str, str]) -> bytes:
    """The state's bytes: gzipped JSON, the same bytes for the same files."""
    body = {"format": STATE_FORMAT, "cache_control": CACHE_CONTROL, "files": files}
    text = json.dumps(body, sort_keys=True, separators=(",", ":")).encode()
    return gzip.compress(text, compresslevel=6, mtime=0)


def decode_state(data: bytes, etag: str) -> State:
    """The state read back; one from another format or header policy marks all unknown."""
    try:
        body = json.loads(gzip.decompress(data))
        files = body["files"]
        current = body["format"] == STATE_FORMAT and body["cache_control"] == CACHE_CONTROL
    except (OSError, ValueError, KeyError, TypeError):
        raise InputError(
            f"{STATE_NAME}: not a state this version can read; --repair lists the bucket "
            "and writes a new one"
        ) from None
    if not current:
        files = dict.fromkeys(files, UNKNOWN)
    return State(files, etag)


# The bucket


class Bucket:
    """The S3 calls a publish makes, each request counted (retries included)."""

    def __init__(self, client: S3Client, target: Target) -> None:
        self.client = client
        self.target = target
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
                return State({}, etag)
            raise

    def write_state(self, state: State) -> bool:
        """Write ``state`` if the stored one is still the one read; False if not."""
        from botocore.exceptions import ClientError

        condition = {"IfMatch": state.etag} if state.etag else {"IfNoneMatch": "*"}
        try:
            answer = self.client.put_object(
                Bucket=self.target.bucket,
                Key=self.target.key(STATE_NAME),
                Body=encode_state(state.files),
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

    def upload(self, path: str, body: bytes, digest: str) -> None:
        self.client.put_object(
            Bucket=self.target.bucket,
            Key=self.target.key(path),
            Body=body,
            ContentMD5=base64.b64encode(bytes.fromhex(digest)).decode(),
            ContentType=content_type(path),
            CacheControl=CACHE_CONTROL,
        )

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
    client = open_client(workers)
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        bucket = Bucket(client, target)
        return _publish(bucket, site, check, repair, max_removals, workers, progress)
    except (BotoCoreError, ClientError) as error:
        # The SDK's own message may quote the request: ours names no secret.
        raise InputError(_explain(target, error)) from None
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
    found = site.digests()
    local = {path: digest for path, (digest, _) in found.items()}
    published = state.files
    if repair:
        published = _repaired(bucket.listing(), published, local)
    todo = plan(local, published)
    if check:
        return Outcome(todo, bucket.requests)
    _guard(bucket.target, todo, max_removals)
    if not todo.uploads and not todo.removals:
        if state.files != local:  # --repair found the bucket right but the state off
            raced = _write_merged(bucket, state, dict(local), ())
            return Outcome(todo, bucket.requests, raced)
        return Outcome(todo, bucket.requests)
    raced = _mark(bucket, state, published, todo)
    _upload(bucket, site, [(path, found[path][1]) for path in todo.uploads], workers, progress)
    for start in range(0, len(todo.removals), DELETE_BATCH):
        bucket.remove(todo.removals[start : start + DELETE_BATCH])
        if progress is not None:
            progress("removing", min(start + DELETE_BATCH, len(todo.removals)), len(todo.removals))
    state.files = dict(local)
    raced = _finish(bucket, state, todo) or raced
    return Outcome(todo, bucket.requests, raced)


def _repaired(
    listed: dict[str, str], recorded: dict[str, str], local: dict[str, str]
) -> dict[str, str]:
    """The published files as a listing shows them: the recorded ones and the built ones.

    Only files the generator writes count: those recorded, those built now,
    and any article document (of an article no longer listed). The rest of the
    bucket is the user's.
    """
    ours = {
        path: digest
        for path, digest in listed.items()
        if path in recorded or path in local or _is_document(path)
    }
    return ours


def _is_document(path: str) -> bool:
    head, _, rest = path.partition(ARTICLES_PATH + "/")
    article, _, tail = rest.partition("/")
    return head == "" and article.isdigit() and tail == "rating/index.json"


def _guard(target: Target, todo: Plan, max_removals: int) -> None:
    count = len(todo.removals)
    if count > max_removals:
        raise InputError(
            f"{target}: this publish would remove {count:,} files, more than "
            f"--max-removals {max_removals}; nothing was changed. If that is meant, "
            f"run again with --max-removals {count}"
        )


def _mark(bucket: Bucket, state: State, published: dict[str, str], todo: Plan) -> bool:
    """Record every file about to be touched as unknown, before touching any."""
    marked = dict(published)
    for path in (*todo.uploads, *todo.removals):
        marked[path] = UNKNOWN
    return _write_merged(bucket, state, marked, (*todo.uploads, *todo.removals))


def _finish(bucket: Bucket, state: State, todo: Plan) -> bool:
    """Write the final state; True if another publish wrote the state meanwhile."""
    return _write_merged(bucket, state, state.files, (*todo.uploads, *todo.removals))


def _write_merged(
    bucket: Bucket, state: State, files: dict[str, str], touched: Sequence[str]
) -> bool:
    """Write ``files`` as the state; if another publish wrote it since, merge and say so.

    Merging keeps the other publish's record, with every file this one
    touched marked unknown: its bytes are whichever upload came last.
    """
    state.files = files
    if bucket.write_state(state):
        return False
    for _ in range(10):
        current = bucket.read_state()
        for path in touched:
            current.files[path] = UNKNOWN
        if bucket.write_state(current):
            state.files, state.etag = current.files, current.etag
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
    body = site.body(path, place)
    bucket.upload(path, body, hashlib.md5(body, usedforsecurity=False).hexdigest())


# The client and its failures


def require_client() -> None:
    """An InputError naming the requirements file if boto3 is not installed."""
    try:
        import boto3  # noqa: F401
    except ImportError:
        raise InputError(f"--publish needs boto3: pip install -r {REQUIREMENTS}") from None


def open_client(workers: int) -> S3Client:
    """An S3 client from the standard AWS variables and files, with retries."""
    require_client()
    import boto3
    from botocore.config import Config

    config = Config(
        retries=RETRIES,  # type: ignore[arg-type]
        max_pool_connections=workers,
        connect_timeout=5,
        read_timeout=30,
        # Each upload carries its Content-MD5 (the digest the state records), which
        # the store checks: a CRC32 of every body on top would be CPU for nothing.
        request_checksum_calculation="when_required",
        response_checksum_validation="when_required",
    )
    return boto3.session.Session().client("s3", config=config)


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


def _endpoint(error: BaseException) -> str:
    """The endpoint's scheme, host and port, never any user name or password in it."""
    url = str(getattr(error, "kwargs", {}).get("endpoint_url", ""))
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
    listed = [f"upload {path}" for path in todo.uploads[:EXAMPLES]]
    listed += [f"remove {path}" for path in todo.removals[: EXAMPLES - len(listed)]]
    return listed


def timed(action: Callable[[], Outcome]) -> tuple[Outcome, float]:
    started = time.perf_counter()
    outcome = action()
    return outcome, time.perf_counter() - started
