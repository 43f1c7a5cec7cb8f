"""The lock a publish holds in the bucket: a lease that fences, one publish per target.

``PREFIX/.ratings-api/lock`` holds a JSON body: its ``format``, the holder's
random ``token``, who it is and its lease. It is taken by a create (If-None-Match:
*), or by a write conditional on the ETag of a stale or released body; renewed
each RENEW s by a write conditional on our own ETag; released by writing a
"released" body conditional on it, which the next publish takes over (the
library's delete takes no condition, so a delete could remove another's lock).
A refused write (412, 409 or 404: stores differ) is decided by reading the lock
back: our token (our write landed and its lost reply was retried), another's, or
none. No two machines' clocks are compared, and each process counts on a clock
that keeps counting through a suspend:

- A waiter calls a lock stale only when it has seen the same body and ETag for
  more than the lease on its own clock. It first saw them after the store
  applied them, so after the holder sent that renewal: the takeover comes more
  than LEASE after the renewal was sent.
- The holder sends no write (upload, removal, state) unless its last renewal,
  counted from when it was sent, is younger than SAFE; it looks before each
  request. A request takes at most REQUEST_MAX, the library's retries included
  (s3.py bounds them), so every write lands or fails within SAFE + REQUEST_MAX
  of that renewal, before LEASE: before any takeover. A paused holder that
  resumes stops; it does not write.

Left open: a request the store applies later than the client gave up on it
(docs/deploy-object-storage.md). Taking the lock, a publish checks that the
store refuses a second create and a wrong If-Match.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import socket
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final, NamedTuple, TypeVar

from ratings_api.errors import InputError
from ratings_api.s3 import REQUEST_MAX, Destination
from ratings_api.store import Got, Refused, Store

if TYPE_CHECKING:
    from obstore import PutMode

T = TypeVar("T")
Say = Callable[[str], None]

LOCK_NAME: Final = ".ratings-api/lock"
FORMAT: Final = 1  # of the lock's body
LEASE: Final = 60.0  # seconds a lock lives unless its holder renews it
RENEW: Final = 10.0  # seconds between two renewals
SAFE: Final = 30.0  # seconds after a renewal was sent in which its holder may still write
assert SAFE + REQUEST_MAX < LEASE and RENEW < SAFE  # the argument above
MAX_LEASE: Final = 600.0  # the longest lease of a body of another format that is waited out
DEFAULT_TIMEOUT: Final = 600  # seconds a publish waits for another's lock
POLL: Final = 0.5  # seconds between two looks at a held lock
SAY_EVERY: Final = 10  # seconds between two lines while waiting
RELEASE_WAIT: Final = 0.5  # seconds a stopped publish gives its release
NO_SUCH_TAG: Final = '"00000000000000000000000000000000"'  # an ETag no object has
ATTRIBUTES: Final = {"Content-Type": "application/json", "Cache-Control": "no-store"}
UNKNOWN_HOLDER: Final = "an unknown holder, since an unknown time"


def clock() -> float:
    """Seconds on a clock that counts through a suspend (Linux), else the monotonic one."""
    boottime = getattr(time, "CLOCK_BOOTTIME", None)
    return time.clock_gettime(boottime) if boottime is not None else time.monotonic()


class Body(NamedTuple):
    """A lock's body as read: its token, its lease, whether released, and who it names."""

    token: str
    lease: float
    released: bool
    holder: str


def me() -> dict[str, Any]:
    """The body of a new lock of this process, unrenewed."""
    user = os.environ.get("USER") or os.environ.get("USERNAME") or "someone"  # or Windows'
    since = datetime.now(UTC).strftime("%d %b %Y %H:%M:%S UTC")  # for people only
    who = f"{user}@{socket.gethostname()} (process {os.getpid()})"
    token = secrets.token_hex(16)
    return {"format": FORMAT, "token": token, "who": who, "since": since, "lease": LEASE}


def read_body(data: bytes) -> Body:
    """What a lock's body says. One of another format: the lease it states, at most
    MAX_LEASE; one that cannot be read: LEASE, held by an unknown holder."""
    try:
        body = json.loads(data)
        holder = f"{body['who']}, since {body['since']}"
        lease = float(body.get("lease", LEASE))
        if not 0 <= lease <= MAX_LEASE:  # NaN included
            raise ValueError(lease)
        if body.get("format") == FORMAT:
            return Body(str(body["token"]), LEASE, bool(body.get("released")), holder)
        return Body("", lease, False, holder)
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError):
        return Body("", LEASE, False, UNKNOWN_HOLDER)


@dataclass
class Lock:
    """The lock of one publish: taken, checked, renewed while held, then released."""

    store: Store
    destination: Destination
    endpoint: str
    say: Say
    body: dict[str, Any] = field(default_factory=me)
    clock: Callable[[], float] = clock
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep
    version: str = ""  # our lock's ETag, once taken
    data: bytes = b""  # its body, as last written
    renewed: float = -float("inf")  # when the last renewal that landed was sent

    async def take(self, timeout: float) -> None:
        """Take the lock: at once if free, released or stale, else wait for it up to ``timeout`` s."""
        started = self.clock()
        said, seen, since = -float(SAY_EVERY), Got(b"", ""), started
        while True:
            got = await self._write("create")
            if got is None:
                return
            if not got.version:
                continue  # released and removed meanwhile
            if got != seen:
                seen, since = got, self.clock()  # a new body or ETag: its lease starts now
            other = read_body(got.data)
            if other.released or self.clock() - since > other.lease:
                if await self._write({"e_tag": got.version}) is None:
                    if not other.released:
                        self.say(f"{self.destination}: took over the lock of {other.holder}")
                    return
                continue
            waited = self.clock() - started
            if waited >= timeout:
                raise InputError(
                    f"{self.destination}: another publish holds the lock ({other.holder}); "
                    f"waited {timeout:g} s (--lock-timeout); nothing was changed"
                )
            if waited - said >= SAY_EVERY:
                said = waited
                self.say(
                    f"{self.destination}: waiting for the lock held by {other.holder} "
                    f"({waited:.0f} of {timeout:g} s)"
                )
            await self.sleep(POLL)

    async def _write(self, mode: PutMode) -> Got | None:
        """Write our body as asked: None once it is ours (landed, or its lost reply
        retried); else the lock as read back (another's, or none: ``Got(b"", "")``).

        Refused, the lock read back is ours if it holds our token, which no other body
        has: the very bytes sent (the reply was lost, the retry refused), or an earlier
        write of ours that landed after this one was sent (a renewal cancelled in
        flight): then this write is made again over it."""
        sent = self.clock()
        self.body["renewals"] = self.body.get("renewals", -1) + 1
        data = self.data = json.dumps(self.body, sort_keys=True).encode() + b"\n"
        try:
            self.version = await self.store.put(LOCK_NAME, data, ATTRIBUTES, mode=mode)
        except Refused:
            got = await self.store.get(LOCK_NAME)
            if got is None or read_body(got.data).token != self.body["token"]:
                return got or Got(b"", "")
            if got.data != data:
                return await self._write({"e_tag": got.version})
            self.version = got.version
        self.renewed = sent
        return None

    async def check(self) -> None:
        """Refuse a store that ignores If-None-Match or If-Match: two requests, both refused.

        Each writes our body again: where the store ignores the condition, the lock is
        still ours, its ETag (an MD5) the same, and it is released as it should be.
        """
        checks: dict[str, PutMode] = {"If-None-Match": "create", "If-Match": {"e_tag": NO_SUCH_TAG}}
        for condition, mode in checks.items():
            try:
                await self.store.put(LOCK_NAME, self.data, ATTRIBUTES, mode=mode)
            except Refused:
                continue
            raise InputError(
                f"{self.destination}: {self.endpoint} ignores conditional writes ({condition}), "
                "so two publishes at once could lose files; nothing was changed. If only one "
                "publish ever runs at a time, run again with --single-publisher"
            )

    def fence(self) -> None:
        """Refuse to send a write when the last renewal was sent SAFE s ago or more."""
        if self.clock() - self.renewed >= SAFE:
            raise InputError(
                f"{self.destination}: this publish's lock was not renewed within {SAFE:g} s, "
                "so another publish may hold it now; stopped: publish again to finish"
            )

    async def holding(self, work: Awaitable[T]) -> T:
        """Await ``work`` while renewing the lock; if it is lost, stop ``work`` at once."""
        task = asyncio.ensure_future(work)
        renewing = asyncio.ensure_future(self._renew(task))
        try:
            return await task
        except asyncio.CancelledError:
            if renewing.done() and not renewing.cancelled() and (failed := renewing.exception()):
                raise failed from None  # what stopped it: the lock lost, or the store
            raise
        finally:
            renewing.cancel()

    async def _renew(self, task: asyncio.Future[Any]) -> None:
        try:
            while True:  # each RENEW s after the last renewal was sent, however long it took
                await self.sleep(max(0.0, self.renewed + RENEW - self.clock()))
                if await self._write({"e_tag": self.version}) is not None:
                    raise InputError(
                        f"{self.destination}: another publish took over this one's lock; "
                        "stopped: publish again to finish"
                    )
        finally:
            task.cancel()  # lost, or the store failed (told once, by this renewal); or done

    async def release(self) -> None:
        """Write a released body over ours, if it is still ours; another's stays."""
        self.body["released"] = True
        await self._write({"e_tag": self.version})


@dataclass
class Fenced:
    """``store`` as the lock's holder writes to it: each write sent only inside the lease."""

    store: Store
    lock: Lock

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)  # the reads

    async def put(
        self, path: str, body: bytes, attributes: Mapping[str, str], *, mode: PutMode = "overwrite"
    ) -> str:
        self.lock.fence()
        return await self.store.put(path, body, attributes, mode=mode)

    async def delete(self, paths: list[str]) -> None:
        self.lock.fence()
        await self.store.delete(paths)


async def locked(lock: Lock, timeout: float, work: Callable[[], Awaitable[T]]) -> T:
    """Take ``lock`` (waiting up to ``timeout`` s), check the store, run ``work`` holding it,
    release it."""
    await lock.take(timeout)
    try:
        await lock.check()
        result = await lock.holding(work())
    except BaseException as error:
        # Stopped: at once, even if the store stalls; a lock left behind expires by itself.
        stopped = isinstance(error, asyncio.CancelledError)
        with contextlib.suppress(Exception):  # the error that stopped it is the one to tell
            await asyncio.wait_for(lock.release(), RELEASE_WAIT if stopped else None)
        raise
    await lock.release()
    return result
