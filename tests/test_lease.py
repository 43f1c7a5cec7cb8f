"""The lease and the invariant, in-process: publishes on the in-memory store, on virtual time;
and every kind of lock body another publish may have left.

Each publish runs with its own clock (its own offset: the clocks disagree) on one
virtual time that moves only when every publish waits: no sleeps. Before any of
its requests a publish may stall (a pause, as SIGSTOP, before its check of the
lease), be killed, lose the reply of a request the store applied (the library
retries it), or see it fail. Once all have stopped, for any catalogue X,
``--check X`` plans nothing only if the bucket holds exactly X's site, and one
more plain publish of X makes it so. A pause between a write's check and its
sending is the window docs/deploy-object-storage.md names: left out.
"""

from __future__ import annotations

import asyncio
import json
import selectors
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from selectors import SelectorKey
from typing import Any, Final, NamedTuple

import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st
from obstore.exceptions import GenericError

from ratings_api import lock
from ratings_api.bucket_state import Site
from ratings_api.errors import InputError
from ratings_api.lock import DEFAULT_TIMEOUT, LEASE, LOCK_NAME, MAX_LEASE, POLL, Lock, read_body
from ratings_api.store import Store
from tests.memorystore import Memory, Seen
from tests.test_state_chain import TARGET, assert_holds, lies, publication, site_of_numbers


class Killed(BaseException):
    """The publish's process is gone: none of its requests lands any more."""


class Skipping(selectors.SelectSelector):
    """A selector that waits for nothing: the time it was asked to wait passes at once."""

    now = 0.0

    def select(self, timeout: float | None = None) -> list[tuple[SelectorKey, int]]:
        self.now += timeout or 0.0
        return super().select(0)


class VirtualTime(asyncio.SelectorEventLoop):
    """An event loop on virtual time: the time moves only when every task waits, and then
    on to the next timer at once."""

    def __init__(self) -> None:
        self.selector = Skipping()
        super().__init__(self.selector)

    def time(self) -> float:
        return self.selector.now


class Faults(NamedTuple):
    """What befalls one publish, by the number of its request (lock's, state's, files')."""

    stalls: Mapping[int, float] = {}  # seconds paused before it
    killed: int = 0  # the request before which its process is gone (0: never)
    lost: frozenset[int] = frozenset()  # applied, the reply lost, sent again
    failed: frozenset[int] = frozenset()  # the store answers an error


class Process(Seen):
    """One publish's view of the store, with its faults, on its own clock."""

    def __init__(self, memory: Memory, faults: Faults, offset: float) -> None:
        super().__init__(memory)
        self.faults, self.offset, self.gone = faults, offset, False
        self.stalls = dict(faults.stalls)  # those not begun yet
        self.resumes = 0.0  # when the process, paused, runs again

    def clock(self) -> float:
        return asyncio.get_running_loop().time() + self.offset

    async def _request(self, method: str, path: str) -> None:
        number = len(self.log) + 1
        if self.gone or number == self.faults.killed:
            self.gone = True
            raise Killed
        await super()._request(method, path)
        if number in self.faults.failed:
            raise GenericError("the store failed")

    async def put(self, path: str, body: bytes, attributes: Mapping[str, str], **how: Any) -> str:
        version = await super().put(path, body, attributes, **how)
        if len(self.log) in self.faults.lost:  # the reply is lost: the library sends it again
            return await super().put(path, body, attributes, **how)
        return version


@dataclass
class Paused:
    """``store`` as ``process`` calls it: a stall before a request pauses the whole
    process (each of its requests waits), before the request is checked and sent."""

    store: Store
    process: Process

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        async def call(*args: Any, **kwargs: Any) -> Any:
            process, now = self.process, asyncio.get_running_loop().time
            stall = process.stalls.pop(len(process.log) + 1, 0.0)
            process.resumes = max(process.resumes, now() + stall)
            while now() < process.resumes:
                await asyncio.sleep(process.resumes - now())
            return await getattr(self.store, name)(*args, **kwargs)

        return call


def run_together(memory: Memory, publishes: list[tuple[Site, Faults, float, float]]) -> list[str]:
    """Publishes started at their times, each on its own clock, to their ends: each with the
    lock, as publish.publishing runs it."""

    async def publish_one(site: Site, faults: Faults, offset: float, at: float) -> str:
        await asyncio.sleep(at)
        process = Process(memory, faults, offset)
        paused: Any = Paused(process, process)
        held = Lock(paused, TARGET, "memory", print, clock=process.clock)
        run = publication(paused, site, workers=2)
        try:
            read = await run.read_state()
            if not (await run.plan_only(read)).plan.changes:
                return "current"
            run.store = Paused(lock.Fenced(process, held), process)  # type: ignore[arg-type]
            await lock.locked(held, DEFAULT_TIMEOUT, lambda: run.carry_out(read, again=True))
        except Killed:
            return "killed"
        except (InputError, GenericError) as error:
            return str(error)
        return "published"

    async def together() -> list[str]:
        return await asyncio.gather(*(publish_one(*each) for each in publishes))

    with asyncio.Runner(loop_factory=VirtualTime) as runner:
        return runner.run(together())


def bucket(memory: Memory) -> dict[str, bytes]:
    return {path: body for path, body in memory.contents().items() if path != LOCK_NAME}


def checked(memory: Memory, site: Site) -> int:
    """The files ``--check`` of ``site`` plans to change."""
    return asyncio.run(publication(Seen(memory), site).plan_only()).plan.changes


# Sites, faults, and publishes drawn


SITES: Final = st.builds(
    lambda numbers, index: site_of_numbers(numbers, others={"index.html": index}),
    st.dictionaries(st.integers(1, 5), st.tuples(st.integers(1, 3), st.just(1)), max_size=4),
    st.sampled_from([b"<p>a</p>\n", b"<p>b</p>\n"]),
)


REQUEST: Final = st.integers(1, 14)


@st.composite
def faults(draw: st.DrawFn) -> Faults:
    """Each fault at any request; a kill, often, a request or two after a stall."""
    stalls = draw(st.dictionaries(REQUEST, st.sampled_from([5.0, 35.0, 70.0, 200.0]), max_size=2))
    after = [number + step for number in stalls for step in (1, 2)]
    killed = draw(st.just(0) | REQUEST | (st.sampled_from(after) if after else REQUEST))
    lost = draw(st.frozensets(REQUEST, max_size=2))
    return Faults(stalls, killed, lost, draw(st.frozensets(REQUEST, max_size=1)))


PUBLISHES: Final = st.lists(
    st.tuples(
        SITES, faults(), st.sampled_from([0.0, -50.0, 50.0, 1e6]), st.sampled_from([0.0, 1.0, 30.0])
    ),
    min_size=2,
    max_size=3,
)


@settings(max_examples=100, derandomize=True, database=None, deadline=None)
@given(PUBLISHES, SITES)
def test_once_all_stop_check_plans_nothing_only_for_the_site_the_bucket_holds(
    publishes: list[tuple[Site, Faults, float, float]], last: Site
) -> None:
    """And one more plain publish of any catalogue makes the bucket exactly its site."""
    memory = Memory()
    note(f"ended: {run_together(memory, publishes)}")
    objects = bucket(memory)
    assert lies(objects) == []
    for site in [*(site for site, *_ in publishes), last]:
        if checked(memory, site) == 0:
            assert_holds(dict(objects), site)
    assert run_together(memory, [(last, Faults(), 0.0, 0.0)]) in (["published"], ["current"])
    assert_holds(bucket(memory), last)
    assert checked(memory, last) == 0


# Another publish's lock, waited on, left or taken over, whatever its body says, on the
# waiter's own (virtual) clock. One takeover against real stores is in test_publish.py.

OTHER: Final = {"who": "ci@runner-7 (process 4242)", "since": "24 Nov 2026 09:00:00 UTC"}
HOLDER: Final = f"{OTHER['who']}, since {OTHER['since']}"
UNKNOWN: Final = "an unknown holder, since an unknown time"


def other(**fields: object) -> bytes:
    return json.dumps({**OTHER, **fields}).encode()


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


# Or another publish takes the dead lock over just before this one does, and releases it: this
# one's takeover is refused; it takes the released lock, saying no takeover.
TAKEN_FIRST: Final = (other(lease=1), HOLDER, 1.0)
RELEASED: Final = json.dumps({"format": 1, "token": "t", **OTHER, "released": True}).encode()


@pytest.mark.parametrize("case", [*BODIES, "taken-over-first"])
def test_a_dead_holders_lock_is_taken_over_after_the_lease_its_body_gives(case: str) -> None:
    """Waited out on the waiter's own clock (``now``, which its sleeps move on), from when it
    first saw the body, saying so every 10 s; then taken over, and the lines name the holder."""
    body, holder, lease = BODIES.get(case, TAKEN_FIRST)
    memory, now, said, late, timeout = Memory(), [0.0], [], [], MAX_LEASE + 60
    memory.put(LOCK_NAME, body)
    first = case == "taken-over-first"  # by another

    async def before(number: int, method: str, path: str) -> None:
        late.append(method == "PUT" and now[0] > lease)
        if first and late.count(True) == 2 and late[-1]:  # its create refused, the lock: stale
            memory.put(LOCK_NAME, RELEASED)  # the other's takeover, then its release

    async def sleep(seconds: float) -> None:
        now[0] += seconds

    taker = Lock(
        Seen(memory, before), TARGET, "memory", said.append, clock=lambda: now[0], sleep=sleep
    )
    asyncio.run(taker.take(timeout))
    took = [] if first else [f"{TARGET}: took over the lock of {holder}"]
    waiting = f"{TARGET}: waiting for the lock held by {holder} ({{}} of {timeout:g} s)"
    assert said == [*(waiting.format(n) for n in range(0, int(lease) + 1, 10)), *took]  # each 10 s
    assert lease < now[0] <= lease + POLL
    assert read_body(memory.contents()[LOCK_NAME]).token == taker.body["token"]
