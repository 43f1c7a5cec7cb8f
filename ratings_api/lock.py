"""The lock a publish holds in the bucket: one publish per target at a time.

``PREFIX/.ratings-api/lock`` is created with If-None-Match: *, as Terraform's S3
backend does, and says who holds it and its lease. The holder renews it; one
whose store Last-Modified is older than its lease is taken over by a write
conditional on its ETag. Taking it, a publish checks that the store refuses a
second create and a wrong If-Match. The lock is for liveness and cost;
correctness rests on the state's version chain (ratings_api/publish.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import secrets
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Final, TypeVar

from ratings_api.errors import InputError
from ratings_api.s3 import Destination

if TYPE_CHECKING:
    from obstore import PutMode
    from obstore.store import S3Store

T = TypeVar("T")
Say = Callable[[str], None]

LOCK_NAME: Final = ".ratings-api/lock"
LEASE: Final = 60  # seconds a lock lives unless its holder renews it
DEFAULT_TIMEOUT: Final = 600  # seconds a publish waits for another's lock
POLL: Final = 0.5  # seconds between two looks at a held lock
SAY_EVERY: Final = 10  # seconds between two lines while waiting
RELEASE_WAIT: Final = 0.5  # seconds a stopped publish gives its release
NO_SUCH_TAG: Final = '"00000000000000000000000000000000"'  # an ETag no object has


@dataclass(frozen=True)
class Waiting:
    """How a publish takes the lock: how long it waits, and whether it takes it over at once."""

    timeout: float = DEFAULT_TIMEOUT
    force: bool = False


@dataclass(frozen=True)
class Holder:
    """What a lock's body says: who holds it, since when, for how long, and its own token."""

    who: str
    since: str
    lease: float
    token: str = ""

    def __str__(self) -> str:
        return f"{self.who}, since {self.since}"


def me() -> Holder:
    user = os.environ.get("USER") or os.environ.get("USERNAME") or "someone"  # or Windows'
    who = f"{user}@{socket.gethostname()} (process {os.getpid()})"
    since = now().strftime("%d %b %Y %H:%M:%S UTC")
    return Holder(who, since, LEASE, secrets.token_hex(8))


def now() -> datetime:
    return datetime.now(UTC)  # compared with the store's Last-Modified: keep the clock right


def read_holder(data: bytes) -> Holder:
    """The holder a body names; a body not ours counts as an unknown holder of a full lease."""
    try:
        body = json.loads(data)
        lease = float(body["lease"])
        if 0 <= lease <= LEASE:  # not NaN, nor a lease no publish of ours writes
            return Holder(str(body["who"]), str(body["since"]), lease)
    except (ValueError, TypeError, KeyError, RecursionError):
        pass
    return Holder("an unknown holder", "an unknown time", LEASE)


@dataclass
class Lock:
    """The lock of one publish: taken, checked, renewed while held, then released."""

    store: S3Store
    destination: Destination
    endpoint: str
    say: Say
    holder: Holder
    version: str = ""  # our lock's ETag, once taken
    renewals: int = 0
    requests: int = 0

    async def take(self, waiting: Waiting) -> None:
        """Take the lock: at once if free or stale (or with ``force``), else wait for it."""
        import obstore
        from obstore.exceptions import AlreadyExistsError, PreconditionError

        started, said = time.monotonic(), -float(SAY_EVERY)
        while True:
            with contextlib.suppress(AlreadyExistsError):
                self.version = await self._put("create")
                return
            self.requests += 1
            try:
                answer = await obstore.get_async(self.store, LOCK_NAME)
                other, meta = read_holder(bytes(await answer.bytes_async())), answer.meta
            except FileNotFoundError:
                continue  # released meanwhile
            if waiting.force or meta["last_modified"] + timedelta(seconds=other.lease) < now():
                with contextlib.suppress(PreconditionError):  # else another took it first
                    self.version = await self._put({"e_tag": meta["e_tag"]})
                    self.say(f"{self.destination}: took over the lock of {other}")
                    return
                continue
            waited = time.monotonic() - started
            if waited >= waiting.timeout:
                raise InputError(
                    f"{self.destination}: another publish holds the lock ({other}); waited "
                    f"{waiting.timeout:g} s (--lock-timeout); nothing was changed"
                )
            if waited - said >= SAY_EVERY:
                said = waited
                self.say(
                    f"{self.destination}: waiting for the lock held by {other} "
                    f"({waited:.0f} of {waiting.timeout:g} s)"
                )
            await asyncio.sleep(POLL)

    async def check(self) -> None:
        """Refuse a store that ignores If-None-Match or If-Match: two requests, both refused."""
        from obstore.exceptions import AlreadyExistsError, PreconditionError

        checks: list[tuple[PutMode, str, type[Exception]]] = [
            ("create", "If-None-Match", AlreadyExistsError),
            ({"e_tag": NO_SUCH_TAG}, "If-Match", PreconditionError),
        ]
        for mode, condition, refusal in checks:
            try:
                await self._put(mode)
            except refusal:
                continue
            raise InputError(
                f"{self.destination}: {self.endpoint} ignores conditional writes ({condition}), "
                "so two publishes at once could lose files; nothing was changed. If only one "
                "publish ever runs at a time, run again with --single-publisher"
            )

    async def holding(self, work: Awaitable[T]) -> T:
        """Await ``work`` while renewing the lock; if another takes it, stop ``work`` at once."""
        task = asyncio.ensure_future(work)
        renewing = asyncio.ensure_future(self._renew(task))
        try:
            return await task
        except asyncio.CancelledError:
            failed = renewing.exception() if renewing.done() and not renewing.cancelled() else None
            if failed is not None:
                raise failed from None  # what stopped it: the lock lost, or the store
            raise
        finally:
            renewing.cancel()

    async def _renew(self, task: asyncio.Future[Any]) -> None:
        from obstore.exceptions import PreconditionError

        while True:
            await asyncio.sleep(LEASE / 3)
            try:
                self.renewals += 1  # new bytes: a new ETag and Last-Modified on any store
                self.version = await self._put({"e_tag": self.version})
            except PreconditionError:
                task.cancel()
                raise InputError(
                    f"{self.destination}: another publish took over this one's lock, which "
                    f"was not renewed within {LEASE} s; stopped: publish again to finish"
                ) from None
            except BaseException:
                task.cancel()  # the store failed: it is told once, by this renewal
                raise

    async def release(self) -> None:
        """Remove the lock if it is still ours."""
        import obstore

        self.requests += 1
        try:
            meta = await obstore.head_async(self.store, LOCK_NAME)
        except FileNotFoundError:
            return
        if meta["e_tag"] == self.version:
            self.requests += 1
            await obstore.delete_async(self.store, LOCK_NAME)

    async def _put(self, mode: PutMode) -> str:
        import obstore

        self.requests += 1
        body = {**asdict(self.holder), "renewals": self.renewals}
        data = json.dumps(body, sort_keys=True).encode() + b"\n"
        answer = await obstore.put_async(
            self.store,
            LOCK_NAME,
            data,
            attributes={"Content-Type": "application/json", "Cache-Control": "no-store"},
            mode=mode,
            use_multipart=False,
        )
        return str(answer["e_tag"])


async def locked(lock: Lock, waiting: Waiting, work: Callable[[], Awaitable[T]]) -> T:
    """Take ``lock``, check the store, run ``work`` holding it, release it."""
    from obstore.exceptions import BaseError

    await lock.take(waiting)
    try:
        await lock.check()
        result = await lock.holding(work())
    except asyncio.CancelledError:
        # Stopped: at once, even if the store stalls; a lock left behind expires by itself.
        with contextlib.suppress(BaseError, TimeoutError):
            await asyncio.wait_for(lock.release(), RELEASE_WAIT)
        raise
    except BaseException:
        with contextlib.suppress(BaseError):  # the error that stopped it is the one to tell
            await lock.release()
        raise
    await lock.release()
    return result
