"""``--publish s3://BUCKET[/PREFIX]``: make a bucket hold exactly the built site.

This module runs a publish; ratings_api/bucket_state.py plans it and
ratings_api/s3.py makes its one client. A publish of catalogue C:

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
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, replace
from itertools import chain, islice
from typing import TYPE_CHECKING, Any, Final, TypeVar

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
from ratings_api.lock import Lock, Say, Waiting, locked, me
from ratings_api.s3 import Destination, explain, open_store, require_client

if TYPE_CHECKING:
    from obstore.store import S3Store

    from ratings_api.build import Result

T = TypeVar("T")
Progress = Callable[[str, int, int], None]  # stage, done, total

NOT_PUBLISHED: Final = frozenset({REDIRECTS})  # host rules, meaningless to S3
DEFAULT_MAX_REMOVALS: Final = 256  # as hugo deploy's --maxDeletes
DEFAULT_WORKERS: Final = 64  # uploads in flight: bench/README.md says why
ATTEMPTS: Final = 10  # plans in a row whose state write met another publish's
CHECK_LISTS: Final = 10  # the files --check names
PROGRESS_EVERY: Final = 100  # uploads between two progress reports
PAGE: Final = 1000  # objects a listing or a removal request takes at most
STOP_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM)
STALL: Final = 10  # seconds without an answer between two lines saying so
TICK: Final = 1.0  # seconds between two looks at the requests answered
LET_GO: Final = 0.1  # seconds for obstore's threads to hand back their last answers
TYPES: Final = {
    ".json": "application/json",
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".svg": "image/svg+xml",
}


@dataclass(frozen=True)
class Outcome:
    """What a publish did (or, checking, would do): its last plan, and how many it made."""

    plan: Plan
    requests: int
    plans: int = 1  # more than one: another publish wrote the state meanwhile


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
    say: Say | None = None,
    waiting: Waiting | None = Waiting(),  # noqa: B008  (frozen)
) -> Outcome:
    """Make ``destination`` hold the files of ``site``; with ``check``, only plan it.

    ``workers``: the uploads in flight at a time. ``say``: the lines while it
    waits. ``waiting``: how to take the lock; None: take none.
    """
    require_client()
    from botocore.exceptions import BotoCoreError
    from obstore.exceptions import BaseError

    endpoint = ""
    say = say or (lambda line: None)
    try:
        store, endpoint, asked = open_store(destination)
        run = Publication(store, destination, site, repair, max_removals, workers, progress)
        run.requests = asked
        lock = Lock(store, destination, endpoint, say, me())
        line = f"{destination}: waiting for {endpoint}: no request answered for {{}} s"
        watch = stalls(lambda: run.requests + lock.requests, line, say)
        outcome = run_stoppable(publishing(run, lock, waiting, check), watch)
        return replace(outcome, requests=outcome.requests + lock.requests)
    except (BotoCoreError, BaseError, FileNotFoundError) as error:
        # The libraries' own messages may quote a request or a key: ours name no secret.
        raise InputError(explain(destination, error, endpoint)) from None


async def publishing(run: Publication, lock: Lock, waiting: Waiting | None, check: bool) -> Outcome:
    """``run``, holding ``lock`` unless ``waiting`` is None; a publish that finds nothing to
    do takes none: one request."""
    if check:
        return await run.plan_only()
    if waiting is None:
        return await run.carry_out()
    if not run.repair:
        found = await run.plan_only()
        if not found.plan.changes:
            return found
    return await locked(lock, waiting, run.carry_out)


async def stalls(count: Callable[[], int], line: str, say: Say) -> None:
    """Say ``line`` each STALL s in which no request was answered (none started since)."""
    seen, since, said = count(), time.monotonic(), 0
    while True:
        await asyncio.sleep(TICK)
        now = time.monotonic()
        if count() != seen:
            seen, since, said = count(), now, 0
        elif now - since >= (said + 1) * STALL:
            said += 1
            say(line.format(said * STALL))


@dataclass(frozen=True)
class Read:
    """The state as read, with the version (ETag) a write over it is conditional on."""

    state: BucketState
    version: str | None  # None: there was no state object
    data: bytes = b""


@dataclass
class Publication:
    """One publish: the requests it makes to the store, each counted (not their retries)."""

    store: S3Store
    destination: Destination
    site: Site
    repair: bool
    max_removals: int
    workers: int
    progress: Progress | None
    requests: int = 0

    async def plan_only(self) -> Outcome:
        read = await self.read_state(repair=self.repair)
        return Outcome((await self.plan(read))[0], self.requests)

    async def plan(self, read: Read) -> tuple[Plan, BucketState]:
        """The plan from ``read``; with --repair, from a listing of the bucket instead."""
        if not self.repair:
            return plan(self.site, read.state)
        recorded = {path for path, _ in read.state.entries()}
        return plan(self.site, listed_state(self.site, await self.listing(), recorded))

    async def carry_out(self) -> Outcome:
        """Read, plan, mark, upload, remove, write; read and plan again after a conflict."""
        read = await self.read_state(repair=self.repair)
        todo, final = await self.plan(read)
        for attempt in range(1, ATTEMPTS + 1):
            if len(todo.removals) > self.max_removals:
                raise InputError(too_many_removals(self.destination, todo, self.max_removals))
            newer = await self.attempt(read, todo, final)
            if newer is None:
                return Outcome(todo, self.requests, attempt)
            read = newer  # another publish wrote the state since it was read
            todo, final = plan(self.site, read.state)
        raise InputError(
            f"{self.destination}: the state keeps changing: is another publish running?"
        )

    async def attempt(self, read: Read, todo: Plan, final: BucketState) -> Read | None:
        """Do ``todo``, planned from ``read``; None, or the state met in its place."""
        version = read.version
        if todo.changes:
            marks = await self.write_state(marked(final, todo), version)
            if isinstance(marks, Read):
                return marks
            version = marks
            await self.upload_all(todo)
            await self.remove(todo.removals)
        elif not self.repair or encode(final) == encode(replace(read.state, token="")):
            return None  # the bucket and its state are the site's already
        written = await self.write_state(final, version)
        return written if isinstance(written, Read) else None

    async def upload_all(self, todo: Plan) -> None:
        """Upload each file, ``workers`` of them taking the next from one shared iterator.

        Each body is rendered when its upload starts: memory stays the same for
        ten uploads or a million. After a failure no upload starts, and the
        ones in flight end before it is raised (see ``run_stoppable``).
        """
        uploads, total, done, failed = todo.uploads(), todo.upload_count, 0, False

        async def worker() -> None:
            nonlocal done, failed
            for path, place in uploads:  # one thread: no two workers take the same item
                if failed:
                    return
                try:
                    await self.upload(path, self.site.body(path, place))
                except BaseException:
                    failed = True
                    raise
                done += 1
                if self.progress is not None and (done % PROGRESS_EVERY == 0 or done == total):
                    self.progress("uploading", done, total)

        workers = (worker() for _ in range(min(self.workers, total)))
        for result in await asyncio.gather(*workers, return_exceptions=True):
            if isinstance(result, BaseException):
                raise result

    async def read_state(self, *, repair: bool = False) -> Read:
        """The state in the bucket; with ``repair``, one that cannot be read counts as none."""
        import obstore

        self.requests += 1
        try:
            answer = await obstore.get_async(self.store, STATE_NAME)
        except FileNotFoundError:  # no state (or no bucket: the first write will say)
            return Read(BucketState(), None)
        data, version = bytes(await answer.bytes_async()), answer.meta["e_tag"]
        try:
            return Read(decode(data), version, data)
        except InputError:
            if repair:
                return Read(BucketState(), version, data)
            raise

    async def write_state(self, state: BucketState, version: str | None) -> str | Read:
        """Write ``state`` if the stored one is still ``version`` (None: if there is none).

        The new version; or, if another publish wrote the state since, the
        state read in its place. The token of each write tells our own write,
        whose reply was lost and whose retry met its condition, from another's.
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
            return stored.version if stored.data == body and stored.version else stored
        return str(answer["e_tag"])

    async def upload(self, path: str, body: bytes) -> None:
        """Put one file, whole: its payload's SHA-256 is signed, and checked by the store."""
        import obstore

        self.requests += 1
        attributes = {"Content-Type": content_type(path), "Cache-Control": CACHE_CONTROL}
        await obstore.put_async(self.store, path, body, attributes=attributes, use_multipart=False)

    async def remove(self, paths: list[str]) -> None:
        import obstore

        if paths:
            self.requests += -(-len(paths) // PAGE)
            await obstore.delete_async(self.store, paths)

    async def listing(self) -> dict[str, str]:
        """Every object under the prefix: its path below the prefix and its ETag's MD5."""
        import obstore

        found: dict[str, str] = {}
        async for chunk in obstore.list(self.store, chunk_size=PAGE):
            found.update((item["path"], (item["e_tag"] or "").strip('"')) for item in chunk)
        self.requests += max(1, -(-len(found) // PAGE))
        return found


def run_stoppable(work: Coroutine[Any, Any, T], watch: Coroutine[Any, Any, None]) -> T:
    """Run ``work`` on an asyncio loop, ``watch`` beside it; Ctrl-C or SIGTERM cancel it at once.

    A thread would wait for its request, up to the timeout, when the store
    stalls. Once cancelled, the signal goes on to the handler that was there
    before, as if it came now.

    obstore's threads hand each answer (a cancellation too) back to Python
    holding the GIL, and the interpreter must not end before they let go of it
    (a known race of pyo3-async-runtimes: it aborts the process): hence a pause.
    """
    caught: list[int] = []
    previous = {number: signal.getsignal(number) for number in STOP_SIGNALS}

    async def main() -> T:
        task = asyncio.ensure_future(work)
        for number in STOP_SIGNALS:
            # Not in a thread other than the main one, nor on Windows.
            with contextlib.suppress(ValueError, RuntimeError, NotImplementedError):
                asyncio.get_running_loop().add_signal_handler(number, stop, task, number)
        watching = asyncio.ensure_future(watch)
        try:
            return await task
        finally:
            watching.cancel()

    def stop(task: asyncio.Future[T], number: int) -> None:
        caught.append(number)
        task.cancel()

    try:
        return asyncio.run(main())
    finally:
        for number, handler in previous.items():
            if handler is not None:
                signal.signal(number, handler)  # asyncio puts back the default, not this
        time.sleep(LET_GO)
        for stopped in caught[:1]:
            signal.raise_signal(stopped)  # to the handler that was there before, as if now


def too_many_removals(destination: Destination, todo: Plan, max_removals: int) -> str:
    count = len(todo.removals)
    return (
        f"{destination}: this publish would remove {count:,} files, more than "
        f"--max-removals {max_removals}; nothing was changed. If that is meant, "
        f"run again with --max-removals {count}"
    )


def summary(destination: Destination, outcome: Outcome, seconds: float, check: bool) -> str:
    """The summary line of a publish."""
    todo, requests = outcome.plan, outcome.requests
    verbs = ("to upload", "to remove") if check else ("uploaded", "removed")
    again = "; planned {} times, as another publish wrote the state meanwhile"
    return (
        f"{'checked' if check else 'published'} {destination}: {todo.upload_count:,} {verbs[0]}, "
        f"{len(todo.removals):,} {verbs[1]}, {todo.unchanged:,} unchanged; "
        f"{requests:,} request{'' if requests == 1 else 's'} in {seconds:.2f} s"
        + (again.format(outcome.plans) if outcome.plans > 1 else "")
    )


def first_changes(todo: Plan) -> list[str]:
    """The first files --check would upload or remove, in the plan's order."""
    uploads = (f"upload {path}" for path, _ in todo.uploads())
    removals = (f"remove {path}" for path in todo.removals)
    return list(islice(chain(uploads, removals), CHECK_LISTS))
