"""``--publish s3://BUCKET[/PREFIX]``: make a bucket hold exactly the built site.

ratings_api/bucket_state.py plans a publish, ratings_api/s3.py makes its client.
It reads the state, writes it with every file the plan touches marked unknown
(M) *if still the version read*, uploads, removes, and writes the final state *if
still M*: the versions form one chain, and *a file the state records as known
holds what it says*. A write that meets another's version reads and plans again;
a publish that stops after uploading writes the newest state again with what it
touched unknown, as that may have landed after the other's. What the chain
cannot rule out, a publish's upload or removal landing after another's final
state, the lock rules out (ratings_api/lock.py): its holder writes only inside
its lease, and another takes the lock only after it. Every request goes through
one ``Store`` (ratings_api/store.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from itertools import chain, islice
from typing import TYPE_CHECKING, Final, NamedTuple, TypeVar

from ratings_api import bucket_state
from ratings_api.bucket_state import BucketState, Plan, Site
from ratings_api.contract import CACHE_CONTROL, CONTENT_TYPES, ERROR_TYPE
from ratings_api.errors import InputError
from ratings_api.hosting import NOT_FOUND_PAGE, REDIRECTS
from ratings_api.lock import DEFAULT_TIMEOUT, Fenced, Lock, Say, locked
from ratings_api.running import run_stoppable, stalls
from ratings_api.s3 import Destination, explain, open_store
from ratings_api.store import Refused, Store

if TYPE_CHECKING:
    from obstore import PutMode

    from ratings_api.build import Result

T = TypeVar("T")
Progress = Callable[[str, int, int], None]  # stage, done, total

DEFAULT_MAX_REMOVALS: Final = 256  # as hugo deploy's --maxDeletes
DEFAULT_WORKERS: Final = 64  # uploads in flight: bench/README.md says why
ATTEMPTS: Final = 10  # plans in a row whose state write met another publish's
CHECK_LISTS: Final = 10  # the files --check names
PROGRESS_EVERY: Final = 100  # uploads between two progress reports
STATE_ATTRIBUTES: Final = {"Content-Type": "application/gzip", "Cache-Control": "no-store"}


class Outcome(NamedTuple):
    """What a publish did (or, checking, would do): its last plan, and all its plans made."""

    plan: Plan
    plans: int = 1  # more than one: another publish wrote the state meanwhile
    uploaded: int = 0
    removed: int = 0
    requests: int = 0  # of the whole publish, counted by its store


def site_of(result: Result) -> Site:
    """The files the build of ``result`` writes that a bucket serves."""
    assert result.catalogue is not None and result.render is not None
    # _redirects: the static hosts' rules, meaningless to S3.
    others = {path: body for path, body in result.extras.items() if path != REDIRECTS}
    return Site(result.catalogue, result.render, others)


def content_type(path: str) -> str:
    """The Content-Type the API's server sends; 404.html holds the JSON error body."""
    if path == NOT_FOUND_PAGE:
        return ERROR_TYPE
    return CONTENT_TYPES.get(os.path.splitext(path)[1], "application/octet-stream")


def attributes(path: str) -> dict[str, str]:
    """The headers a publish sets on the object ``path``."""
    return {"Content-Type": content_type(path), "Cache-Control": CACHE_CONTROL}


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
    lock_timeout: float | None = DEFAULT_TIMEOUT,
) -> Outcome:
    """Make ``destination`` hold the files of ``site``; with ``check``, only plan it. Its
    libraries are there: the command checked them (s3.require_client) before the build.

    ``workers``: the uploads in flight at a time. ``say``: the lines while it
    waits. ``lock_timeout``: the seconds to wait for another publish's lock; None: take none.
    """
    from botocore.exceptions import BotoCoreError
    from obstore.exceptions import BaseError

    endpoint = ""
    say = say or (lambda line: None)
    try:
        store, endpoint = open_store(destination)
        run = Publication(store, destination, site, repair, max_removals, workers, progress)
        lock = Lock(store, destination, endpoint, say)
        line = f"{destination}: waiting for {endpoint}: no request answered for {{}} s"
        watch = stalls(lambda: store.requests, line, say)
        outcome = run_stoppable(publishing(run, lock, lock_timeout, check), watch)
        return outcome._replace(requests=store.requests)
    except (BotoCoreError, BaseError, FileNotFoundError) as error:
        # The libraries' own messages may quote a request or a key: ours name no secret.
        raise InputError(explain(destination, error, endpoint)) from None


async def publishing(run: Publication, lock: Lock, timeout: float | None, check: bool) -> Outcome:
    """``run``, holding ``lock`` unless ``timeout`` is None; a publish that finds nothing to
    do takes none: one request. The state read first is read again, inside the lock,
    only if it changed (If-None-Match)."""
    read = await run.read_state(repair=run.repair)
    if check or not run.repair:
        found = await run.plan_only(read)
        if check or not found.plan.changes:
            return found
    if timeout is None:
        return await run.carry_out(read)
    run.store = Fenced(run.store, lock)
    return await locked(lock, timeout, lambda: run.carry_out(read, again=True))


class Read(NamedTuple):
    """The state as read, with the version (ETag) a write over it is conditional on."""

    state: BucketState
    version: str | None  # None: there was no state object
    data: bytes = b""


@dataclass
class Publication:
    """One publish: the requests it makes through ``store``."""

    store: Store
    destination: Destination
    site: Site
    repair: bool
    max_removals: int
    workers: int
    progress: Progress | None
    touched: list[Plan] = field(default_factory=list)  # the plans whose changes began
    marks: str | None = None  # the version of its last marks

    async def plan_only(self, read: Read | None = None) -> Outcome:
        todo = (await self.plan(read or await self.read_state(repair=self.repair)))[0]
        return Outcome(todo, 1, todo.upload_count, len(todo.removals))

    async def plan(self, read: Read) -> tuple[Plan, BucketState]:
        """The plan from ``read``; with --repair, from a listing and each file's headers."""
        if not self.repair:
            return bucket_state.plan(self.site, read.state)
        recorded = {path for path, _ in read.state.entries()}
        listed = await self.store.listing()

        async def check(path: str) -> None:
            """Record as not known a file whose headers are not those a publish sets."""
            headers = await self.store.head(path) or {}  # none: removed since the listing
            if not attributes(path).items() <= headers.items():
                listed[path] = bucket_state.UNKNOWN

        ours = {path for path, _ in self.site.documents()}.union(self.site.others) & listed.keys()
        await self.each("checking headers", ours, len(ours), check)
        return bucket_state.plan(self.site, bucket_state.listed_state(self.site, listed, recorded))

    async def carry_out(self, read: Read | None = None, *, again: bool = False) -> Outcome:
        """Read, plan, mark, upload, remove, write; read and plan again after a conflict.

        ``read``: the state read already; ``again``: read it again if it changed since.
        """
        from obstore.exceptions import BaseError

        if read is None or again:
            read = await self.read_state(repair=self.repair, known=read)
        for attempt in range(1, ATTEMPTS + 1):
            todo, final = await self.plan(read)
            count = len(todo.removals)
            if count > self.max_removals:
                after = ", after another publish; uploads were made"
                done = after if self.touched else "; nothing was changed"
                await self.withdraw(read)
                raise InputError(
                    f"{self.destination}: this publish would remove {count:,} files, more than "
                    f"--max-removals {self.max_removals}{done}. "
                    f"If that is meant, run again with --max-removals {count}"
                )
            try:
                newer = await self.attempt(read, todo, final)
            except BaseError:
                if self.touched:
                    with contextlib.suppress(BaseError):
                        await self.withdraw(await self.read_state(repair=True))
                raise
            if newer is None:
                uploaded = sum(done.upload_count for done in self.touched)
                removed = sum(len(done.removals) for done in self.touched)
                return Outcome(todo, attempt, uploaded, removed)
            read = newer  # another publish wrote the state since it was read
        await self.withdraw(read)
        raise InputError(
            f"{self.destination}: the state keeps changing: is another publish running?"
        )

    async def withdraw(self, read: Read) -> None:
        """Write ``read`` again with the files it touched unknown, unless it is its own marks."""
        paths = {path for todo in self.touched for path, _ in todo.uploads()}
        paths.update(*(todo.removals for todo in self.touched))
        for _ in range(ATTEMPTS if paths else 0):
            if read.version == self.marks:
                return
            written = await self.write_state(bucket_state.unknown(read.state, paths), read.version)
            if not isinstance(written, Read):
                return
            read = written

    async def attempt(self, read: Read, todo: Plan, final: BucketState) -> Read | None:
        """Do ``todo``, planned from ``read``; None, or the state met in its place."""
        version = read.version
        if todo.changes:
            marks = await self.write_state(bucket_state.marked(final, todo), version)
            if isinstance(marks, Read):
                return marks
            version = self.marks = marks
            self.touched.append(todo)
            await self.each("uploading", todo.uploads(), todo.upload_count, self.upload)
            if todo.removals:
                await self.store.delete(todo.removals)
        elif not self.repair or bucket_state.encode(final) == bucket_state.encode(read.state):
            return None  # the bucket and its state are the site's already
        written = await self.write_state(final, version)
        return written if isinstance(written, Read) else None

    async def each(
        self, stage: str, items: Iterable[T], total: int, act: Callable[[T], Awaitable[None]]
    ) -> None:
        """``act`` on each item, ``workers`` at a time; after a failure, none starts."""
        done, pending = 0, (item for item in items)

        async def worker() -> None:
            nonlocal done
            for item in pending:  # one thread: no two workers take the same item
                try:
                    await act(item)
                except BaseException:
                    pending.close()  # the others' loops end
                    raise
                done += 1
                if self.progress is not None and (done % PROGRESS_EVERY == 0 or done == total):
                    self.progress(stage, done, total)

        workers = (worker() for _ in range(min(self.workers, total)))  # none idle
        for result in await asyncio.gather(*workers, return_exceptions=True):
            if isinstance(result, BaseException):
                raise result

    async def read_state(self, *, repair: bool = False, known: Read | None = None) -> Read:
        """The state in the bucket; with ``repair``, one that cannot be read counts as none.

        ``known``: a read of it, returned if the state is still its version.
        """
        unless = known.version if known is not None else None
        answer = await self.store.get(bucket_state.STATE_NAME, unless=unless)
        if answer is None:
            if known is None and not await self.store.bucket_exists():  # once, on this path only
                raise FileNotFoundError(bucket_state.STATE_NAME)  # s3.explain: "no such bucket"
            return Read(BucketState(), None)
        if known is not None and answer.version == known.version:
            return known  # not modified
        try:
            return Read(bucket_state.decode(answer.data), answer.version, answer.data)
        except InputError as error:
            if repair:
                return Read(BucketState(), answer.version, answer.data)
            raise InputError(f"{self.destination}: {error}") from None

    async def write_state(self, state: BucketState, version: str | None) -> str | Read:
        """Write ``state`` if the stored one is still ``version`` (None: if there is none).

        The new version; or, if another publish wrote the state since, the
        state read in its place. The token of each write tells our own write,
        whose reply was lost and whose retry met its condition, from another's.
        """
        body = bucket_state.encode(state, secrets.token_hex(16))
        try:
            mode: PutMode = {"e_tag": version} if version else "create"
            return await self.store.put(bucket_state.STATE_NAME, body, STATE_ATTRIBUTES, mode=mode)
        except Refused:
            stored = await self.read_state(repair=True)
            return stored.version if stored.data == body and stored.version else stored

    async def upload(self, item: tuple[str, int]) -> None:
        """Put one file, whole, its body rendered now (memory stays flat for a million).

        Its payload's SHA-256 is signed, and checked by the store.
        """
        path, place = item
        await self.store.put(path, self.site.body(path, place), attributes(path))


def summary(destination: Destination, outcome: Outcome, seconds: float, check: bool) -> str:
    """The summary line of a publish: what all its plans did, and what the last left alone."""
    verbs = ("to upload", "to remove") if check else ("uploaded", "removed")
    again = "; planned {} times, as another publish wrote the state meanwhile"
    return (
        f"{'checked' if check else 'published'} {destination}: {outcome.uploaded:,} {verbs[0]}, "
        f"{outcome.removed:,} {verbs[1]}, {outcome.plan.unchanged:,} unchanged; "
        f"{outcome.requests:,} request{'' if outcome.requests == 1 else 's'} in {seconds:.2f} s"
        + (again.format(outcome.plans) if outcome.plans > 1 else "")
    )


def first_changes(todo: Plan) -> list[str]:
    """The first files --check would upload or remove, in the plan's order."""
    uploads = (f"upload {path}" for path, _ in todo.uploads())
    removals = (f"remove {path}" for path in todo.removals)
    return list(islice(chain(uploads, removals), CHECK_LISTS))
