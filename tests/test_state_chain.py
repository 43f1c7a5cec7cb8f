"""The state's chain: the plan, the marks, and publishes that meet, against an in-memory store.

A publication is handed the in-memory store seen through ``Seen``
(tests/memorystore.py), which counts its requests and lets a test act before any
of them: run another publish whole there, fail it, or end the publish as a kill
would. Everything here holds to one invariant, checked by ``lies``: a file the
state records as known holds what the state says. What only a real store shows
is in tests/test_publish.py.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import tracemalloc
from asyncio import run
from collections.abc import Callable
from dataclasses import replace
from typing import Final

import pytest
from obstore.exceptions import GenericError

from ratings_api import bucket_state
from ratings_api.bucket_state import STATE_NAME, BucketState, Site, decode, encode, local_state
from ratings_api.contract import CACHE_CONTROL
from ratings_api.errors import InputError
from ratings_api.loader import Catalogue
from ratings_api.publish import Outcome, Publication
from ratings_api.rating import Renderer
from ratings_api.s3 import Destination
from tests.memorystore import Memory, Seen
from tests.trees import document

BASE: Final = "https://ratings.example.com"
TARGET: Final = Destination("b", "p")
GOOD_HEAD: Final = {
    "articles": 0,
    "cache_control": CACHE_CONTROL,
    "files": {},
    "format": 2,
    "stamp": "",
}
# The lines of a state that cannot be read (docs/troubleshooting.md shows these).
UNREADABLE: Final = (
    f"s3://b/p: {STATE_NAME}: not a state this version can read; --repair lists the bucket "
    "and writes a new one"
)
NEWER: Final = (
    f"s3://b/p: {STATE_NAME}: written by a newer version of ratings-api (state format 3; this "
    "one reads 2): upgrade it, or --repair lists the bucket and writes a state of this version"
)


Numbers = dict[int, tuple[int, int]]  # each article's sum and count, by its id


def state_of(head: dict[str, object], columns: bytes = b"") -> bytes:
    return gzip.compress(json.dumps(head).encode() + b"\n" + columns)


def md5(body: bytes) -> str:
    return hashlib.md5(body).hexdigest()


def site_of_numbers(numbers: Numbers, others: dict[str, bytes] | None = None) -> Site:
    sums, counts = ([column[n] for column in numbers.values()] for n in (0, 1))
    catalogue = Catalogue(ids=list(numbers), sums=sums, counts=counts)
    return Site(catalogue, Renderer(BASE), others or {"index.html": b"<!doctype html>\n"})


def lies(objects: dict[str, bytes]) -> list[str]:
    """The files the state among ``objects`` records as known that hold something else."""
    state = decode(objects[STATE_NAME]) if STATE_NAME in objects else BucketState()
    paths = [path for path, _ in state.entries()]
    wrong = sorted({path for path in paths if paths.count(path) > 1})  # recorded twice
    render = Renderer(BASE)
    assert state.stamp in ("", render.stamp)
    for article_id, total, count in zip(state.ids, state.sums, state.counts, strict=True):
        path, known = document(article_id), count != bucket_state.UNKNOWN_COUNT
        if known and objects.get(path) != render(article_id, total, count):
            wrong.append(path)
    for path, digest in state.files.items():
        if digest != bucket_state.UNKNOWN and md5(objects.get(path, b"\0none")) != digest:
            wrong.append(path)
    return wrong


def publication(
    store: Seen, site: Site, *, repair: bool = False, removals: int = 256, workers: int = 1
) -> Publication:
    """A publish of ``site`` to ``store``, by default one request at a time: always the same."""
    return Publication(store, TARGET, site, repair, removals, workers, None)


async def publish(memory: Memory, site: Site) -> Outcome:
    """One whole publish of ``site``, nothing in its way."""
    return await publication(Seen(memory), site).carry_out()


def assert_holds(objects: dict[str, bytes], site: Site) -> None:
    """The store holds exactly ``site`` and a state that knows every file of it."""
    state = decode(objects.pop(STATE_NAME))
    documents = {path: site.body(path, place) for path, place in site.documents()}
    assert objects == documents | dict(site.others)
    assert dict(state.entries()) == dict.fromkeys(objects, True)
    assert lies({**objects, STATE_NAME: encode(state)}) == []


BEFORE: Final = {1: (5, 1), 2: (4, 1), 3: (3, 1)}
MINE: Final = site_of_numbers({**BEFORE, 1: (1, 1)}, others={"index.html": b"<p>mine</p>\n"})
# Another catalogue, 301 articles longer: planned from its state, MINE would remove them.
THEIRS: Final = site_of_numbers({**BEFORE, **{n: (n % 5 + 1, 1) for n in range(10, 311)}})
STOPS: Final = {
    "removal-guard": (
        "s3://b/p: this publish would remove 301 files, more than --max-removals 256, "
        "after another publish; uploads were made. If that is meant, run again "
        "with --max-removals 301"
    ),
    "state-keeps-changing": "s3://b/p: the state keeps changing: is another publish running?",
    "store-error": "the store failed",
}


@pytest.mark.parametrize("stop", STOPS)
def test_a_publish_that_stops_after_another_leaves_none_of_its_files_known(stop: str) -> None:
    """Its upload of article 1 lands after another publish wrote its state; then it stops.

    Stopped by its removal guard, by ten more states in a row (the same records,
    a new version, before each of its ten state writes and its first withdrawal),
    or by the store failing its next upload: the state must not say article 1
    holds the other's bytes, nor that nothing was changed.
    """
    memory, theirs, others = Memory(), list[Outcome](), list[str]()

    async def before(number: int, method: str, path: str) -> None:
        keeps_changing = stop == "state-keeps-changing" and theirs and len(others) < 11
        if (method, path) == ("PUT", document(1)):
            theirs.append(await publish(memory, THEIRS))
        elif stop == "store-error" and (method, path) == ("PUT", "index.html"):
            raise GenericError("the store failed")
        elif keeps_changing and (method, path) == ("PUT", STATE_NAME):
            state = decode(memory.objects[STATE_NAME][0])
            others.append(memory.put(STATE_NAME, encode(state, f"f00d{others}")))

    run(publish(memory, site_of_numbers(BEFORE)))
    mine = publication(Seen(memory, before), MINE, removals=256 if "guard" in stop else 999)
    with pytest.raises((InputError, GenericError)) as error:
        run(mine.carry_out())

    objects = memory.contents()
    assert (str(error.value), len(others)) == (STOPS[stop], 11 if "changing" in stop else 0)
    assert objects[document(1)] == MINE.body(document(1), 0)
    assert lies(objects) == []
    assert not dict(decode(objects[STATE_NAME]).entries())[document(1)]
    run(publish(memory, THEIRS))
    assert_holds(memory.contents(), THEIRS)


def test_a_repair_that_meets_another_publish_lists_again() -> None:
    """star.svg is changed by hand; another publish, which trusts the state, overtakes the repair."""
    memory = Memory()
    mine = site_of_numbers(BEFORE, others={"star.svg": b"<svg/>\n"})
    theirs = site_of_numbers({**BEFORE, 2: (1, 1)}, others={"star.svg": b"<svg/>\n"})
    overtaken: list[Outcome] = []

    async def before(number: int, method: str, path: str) -> None:
        if (method, path) == ("PUT", STATE_NAME) and not overtaken:  # the repair's marks
            overtaken.append(await publish(memory, theirs))

    run(publish(memory, mine))
    memory.put("star.svg", b"defaced\n")
    outcome = run(publication(Seen(memory, before), mine, repair=True).carry_out())

    assert outcome.plans == 2
    assert_holds(memory.contents(), mine)


def test_progress_is_reported_every_hundred_uploads() -> None:
    seen: list[tuple[str, int, int]] = []
    site = site_of_numbers(dict.fromkeys(range(1, 151), (1, 1)))
    progress = Publication(Seen(Memory()), TARGET, site, False, 256, 1, lambda *at: seen.append(at))
    run(progress.carry_out())
    assert seen == [("uploading", 100, 151), ("uploading", 151, 151)]


# The state and the plan


def published(site: Site) -> BucketState:
    """The state of ``site``, once written to the bucket and read back."""
    return decode(encode(local_state(site)))


def test_a_state_read_back_is_the_state_written_unless_its_headers_differ() -> None:
    """A state written with another Cache-Control knows no file: each has the wrong header."""
    state = local_state(site_of_numbers({7: (29, 6), 2**62: (0, 0), 3: (-5, 1)}))
    data = gzip.decompress(encode(state, "f00d"))  # each write's own token, which no one reads

    read = decode(gzip.compress(data))

    columns = [list(read.ids), list(read.sums), list(read.counts)]
    expected = [[7, 2**62, 3], [29, 0, -5], [6, 0, 1]]
    assert (read.stamp, columns, encode(read)) == (Renderer(BASE).stamp, expected, encode(state))
    paths = [document(7), document(2**62), document(3), "index.html"]
    assert dict(read.entries()) == dict.fromkeys(paths, True)
    assert json.loads(data.split(b"\n")[0]) == {
        **GOOD_HEAD,
        "articles": 3,
        "files": {"index.html": md5(b"<!doctype html>\n")},
        "stamp": Renderer(BASE).stamp,
        "token": "f00d",
    }
    other = gzip.compress(data.replace(CACHE_CONTROL.encode(), b"public, max-age=60", 1))
    assert dict(decode(other).entries()) == dict.fromkeys(paths, False)


def by_md5(numbers: Numbers) -> BucketState:
    """What a version that let numbers pass 64 bits recorded: every document by its MD5."""
    site = site_of_numbers(numbers)
    documents = {path: md5(site.body(path, place)) for path, place in site.documents()}
    state = local_state(site)
    return BucketState(state.stamp, files={**state.files, **documents})


FOUR: Final = {1: (5, 1), 2: (4, 1), 3: (3, 1), 4: (2, 1)}
OLD: Final = site_of_numbers({**BEFORE, 4: (2, 1)})
RECORDED_TWICE: Final = local_state(site_of_numbers({1: (5, 1), 2: (4, 1)}))
PLANS: Final = {  # the state, the site, the files to upload and to remove
    "added-moved-removed": (
        published(OLD),
        site_of_numbers({4: (2, 1), 9: (1, 1), 1: (5, 1), 3: (3, 2)}),
        [document(9), document(3)],
        [document(2)],
    ),
    "another-base-url": (
        published(OLD),
        site_of_numbers(FOUR)._replace(render=Renderer("https://other.example")),
        [document(n) for n in FOUR],
        [],
    ),
    "documents-by-md5": (  # each listed one uploaded and recorded by its numbers
        by_md5(BEFORE),
        site_of_numbers({1: (5, 1), 2: (9, 2)}),
        [document(1), document(2)],
        [document(3)],
    ),
    "recorded-twice": (  # an earlier version's marks: by its numbers and, stale, by MD5
        replace(RECORDED_TWICE, files={**RECORDED_TWICE.files, document(1): md5(b"stale\n")}),
        site_of_numbers({1: (5, 1), 2: (4, 1)}),
        [document(1)],
        [],
    ),
    "numbers-index-and-new-files": (
        published(site_of_numbers(BEFORE)),
        site_of_numbers(
            {1: (5, 1), 2: (4, 2), 8: (1, 1)},
            others={"index.html": b"changed\n", "new.css": b"a {}\n"},
        ),
        [document(2), document(8), "index.html", "new.css"],
        [document(3)],
    ),
}


@pytest.mark.parametrize(("state", "site", "uploads", "removals"), PLANS.values(), ids=PLANS.keys())
def test_the_plan_and_its_marks_record_each_file_it_touches_as_unknown_once(
    state: BucketState, site: Site, uploads: list[str], removals: list[str]
) -> None:
    """The final state is every file known by the site's numbers and MD5s, the marks the
    same with each file the plan touches unknown: it never records a wrong file. Each file
    of the site is uploaded or left unchanged."""
    todo, final = bucket_state.plan(site, decode(encode(state)))

    marks = list(bucket_state.marked(final, todo).entries())

    assert ([path for path, _ in todo.uploads()], todo.removals) == (uploads, removals)
    assert todo.unchanged == len([*site.documents(), *site.others]) - len(uploads)
    assert encode(final) == encode(local_state(site))
    assert len(marks) == len(dict(marks))  # no file twice
    assert {path for path, known in marks if not known} == {*uploads, *removals}


DAMAGES: Final[dict[str, Callable[[bytes], bytes]]] = {
    "truncated-gzip": lambda data: data[:-9],
    "short-column": lambda data: gzip.compress(gzip.decompress(data)[:-8]),
    "first-format": lambda _: gzip.compress(b'{"files": {}, "format": 1}\n'),
    "not-an-object": lambda _: gzip.compress(b"[]\n"),
    "not-json": lambda _: gzip.compress(b"not json\n"),
    "no-line": lambda _: gzip.compress(b"{}"),
    "format-true": lambda _: state_of({**GOOD_HEAD, "format": True}),
    "negative-size": lambda _: state_of({**GOOD_HEAD, "articles": -1}),
    "deep-json": lambda _: gzip.compress(b"[" * 200_000 + b"\n"),
    "digest-not-text": lambda data: gzip.compress(
        gzip.decompress(data).replace(b'"files":{', b'"files":{"a":1,', 1)
    ),
    **{
        f"no-{key}": lambda _, key=key: state_of({k: v for k, v in GOOD_HEAD.items() if k != key})
        for key in GOOD_HEAD
    },
}


@pytest.mark.parametrize("damage", DAMAGES.values(), ids=DAMAGES.keys())
def test_a_damaged_state_is_refused_with_one_line(damage: Callable[[bytes], bytes]) -> None:
    data = encode(local_state(site_of_numbers({1: (5, 1)})))

    with pytest.raises(InputError) as error:
        decode(damage(data))

    assert str(error.value) == UNREADABLE.removeprefix("s3://b/p: ")


def test_a_plan_of_100000_articles_holds_columns_and_uploads_each_number_changed_alone() -> None:
    """A first plan holds numbers, not a (path, place) each (about 15 MB); the workers a publish
    starts are bounded too: --publish-workers is at most 256 (test_cli.py). Then a number
    changed anywhere, on either side of a CHUNK the plan compares at a time, or none."""
    numbers = {n: (n % 7, n % 3) for n in range(1, 100_001)}
    site = site_of_numbers(numbers)
    tracemalloc.start()
    todo = bucket_state.plan(site, BucketState())[0]
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    paths = list(todo.uploads())
    assert (len(paths), paths[-2:]) == (100_001, [(document(100_000), 99_999), ("index.html", -1)])
    assert peak < 4_000_000

    before = published(site)
    for place in [None, 0, bucket_state.CHUNK - 1, bucket_state.CHUNK, 99_999]:
        changed = [] if place is None else [(document(place + 1), place)]
        site = site_of_numbers(numbers | {at + 1: (7, 9) for _, at in changed})  # new numbers
        todo, final = bucket_state.plan(site, before)
        assert (list(todo.uploads()), todo.removals) == (changed, []), place
        assert todo.unchanged == 100_001 - len(changed)
        assert encode(final) == encode(local_state(site))
