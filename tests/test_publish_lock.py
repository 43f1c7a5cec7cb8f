"""One publish per target at a time: the lock in the bucket, against a real store.

Publishes started together, a lock held, stale or lost, a store that ignores
conditional writes, stalls or fills up: each seen from outside the publish.
"""

from __future__ import annotations

import json
import signal
import time
from typing import Final

import pytest

from ratings_api import lock, running
from ratings_api.bucket_state import BucketState, plan
from ratings_api.build import render_site
from ratings_api.publish import site_of
from tests import objectstore
from tests.objectstore import SHORT, Project, many
from tests.test_lease import HOLDER, OTHER
from tests.trees import document

pytestmark = pytest.mark.real_world

project = objectstore.project  # the fixture, by name

LOCK_KEY: Final = "p/.ratings-api/lock"
STATE_KEY: Final = "p/.ratings-api/state.gz"
# What the publisher decides, on its own clock and from what it reads: the conditional
# writes of its lock, which a store decides, run on every store in each publish.
PUBLISHERS_OWN: Final = pytest.mark.stores(
    "SeaweedFS", why="the publisher's own logic: its conditional writes run on every store"
)


def plant(project: Project, lease: float) -> None:
    """Another publish's lock, as a publish of an older version writes it."""
    body = json.dumps({**OTHER, "lease": lease}).encode()
    project.store.client().put_object(Bucket=project.bucket, Key=LOCK_KEY, Body=body)


# Publishes started together


def test_publishes_started_together_take_turns(project: Project) -> None:
    """Three publishes of an empty bucket, A and B the same: all exit 0, the bucket holds
    the site of one of them, and they upload as many files as the same publishes run one
    after another, that one last. (Not in the order the processes exited: one may still be
    exiting, writing its coverage, while the next publishes.) (Publishes of changes that
    meet are test_state_chain.py's, in memory.)"""
    started = []
    for name, text in [("a", many(50)), ("b", many(50)), ("c", many(40, first=20))]:
        project.use(name, text)
        started.append(project.start("--quiet"))
    for process in started:
        assert (*process.communicate(timeout=120), process.returncode) == ("", "", 0)
    project.use("c")
    c_last = project.publish("--check").code == 0  # else A or B last: the same site
    project.use("c" if c_last else "a")
    project.assert_published()
    assert project.publish("--check").code == 0
    expected: set[int] = set()
    for order in ["abc"] if c_last else ["acb", "cab"]:
        state, uploads = BucketState(), 0
        for name in order:
            ratings = str(project.folder / name / "ratings.yaml")
            todo, state = plan(site_of(render_site(ratings, base_url=None, environ={})), state)
            uploads += todo.upload_count
        expected.add(uploads)
    puts = [path for method, path in project.proxy.requests if method == "PUT"]
    assert len([path for path in puts if not path.endswith((STATE_KEY, LOCK_KEY))]) in expected


# A lock held, stale or lost


@PUBLISHERS_OWN
def test_a_publish_that_lost_its_lock_stops(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An upload waits past the lease and another publish takes the lock over: at its
    next renewal (renewals go on while an upload waits: the lost renewal below), it stops
    before writing its state, and leaves the other's lock alone."""
    monkeypatch.setattr(lock, "RENEW", 0.5)

    def another_takes_it() -> None:
        plant(project, lock.LEASE)
        time.sleep(1.0)  # the next renewal meets it

    project.proxy.on("PUT", "index.html", another_takes_it)
    stopped = f"{project.target}: another publish took over this one's lock; stopped: publish "
    assert project.publish() == (2, "", stopped + "again to finish\n")
    assert json.loads(project.objects()[LOCK_KEY])["who"] == OTHER["who"]
    assert False in project.state().values()  # its marks, not its final state


# The reproductions: a holder paused past its lease, a waiter's clock ahead,
# a lost reply. Each failed before the lease fenced the holder's writes.


FENCED: Final = (
    ": this publish's lock was not renewed within 2 s, so another "
    "publish may hold it now; stopped: publish again to finish\n"
)


@PUBLISHERS_OWN
@pytest.mark.parametrize("when", ["uploading", "before-its-removals"])
def test_a_holder_stopped_past_its_lease_writes_nothing_once_resumed(
    project: Project, monkeypatch: pytest.MonkeyPatch, when: str
) -> None:
    """A is stopped (SIGSTOP) while it uploads, or just before it removes 30 files; B
    takes the stale lock and publishes; A resumes, and stops before its next write."""
    for name, value in SHORT.items():
        monkeypatch.setattr(lock, name, value)
    if when != "uploading":
        project.use("b", many(40))
        assert project.publish().code == 0
    key = "p/index.html" if when != "uploading" else "p/" + document(40)
    held = project.proxy.on("PUT", key, "hold")
    project.use("a", many(60 if when == "uploading" else 10))
    a = project.start("--quiet", "--publish-workers", "1", "--max-removals", "999", short=True)
    try:
        assert held.reached.wait(timeout=60), "A never got that far"
        a.send_signal(signal.SIGSTOP)
        held.release.set()  # its answer waits for A to resume
        project.use("b", many(40))
        assert project.publish("--max-removals", "999") == (0, "", "")
    finally:
        a.send_signal(signal.SIGCONT)
    _, err = a.communicate(timeout=60)
    project.assert_published()
    assert project.publish("--check").code == 0
    assert (a.returncode, err) == (2, project.target + FENCED)


@PUBLISHERS_OWN
def test_a_waiter_whose_clock_is_ahead_takes_no_live_lock(project: Project) -> None:
    """Another publish holds the lock, of a 40 s lease; B's wall clock is 50 s ahead
    (libfaketime): B waits out its --lock-timeout and changes nothing."""
    plant(project, 40.0)
    # Every clock of the process 50 s ahead: a constant offset changes no duration
    # (libfaketime's FAKETIME_DONT_FAKE_MONOTONIC breaks Python's time.sleep).
    process = project.start("--lock-timeout", "3", short=True, clock=["faketime", "-f", "+50s"])
    _, err = process.communicate(timeout=60)
    assert process.returncode == 2, err
    assert err.endswith(
        f"{project.target}: another publish holds the lock ({HOLDER}); waited 3 s "
        "(--lock-timeout); nothing was changed\n"
    )
    assert set(project.objects()) == {LOCK_KEY}


@PUBLISHERS_OWN
@pytest.mark.parametrize("dropped", [0, 3], ids=["lock-create", "lock-renewal"])
def test_a_lost_reply_to_its_own_write_is_known_as_its_own(
    project: Project, monkeypatch: pytest.MonkeyPatch, dropped: int
) -> None:
    """The store applies the lock's create (If-None-Match) or a renewal (If-Match) and the
    answer is lost: the client's retry is refused, and the lock read back holds its own
    token: no race. (The state's writes, handled alike, are test_lease.py's, in memory.)"""
    for name, value in SHORT.items():
        monkeypatch.setattr(lock, name, value)
    lost = project.proxy.on("PUT", LOCK_KEY, "drop", dropped)  # a renewal: after 3 lock writes

    def once_lost() -> None:  # index.html's upload waits until a renewal is sent
        lost.reached.wait(timeout=60)
        time.sleep(0.5)  # its retry refused, the lock read back

    project.proxy.on("PUT", "index.html", once_lost)
    done = project.main("--publish", project.target)  # not --quiet: no line waiting on itself
    assert (done.code, done.err, lost.reached.is_set()) == (0, "", True)
    project.assert_published()


# Stores that ignore conditions, stall or fill up


@pytest.mark.stores("moto", why="it checks no signature: a proxy may drop the signed conditions")
@pytest.mark.parametrize("header", ["If-None-Match", "If-Match"])
def test_a_store_that_ignores_conditional_writes_is_refused(project: Project, header: str) -> None:
    project.proxy.strip.add(header.lower())
    refused = (
        f"{project.target}: {project.proxy.endpoint} ignores conditional writes ({header}), "
        "so two publishes at once could lose files; nothing was changed. If only one "
        "publish ever runs at a time, run again with --single-publisher\n"
    )
    assert project.publish() == (2, "", refused)
    assert set(project.objects()) == {LOCK_KEY}  # no file: the lock, released
    assert project.publish("--single-publisher").code == 0
    project.assert_published()


@pytest.mark.stores("SeaweedFS", why="the proxy holds the answer: the store plays no part")
def test_a_stalled_store_is_said_while_it_is_awaited(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(running, "STALL", 1)  # each 10 s, as the user sees it
    monkeypatch.setattr(running, "TICK", 0.1)
    # From the request's arrival, not the test's start: the build before it may be slow.
    project.proxy.on("GET", STATE_KEY, lambda: time.sleep(1.4))
    done = project.main("--publish", project.target)
    waiting = f"{project.target}: waiting for {project.proxy.endpoint}: no request answered for"
    assert (done.code, done.err) == (0, f"{waiting} 1 s\n")


@pytest.mark.stores("SeaweedFS", why="the proxy makes the failure: the store plays no part")
@pytest.mark.parametrize(
    ("failure", "key", "line"),
    [
        ("gone", "p/" + document(10), "cannot reach {endpoint} (AWS_ENDPOINT_URL)"),
        ("full", STATE_KEY, "{endpoint} failed: it answered 500 Internal Server Error"),
    ],
)
def test_a_store_going_away_or_full_midway_is_one_line_and_exit_2(
    project: Project, failure: str, key: str, line: str
) -> None:
    """From an upload on, every connection closes unanswered (the store died); or from the
    state's marks on, before any upload, every PUT is answered 500 (SeaweedFS with no room
    left). Its release fails too: the lock stays, as a killed publish's, and the next
    publish converges (test_a_holder_stopped_past_its_lease_writes_nothing_once_resumed)."""
    project.ratings.write_text(many(40))
    project.proxy.on("PUT", key, lambda: setattr(project.proxy, failure, True))
    expected = f"{project.target}: {line.format(endpoint=project.proxy.endpoint)}\n"
    assert project.publish("--publish-workers", "2") == (2, "", expected)
    assert not lock.read_body(project.objects()[LOCK_KEY]).released
