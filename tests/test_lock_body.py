"""Another publish's lock, waited on, left or taken over, whatever its body says: in memory,
on the waiter's own (virtual) clock.

One takeover against real stores is in tests/test_publish_lock.py.
"""

from __future__ import annotations

import asyncio
import json
from typing import Final

import pytest

from ratings_api.lock import LEASE, LOCK_NAME, MAX_LEASE, POLL, Lock, Waiting, read_body
from ratings_api.s3 import Destination
from tests.memorystore import Before, Memory, Seen

OTHER: Final = {"who": "ci@runner-7 (process 4242)", "since": "24 Nov 2026 09:00:00 UTC"}
HOLDER: Final = f"{OTHER['who']}, since {OTHER['since']}"
UNKNOWN: Final = "an unknown holder, since an unknown time"
TARGET: Final = Destination("b", "p")


def other(**lock: object) -> bytes:
    return json.dumps({**OTHER, **lock}).encode()


# Each body another publish left: whom the lines name, and the lease it is waited out for.
# A body of an older version, without a format, states its own lease (at most MAX_LEASE).
BODIES: Final = {
    "stated-lease": (other(lease=120), HOLDER, 120.0),
    "longest-lease": (other(lease=MAX_LEASE), HOLDER, MAX_LEASE),
    "no-lease": (other(), HOLDER, LEASE),
    "this-version": (other(format=1, token="t", lease=1), HOLDER, LEASE),
    "lease-too-long": (other(lease=MAX_LEASE + 1), UNKNOWN, LEASE),
    "lease-nan": (other(lease=float("nan")), UNKNOWN, LEASE),
    "lease-infinite": (other(lease=float("inf")), UNKNOWN, LEASE),
    "lease-negative": (other(lease=-1e300), UNKNOWN, LEASE),
    "lease-not-a-number": (other(lease="soon"), UNKNOWN, LEASE),
    "no-holder": (json.dumps({"lease": 1}).encode(), UNKNOWN, LEASE),
    "a-list": (b"[1, 2]", UNKNOWN, LEASE),
    "nested": (b"[" * 100_000, UNKNOWN, LEASE),
    "unreadable": (b"?", UNKNOWN, LEASE),
    "not-utf-8": (b"\xff\xfe", UNKNOWN, LEASE),
}


def waiter(memory: Memory, said: list[str], now: list[float], before: Before | None = None) -> Lock:
    """A publish's lock on ``memory``, on the clock ``now[0]``, which its sleeps move on."""

    async def sleep(seconds: float) -> None:
        now[0] += seconds

    store = Seen(memory, before)
    return Lock(store, TARGET, "memory", said.append, clock=lambda: now[0], sleep=sleep)


def waiting(holder: str, timeout: float, until: float) -> list[str]:
    """The lines said while waiting for ``holder``'s lock, each 10 s until ``until``."""
    return [
        f"{TARGET}: waiting for the lock held by {holder} ({n} of {timeout:g} s)"
        for n in range(0, int(until) + 1, 10)
    ]


@pytest.mark.parametrize(("body", "holder", "lease"), BODIES.values(), ids=BODIES.keys())
def test_a_dead_holders_lock_is_taken_over_after_the_lease_its_body_gives(
    body: bytes, holder: str, lease: float
) -> None:
    """Waited out on the waiter's own clock, from when it first saw the body, saying so
    every 10 s; then taken over, and the lines name the holder."""
    memory, now, said, timeout = Memory(), [0.0], [], MAX_LEASE + 60
    memory.put(LOCK_NAME, body)
    taker = waiter(memory, said, now)
    asyncio.run(taker.take(Waiting(timeout)))
    assert said == [*waiting(holder, timeout, lease), f"{TARGET}: took over the lock of {holder}"]
    assert lease < now[0] <= lease + POLL
    assert read_body(memory.contents()[LOCK_NAME]).token == taker.body["token"]


def test_a_takeover_another_publish_made_first_is_not_said() -> None:
    """Another publish takes the dead lock over just before this one does, and releases
    it: this one's takeover is refused; it takes the released lock, saying no takeover."""
    memory, now, said, puts = Memory(), [0.0], [], []
    memory.put(LOCK_NAME, other(lease=1))
    released = json.dumps({"format": 1, "token": "t", **OTHER, "released": True}).encode()

    async def before(number: int, method: str, path: str) -> None:
        puts.append(method == "PUT" and now[0] > 1)
        if puts.count(True) == 2 and puts[-1]:  # its create refused, the lock read: stale
            memory.put(LOCK_NAME, released)  # the other's takeover, then its release

    taker = waiter(memory, said, now, before)
    asyncio.run(taker.take(Waiting()))
    assert said == waiting(HOLDER, 600, 0)
    assert read_body(memory.contents()[LOCK_NAME]).token == taker.body["token"]
