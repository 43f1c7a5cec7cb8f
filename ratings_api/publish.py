"""``--publish s3://BUCKET[/PREFIX]``: make a bucket hold exactly the built site.

This module talks to the store, through one client (obstore) configured as
every AWS tool is; ratings_api/bucket_state.py plans. A publish of catalogue C:

1. reads the state S and its version V (its ETag; none if there is no state);
2. plans the uploads and removals that make a bucket recorded as S hold C's
   site, and F, the state that records C's site;
3. writes M, F with every file the plan touches marked unknown, *if the state
   is still V* (it becomes V1); uploads, a bounded window at a time; removes;
4. writes F *if the state is still V1*.

A write that meets another version reads it and plans again. So the versions
form one chain, and *a file the state records as known holds what it says*: M
only turns known files into unknown ones, and F is written over this publish's
own marks. A publish stopped anywhere leaves S or M, whose marked files the
next one uploads. A reply lost after the store wrote is told by the state's
token, read back.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import urllib.error
import urllib.request
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, replace
from datetime import timedelta
from itertools import chain, islice
from typing import TYPE_CHECKING, Any, Final, TypeVar
from urllib.parse import urlsplit

from ratings_api.bucket_state import (
    CACHE_CONTROL,
    STATE_NAME,
    BucketState,
    Plan,
    Site,
    decode,
    encode,
    listed_state,
    marked,
    plan,
)
from ratings_api.errors import InputError
from ratings_api.hosting import NOT_FOUND_PAGE, REDIRECTS

if TYPE_CHECKING:
    from obstore.store import RetryConfig, S3Store

    from ratings_api.build import Result

T = TypeVar("T")
Progress = Callable[[str, int, int], None]  # stage, done, total

REQUIREMENTS: Final = "requirements-publish.txt"
NOT_PUBLISHED: Final = frozenset({REDIRECTS})  # host rules, meaningless to S3
DEFAULT_MAX_REMOVALS: Final = 256  # as hugo deploy's --maxDeletes
DEFAULT_WORKERS: Final = 64  # uploads in flight: bench/README.md says why
ATTEMPTS: Final = 10  # plans in a row whose state write met another publish's
CHECK_LISTS: Final = 10  # the files --check names
PROGRESS_EVERY: Final = 100  # uploads between two progress reports
LIST_PAGE: Final = 1000  # objects a listing request returns at most
STOP_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM)
DEFAULT_REGION: Final = "us-east-1"  # S3's, where neither the user nor the bucket says
# The one retry policy of every request: transient failures (5xx, a connection
# refused or dropped) are retried for about a second and a half, then reported.
RETRY: Final[RetryConfig] = {
    "max_retries": 4,
    "retry_timeout": timedelta(seconds=60),
    "backoff": {"init_backoff": timedelta(milliseconds=100), "max_backoff": timedelta(seconds=5)},
}
TYPES: Final = {
    ".json": "application/json",
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
}
NOT_A_URL: Final = (
    "the endpoint (AWS_ENDPOINT_URL, or endpoint_url in the AWS config) is not a URL such as "
    "https://HOST[:PORT]"
)
NO_CREDENTIALS: Final = (
    "no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE"
)
ACCESS_DENIED: Final = (
    "access denied (403): check the credentials "
    "(AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_PROFILE) and their permissions"
)
SIGN_IN: Final = (
    "the profile's sign-in has expired or was never made: run aws sso login, then publish again"
)
# What the configuration chain (botocore) or the store (obstore, after its retries)
# refused, by the class of its error or of one the class derives from.
REASONS: Final = {
    "ProfileNotFound": "AWS_PROFILE: no profile '{profile}' in the AWS config or credentials files",
    "SSOError": SIGN_IN,
    "TokenRetrievalError": SIGN_IN,
    "CredentialRetrievalError": "the profile's credential_process failed: run it by hand to see why",
    "PermissionDeniedError": ACCESS_DENIED,
    "UnauthenticatedError": ACCESS_DENIED,
    "FileNotFoundError": "no such bucket",  # obstore's for a 404, the bucket's here
    "GenericError": "cannot reach {endpoint} (AWS_ENDPOINT_URL)",  # after the retries
}


@dataclass(frozen=True)
class Destination:
    """Where to publish: a bucket and a key prefix ("" or without slashes at its ends)."""

    bucket: str
    prefix: str

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.prefix}".rstrip("/")


@dataclass(frozen=True)
class Outcome:
    """What a publish did (or, checking, would do): its last plan, and how many it made."""

    plan: Plan
    requests: int
    plans: int = 1  # more than one: another publish wrote the state meanwhile


@dataclass(frozen=True)
class Options:
    check: bool
    repair: bool
    max_removals: int
    workers: int
    progress: Progress | None


def parse_destination(text: str) -> Destination:
    """``s3://BUCKET[/PREFIX]`` as a Destination, or an InputError saying what is wrong."""
    parts = urlsplit(text)
    if parts.scheme != "s3" or not parts.netloc or parts.query or parts.fragment:
        raise InputError(f"--publish: expected s3://BUCKET[/PREFIX], found '{text}'")
    prefix = parts.path.strip("/")
    if "//" in prefix or any(part in (".", "..") for part in prefix.split("/")):
        raise InputError(f"--publish: the prefix must not have empty, . or .. parts: '{text}'")
    return Destination(parts.netloc, prefix)


def site_of(result: Result) -> Site:
    """The files the build of ``result`` writes that a bucket serves."""
    assert result.catalogue is not None and result.render is not None
    others = {path: body for path, body in result.extras.items() if path not in NOT_PUBLISHED}
    return Site(result.catalogue, result.render, others)


def content_type(path: str) -> str:
    """The Content-Type the API's server sends; 404.html holds the JSON error body."""
    if path == NOT_FOUND_PAGE:
        return "application/json"
    return TYPES.get(os.path.splitext(path)[1], "application/octet-stream")


def publish(
    site: Site,
    destination: Destination,
    *,
    check: bool = False,
    repair: bool = False,
    max_removals: int = DEFAULT_MAX_REMOVALS,
    workers: int = DEFAULT_WORKERS,
    progress: Progress | None = None,
) -> Outcome:
    """Make ``destination`` hold the files of ``site``; with ``check``, only plan it.

    ``workers``: the uploads in flight at a time.
    """
    require_client()
    from botocore.exceptions import BotoCoreError
    from obstore.exceptions import BaseError

    options = Options(check, repair, max_removals, workers, progress)
    endpoint = ""
    try:
        store, endpoint, asked = open_store(destination)
        bucket = Bucket(store, destination, requests=asked)
        return run_stoppable(_publish(bucket, site, options))
    except (BotoCoreError, BaseError, FileNotFoundError) as error:
        # The libraries' own messages may quote a request or a key: ours name no secret.
        raise InputError(explain(destination, error, endpoint)) from None


async def _publish(bucket: Bucket, site: Site, options: Options) -> Outcome:
    """Read, plan, mark, upload, remove, write; read and plan again after a conflict."""
    read = await bucket.read_state(repair=options.repair)
    published = read.state
    if options.repair:
        recorded = {path for path, _ in read.state.entries()}
        published = listed_state(site, await bucket.listing(), recorded)
    todo, final = plan(site, published)
    if options.check:
        return Outcome(todo, bucket.requests)
    for attempt in range(1, ATTEMPTS + 1):
        if len(todo.removals) > options.max_removals:
            raise InputError(too_many_removals(bucket.destination, todo, options.max_removals))
        newer = await _carry_out(bucket, site, read, todo, final, options)
        if newer is None:
            return Outcome(todo, bucket.requests, attempt)
        read = newer  # another publish wrote the state since it was read: plan again
        todo, final = plan(site, read.state)
    raise InputError(f"{bucket.destination}: the state keeps changing: is another publish running?")


async def _carry_out(
    bucket: Bucket, site: Site, read: Read, todo: Plan, final: BucketState, options: Options
) -> Read | None:
    """Do ``todo``, planned from ``read``; None, or the state met in its place."""
    version = read.version
    if todo.changes:
        written = await bucket.write_state(marked(final, todo), version)
        if isinstance(written, Read):
            return written
        await _upload(bucket, site, todo, options.workers, options.progress)
        await bucket.remove(todo.removals)
        if options.progress is not None and todo.removals:
            options.progress("removing", len(todo.removals), len(todo.removals))
        version = written
    elif not options.repair or encode(final) == encode(replace(read.state, token="")):
        return None  # the bucket and its state are the site's already
    written = await bucket.write_state(final, version)
    return written if isinstance(written, Read) else None


def too_many_removals(destination: Destination, todo: Plan, max_removals: int) -> str:
    count = len(todo.removals)
    return (
        f"{destination}: this publish would remove {count:,} files, more than "
        f"--max-removals {max_removals}; nothing was changed. If that is meant, "
        f"run again with --max-removals {count}"
    )


async def _upload(
    bucket: Bucket, site: Site, todo: Plan, window: int, progress: Progress | None
) -> None:
    """Upload each file, ``window`` workers taking the next from one shared iterator.

    Each body is rendered when its upload starts: memory stays the same for
    ten uploads or a million.
    """
    uploads, total, done = todo.uploads(), todo.upload_count, 0

    async def worker() -> None:
        nonlocal done
        for path, place in uploads:  # one thread: no two workers take the same item
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
        await asyncio.gather(*workers, return_exceptions=True)  # none left to print at exit


def run_stoppable(work: Coroutine[Any, Any, T]) -> T:
    """Run ``work`` on an asyncio loop; Ctrl-C or SIGTERM cancel it at once.

    A thread would wait for its request, up to the timeout, when the store
    stalls. Once cancelled, the signal goes to the handler that was there
    before, as if it came now.
    """
    caught: list[int] = []
    previous = {number: signal.getsignal(number) for number in STOP_SIGNALS}

    async def main() -> T:
        task = asyncio.ensure_future(work)

        def stop(number: int) -> None:
            caught.append(number)
            task.cancel()

        for number in STOP_SIGNALS:
            if previous[number] is not signal.SIG_IGN:
                # Not in a thread other than the main one, nor on Windows.
                with contextlib.suppress(ValueError, RuntimeError, NotImplementedError):
                    asyncio.get_running_loop().add_signal_handler(number, stop, number)
        return await task

    try:
        return asyncio.run(main())
    except asyncio.CancelledError:
        if not caught:
            raise
    finally:
        for number, handler in previous.items():
            if handler is not None:
                signal.signal(number, handler)  # asyncio puts back the default, not this
    signal.raise_signal(caught[0])  # now to the handler that was there before
    raise asyncio.CancelledError  # a handler that let it pass: the work is cancelled still


# The store


@dataclass(frozen=True)
class Read:
    """The state as read, with the version (ETag) a write over it is conditional on."""

    state: BucketState
    version: str | None  # None: there was no state object
    data: bytes = b""


class Bucket:
    """The requests a publish makes to the store, each counted (retries not)."""

    def __init__(self, store: S3Store, destination: Destination, requests: int = 0) -> None:
        self.store = store
        self.destination = destination
        self.requests = requests

    async def read_state(self, *, repair: bool = False) -> Read:
        """The state in the bucket; with ``repair``, one that cannot be read counts as none."""
        import obstore

        self.requests += 1
        try:
            answer = await obstore.get_async(self.store, STATE_NAME)
        except FileNotFoundError:  # no state (a GET tells no missing bucket from it)
            return Read(BucketState(), None)
        data = bytes(await answer.bytes_async())
        try:
            return Read(decode(data), answer.meta["e_tag"], data)
        except InputError:
            if repair:
                return Read(BucketState(), answer.meta["e_tag"], data)
            raise

    async def write_state(self, state: BucketState, version: str | None) -> str | Read:
        """Write ``state`` if the stored one is still ``version`` (None: if there is none).

        The new version; or the state read in its place when another publish
        wrote one since. The token of each write tells our own write, whose
        reply was lost and whose retry met its own condition, from another's.
        """
        import obstore
        from obstore.exceptions import AlreadyExistsError, PreconditionError

        body = encode(replace(state, token=secrets.token_hex(16)))
        self.requests += 1
        try:
            answer = await obstore.put_async(
                self.store,
                STATE_NAME,
                body,
                attributes={"Content-Type": "application/gzip", "Cache-Control": "no-store"},
                mode={"e_tag": version} if version is not None else "create",
                use_multipart=False,
            )
        except (AlreadyExistsError, PreconditionError):
            stored = await self.read_state(repair=True)
            if stored.data == body and stored.version is not None:
                return stored.version
            return stored
        assert answer["e_tag"] is not None
        return answer["e_tag"]

    async def upload(self, path: str, body: bytes) -> None:
        """Put one file, whole: its payload's SHA-256 is signed, and checked by the store."""
        import obstore

        self.requests += 1
        attributes = {"Content-Type": content_type(path), "Cache-Control": CACHE_CONTROL}
        await obstore.put_async(self.store, path, body, attributes=attributes, use_multipart=False)

    async def remove(self, paths: list[str]) -> None:
        """Delete the objects at ``paths`` (DeleteObjects, 1,000 a request)."""
        import obstore

        if paths:
            self.requests += -(-len(paths) // LIST_PAGE)
            await obstore.delete_async(self.store, paths)

    async def listing(self) -> dict[str, str]:
        """Every object under the prefix: its path below the prefix and its ETag's MD5."""
        import obstore

        found = {}
        async for chunk in obstore.list(self.store, chunk_size=LIST_PAGE):
            for item in chunk:
                found[item["path"]] = (item["e_tag"] or "").strip('"')
        self.requests += max(1, -(-len(found) // LIST_PAGE))
        return found


def require_client() -> None:
    """An InputError naming the requirements file if boto3 or obstore is not installed."""
    try:
        import boto3  # noqa: F401
        import obstore  # noqa: F401
    except ImportError:
        raise InputError(
            f"--publish needs boto3 and obstore: pip install -r {REQUIREMENTS}"
        ) from None


def open_store(destination: Destination) -> tuple[S3Store, str, int]:
    """The client of ``destination``; its endpoint, for messages; the requests it took.

    botocore reads the configuration as every AWS tool does (variables, config
    and credentials files, profiles, SSO, credential_process); obstore's
    Boto3CredentialProvider hands the credentials on, renewed when they expire.
    """
    from botocore.session import Session
    from obstore.auth.boto3 import Boto3CredentialProvider
    from obstore.store import S3Store

    session = Session()
    endpoint = os.environ.get("AWS_ENDPOINT_URL") or session.get_scoped_config().get("endpoint_url")
    url = urlsplit(endpoint or "")
    if endpoint and (url.scheme not in ("http", "https") or not url.hostname):
        raise InputError(f"{destination}: {NOT_A_URL}")  # not quoted: a key may be written in it
    credentials = session.get_credentials()
    if credentials is None:
        raise InputError(f"{destination}: {NO_CREDENTIALS}")
    credentials.get_frozen_credentials()  # a sign-in or a credential_process fails here, once
    region = os.environ.get("AWS_REGION") or session.get_config_variable("region")
    store = S3Store(
        destination.bucket,
        prefix=destination.prefix or None,
        config={
            "region": region or bucket_region(destination.bucket, endpoint),
            **({"endpoint": endpoint} if endpoint else {}),
        },
        credential_provider=Boto3CredentialProvider(session),
        client_options={
            "allow_http": url.scheme == "http",
            "connect_timeout": timedelta(seconds=5),
            "timeout": timedelta(seconds=30),
        },
        retry_config=RETRY,
    )
    found = endpoint or f"https://s3.{store.config['region']}.amazonaws.com"
    return store, found, 0 if region else 1


def bucket_region(bucket: str, endpoint: str | None) -> str:
    """The region S3 names in ``x-amz-bucket-region`` to any request for the bucket.

    obstore signs for the region it is given and follows no redirect to the
    bucket's; an unsigned HEAD of the bucket is how object_store resolves it.
    """
    url = f"{endpoint or 'https://s3.amazonaws.com'}/{bucket}"
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=5) as got:
            named = got.headers.get("x-amz-bucket-region")
    except urllib.error.HTTPError as refused:  # a redirect or a refusal names it too
        named = refused.headers.get("x-amz-bucket-region")
        refused.close()
    except OSError:
        named = None  # out of reach: the first request says so
    return str(named or DEFAULT_REGION)


def explain(destination: Destination, error: Exception, endpoint: str) -> str:
    """One line about what the configuration chain or the store (after its retries) refused."""
    for kind in type(error).__mro__:
        if kind.__name__ in REASONS:
            profile = getattr(error, "kwargs", {}).get("profile", "")
            reason = REASONS[kind.__name__].format(profile=profile, endpoint=_safe_url(endpoint))
            return f"{destination}: {reason}"
    return f"{destination}: a request failed: {type(error).__name__}"


def _safe_url(url: str) -> str:
    """The endpoint's scheme, host and port, never a user name or password in it."""
    parts = urlsplit(url)
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{parts.hostname}{port}" if parts.hostname else "the endpoint"


def summary(destination: Destination, outcome: Outcome, seconds: float, check: bool) -> str:
    """The summary line of a publish."""
    todo, requests = outcome.plan, outcome.requests
    verb = ("to upload", "to remove") if check else ("uploaded", "removed")
    again = (
        f"; planned {outcome.plans} times, as another publish wrote the state meanwhile"
        if outcome.plans > 1
        else ""
    )
    return (
        f"{'checked' if check else 'published'} {destination}: {todo.upload_count:,} {verb[0]}, "
        f"{len(todo.removals):,} {verb[1]}, {todo.unchanged:,} unchanged; "
        f"{requests:,} request{'' if requests == 1 else 's'} in {seconds:.2f} s{again}"
    )


def listed_changes(todo: Plan) -> str:
    """The first files --check would upload or remove, one an indented line, and how many more."""
    uploads = (f"upload {path}" for path, _ in todo.uploads())
    removals = (f"remove {path}" for path in todo.removals)
    listed = list(islice(chain(uploads, removals), CHECK_LISTS))
    more = todo.changes - len(listed)
    return "".join(f"\n  {line}" for line in listed) + (f"\n  and {more} more" if more > 0 else "")
