"""``generate.py --publish``: against a real SeaweedFS, its requests counted by a proxy."""

from __future__ import annotations

import builtins
import signal
import sys
import time
from pathlib import Path, PurePosixPath
from typing import Final

import pytest

from ratings_api.cli import main
from ratings_api.contract import CACHE_CONTROL, CONTENT_TYPES, ERROR_TYPE
from ratings_api.s3 import Destination, explain
from tests import objectstore
from tests.objectstore import LOCK_KEY, STATE_KEY, UNSET, Project, free_port, many
from tests.objectstore import PUBLISHED as RATINGS
from tests.test_state_chain import GOOD_HEAD, NEWER, UNREADABLE, state_of
from tests.trees import document

pytestmark = pytest.mark.real_world

project = objectstore.project  # the fixture, by name

DENIED: Final = (
    "access denied (403): check the credentials (AWS_ACCESS_KEY_ID, "
    "AWS_SECRET_ACCESS_KEY, AWS_PROFILE) and their permissions"
)
BUCKET_NAME: Final = (
    "--publish: a bucket name holds only letters, digits, '.', '-' and '_'; a port goes in "
    "AWS_ENDPOINT_URL"
)
# The lock's requests around a publish that changes something: it is created, the
# store refuses a second create and a wrong If-Match, and it is released (a PUT).
LOCKING: Final = 4
# The same where a publish released it before: the create is refused, the lock read
# back, and taken over with If-Match.
TAKING: Final = LOCKING + 2
# Tests that need one store only: marked with the store they run on and why.
NO_STORE: Final = pytest.mark.stores("SeaweedFS", why="it never reaches the store")
SIGNATURES: Final = pytest.mark.stores("SeaweedFS", why="moto's server checks no signature")
# The client's own logic and decisions: the requests it makes run on every store in
# another test or case.
ONE_STORE: Final = pytest.mark.stores("SeaweedFS", why="the client's own logic")


def summary(project: Project, uploaded: int, removed: int, unchanged: int, requests: int) -> str:
    return (
        f"published {project.target}: {uploaded:,} uploaded, {removed:,} removed, "
        f"{unchanged:,} unchanged; {requests:,} request{'' if requests == 1 else 's'}"
    )


# What a publish stores


# The objects a user put in the bucket, which a publish leaves alone, by name in the prefix.
THEIRS: Final = {
    "CNAME": b"ratings.example.com\n",
    "away/notes.txt": b"mine\n",
    "away/api/articles/7/rating/draft.json": b"{}\n",
    ".ratings-api-notes": b"not the state\n",
}


@pytest.mark.parametrize("prefix", ["p/", pytest.param("", marks=ONE_STORE)], ids=["p", "root"])
def test_check_and_publish_store_each_file_then_only_what_changed(
    project: Project, prefix: str
) -> None:
    """In a fresh checkout, as CI runs it, --check and --publish write no folder; the first
    publish uploads each file with its bytes and headers; a publish of the same sends one
    request; one of a change, what changed; one without two articles removes them; the
    objects the user put there stay, in the prefix or outside it."""
    project.target = f"s3://{project.bucket}/{prefix}".rstrip("/")
    theirs = {prefix + name: body for name, body in THEIRS.items()}
    elsewhere = {"elsewhere/away/api/articles/2/rating/index.json": b"{}\n"} if prefix else {}
    for key, body in (theirs | elsewhere).items():
        project.store.client().put_object(Bucket=project.bucket, Key=key, Body=body)
    project.ratings.write_text(RATINGS.replace("2: [2, 3, 2]", "2: [2, 3, 9]"))
    done = project.run(["--publish", project.target])  # nothing built, nothing asked
    assert done == (2, "", "ratings.yaml:5:13: article 2: rating 9 is outside the scale 1..5\n")
    assert project.proxy.requests == []
    project.ratings.write_text(RATINGS)
    # No such bucket: for --check and --repair (not "no state", nor "12 to upload"), and for
    # a publish without a region, which asks the bucket for its own first.
    for option, environ in [("--check", {}), ("--repair", {}), ("--quiet", NO_REGION)]:
        done = project.run([option, "--publish", "s3://no-such-bucket/p"], **environ)
        assert done == (2, "", "s3://no-such-bucket/p: no such bucket\n")
    done = project.run(["--check", "--publish", project.target])
    assert (done.code, done.out) == (1, "")
    assert done.err.splitlines() == [  # no state: a listing of one object tells a bucket from none
        f"checked {project.target}: 12 to upload, 0 to remove, 0 unchanged; 2 requests",
        *(f"  upload {document(n)}" for n in (1, 2, 7, 31)),
        "  upload 404.html",
        "  upload assets/front-page.css",
        "  upload assets/front-page.js",
        "  upload assets/star.svg",
        "  upload away/api/embed.d.ts",
        "  upload away/api/embed.js",
        "  and 2 more",
    ]
    assert project.objects() == theirs | elsewhere
    project.proxy.requests.clear()
    done = project.run(["--publish", project.target])
    # state read (before the lock, and in it), the bucket looked for, state marked,
    # 12 files, state written
    assert done.out == summary(project, 12, 0, 0, 17 + LOCKING) + "\n", done.err
    assert (done.code, done.err, len(project.proxy.requests)) == (0, "", 17 + LOCKING)
    assert [path.name for path in project.folder.iterdir()] == ["ratings.yaml"]
    project.proxy.requests.clear()
    done = project.main("--check", "--publish", project.target)
    assert done.err.startswith(f"{project.output} is out of date: 13 to write, 0 to remove")
    assert (done.code, project.proxy.requests) == (1, [])
    project.output.mkdir()
    (project.output / "CNAME").write_text("ratings.example.com\n")  # the user's: not published
    state = ("GET", f"/{project.bucket}/{prefix}{STATE_KEY}")
    lock = ("PUT", f"/{project.bucket}/{prefix}{LOCK_KEY}")
    # The same bytes, as a publish that builds its folder too; then the document, and the
    # front page, whose table shows its average.
    for rating, changed in [("2: [2, 3, 2]", []), ("2: [2, 3, 3]", [document(2), "index.html"])]:
        project.ratings.write_text(RATINGS.replace("2: [2, 3, 2]", rating))
        project.proxy.requests.clear()
        done = project.main("--publish", project.target)
        assert done.code == 0, done.err
        puts = [("PUT", f"/{project.bucket}/{prefix}{path}") for path in changed]
        marks = [("PUT", state[1])] * 2 if changed else []  # the marks, then the final state
        locking = [lock] * 5 + [("GET", lock[1])]  # taken over from the last, released
        again = [state, *locking] if changed else []  # nothing to do: no lock
        assert sorted(project.proxy.requests) == sorted([state, *again, *marks, *puts])
        counts = (len(changed), 0, 12 - len(changed), len(project.proxy.requests))
        assert done.out.splitlines()[1] == summary(project, *counts)
        project.assert_published(prefix, theirs=theirs)
    for key in project.site(prefix).keys() - theirs.keys():  # their bytes: assert_published
        kind = ERROR_TYPE if key.endswith("404.html") else CONTENT_TYPES[PurePosixPath(key).suffix]
        head = project.store.client().head_object(Bucket=project.bucket, Key=key)
        assert (head["ContentType"], head["CacheControl"]) == (kind, CACHE_CONTROL), key
    project.ratings.write_text(RATINGS.replace("  2: [2, 3, 2]\n", "").replace("  31: []\n", ""))
    project.proxy.requests.clear()
    done = project.run(["--check", "--publish", project.target])
    assert done.err.splitlines() == [
        f"checked {project.target}: 2 to upload, 2 to remove, 8 unchanged; 1 request",
        "  upload away/api/openapi.json",
        "  upload index.html",
        f"  remove {document(2)}",
        f"  remove {document(31)}",
    ]
    assert (done.code, project.proxy.requests) == (1, [state])
    done = project.main("--publish", project.target)
    assert done.code == 0, done.err
    assert done.out.splitlines()[1] == summary(project, 2, 2, 8, 7 + TAKING)
    assert project.objects("elsewhere/") == elsewhere
    project.assert_published(prefix, theirs=theirs)
    checked = f"checked {project.target}: 0 to upload, 0 to remove, 10 unchanged; 1 request\n"
    assert project.main("--check", "--publish", project.target) == (0, checked, "")


# The removal guard and --repair


@ONE_STORE
def test_the_removal_guard_stops_before_changing_anything(project: Project) -> None:
    """By default past 256 removals, or past --max-removals."""
    project.ratings.write_text(many(300))
    assert project.publish().code == 0
    project.ratings.write_text(many(43))
    for options, limit in [([], 256), (["--max-removals", "14"], 14)]:
        project.proxy.requests.clear()
        done = project.publish(*options)
        refused = (
            f"{project.target}: this publish would remove 257 files, more than "
            f"--max-removals {limit}; nothing was changed. If that is meant, run again with "
            "--max-removals 257\n"
        )
        assert done == (2, "", refused)
        # The state read twice, the lock taken over and released: no other write.
        writes = {path for method, path in project.proxy.requests if method != "GET"}
        assert len(project.proxy.requests) == 2 + TAKING
        assert writes == {f"/{project.bucket}/p/{LOCK_KEY}"}
    assert project.publish("--max-removals", "257").code == 0
    project.assert_published()


@pytest.mark.parametrize(
    ("options", "line"),
    [
        (["--repair"], "--repair goes only with --publish"),
        (["--max-removals", "3"], "--max-removals goes only with --publish"),
        (["--max-removals", "0"], "--max-removals goes only with --publish"),
        (["--publish-workers", "4"], "--publish-workers goes only with --publish"),
        (["--check", "--repair"], "--repair goes only with --publish"),
        (["--lock-timeout", "5"], "--lock-timeout goes only with --publish"),
        (["--single-publisher"], "--single-publisher goes only with --publish"),
    ],
)
def test_publishing_options_without_publish_are_refused(
    options: list[str], line: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--output", str(tmp_path / "never-written"), *options])
    usage, _, error = capsys.readouterr().err.partition("\ngenerate.py: error: ")
    said = (exit_.value.code, usage.partition(" [")[0], error, list(tmp_path.iterdir()))
    assert said == (2, "usage: generate.py", line + "\n", [])


def test_a_state_it_cannot_read_stops_it_and_repair_puts_back_what_was_changed_by_hand(
    project: Project,
) -> None:
    """A publish trusts the state; one it cannot read stops it; --repair lists the bucket
    and writes a state of this version, and over a right bucket writes the state alone."""
    assert project.publish().code == 0
    client = project.store.client()
    client.delete_object(Bucket=project.bucket, Key="p/" + document(7))
    client.put_object(Bucket=project.bucket, Key="p/index.html", Body=b"defaced\n")
    # The right bytes, without the headers (binary/octet-stream), as a plain `aws s3 cp`.
    star = (project.output / "assets/star.svg").read_bytes()
    client.put_object(Bucket=project.bucket, Key="p/assets/star.svg", Body=star)
    client.put_object(Bucket=project.bucket, Key="p/" + document(99), Body=b"{}\n")
    client.put_object(Bucket=project.bucket, Key="p/away/mine.json", Body=b"{}\n")
    assert project.publish().code == 0
    assert project.objects()["p/index.html"] == b"defaced\n"  # the state was trusted
    newer = state_of({**GOOD_HEAD, "format": 3, "shards": 4})
    for data, line in [(b"not gzip", UNREADABLE), (newer, NEWER)]:
        client.put_object(Bucket=project.bucket, Key=f"p/{STATE_KEY}", Body=data)
        assert project.publish() == (2, "", line.replace("s3://b/p", project.target) + "\n")
    project.proxy.requests.clear()
    done = project.main("--publish", project.target, "--repair")
    assert done.code == 0, done.err
    # get (and again, If-None-Match), list, a HEAD of each of the 11 files of the site
    # listed, mark, 3 puts, delete, state
    assert done.out.splitlines()[1] == summary(project, 3, 1, 9, 20 + TAKING)
    assert [method for method, _ in project.proxy.requests].count("HEAD") == 11
    assert len(project.proxy.requests) == 20 + TAKING
    project.assert_published(theirs={"p/away/mine.json": b"{}\n"})
    head = client.head_object(Bucket=project.bucket, Key="p/assets/star.svg")
    assert (head["ContentType"], head["CacheControl"]) == ("image/svg+xml", CACHE_CONTROL)
    client.put_object(Bucket=project.bucket, Key=f"p/{STATE_KEY}", Body=b"not gzip")
    done = project.main("--publish", project.target, "--repair")
    # get (twice), list, a HEAD of each file, state: every object was right
    assert done.out.splitlines()[1] == summary(project, 0, 0, 12, 16 + TAKING)
    project.assert_published(theirs={"p/away/mine.json": b"{}\n"})


# Failures: one line, exit 2, no secret, nothing written

NO_KEYS: Final = {"AWS_ACCESS_KEY_ID": UNSET, "AWS_SECRET_ACCESS_KEY": UNSET}
NO_REGION: Final = {"AWS_REGION": UNSET, "AWS_DEFAULT_REGION": UNSET}


NOT_A_URL: Final = (
    "the endpoint (AWS_ENDPOINT_URL, or endpoint_url in the AWS "
    "config) is not a URL such as https://HOST[:PORT]"
)
REACH: Final = "cannot reach {AWS_ENDPOINT_URL} (AWS_ENDPOINT_URL)"
# Each case: the variables changed ({port}: one nothing listens on; {proxy}: the proxy's,
# which answers in plain HTTP), and the line after the target (the AWS config file:
# CONFIGS, or empty).
FAILURES: Final[dict[str, tuple[dict[str, str], str]]] = {
    "wrong-secret": ({"AWS_SECRET_ACCESS_KEY": "wrong-secret-2f7c1a"}, DENIED),
    "unknown-key": ({"AWS_ACCESS_KEY_ID": "nobody"}, DENIED),
    "no-credentials": (
        {"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": ""},
        "no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE",
    ),
    # Without a region: the bucket is asked for its own first.
    "unreachable": ({"AWS_ENDPOINT_URL": "http://127.0.0.1:{port}", **NO_REGION}, REACH),
    "key-in-endpoint": ({"AWS_ENDPOINT_URL": "key:secret-9c1e@127.0.0.1:9000"}, NOT_A_URL),
    "port-out-of-range": ({"AWS_ENDPOINT_URL": "http://127.0.0.1:99999"}, NOT_A_URL),
    "ftp-endpoint-in-config": ({"AWS_ENDPOINT_URL": UNSET}, NOT_A_URL),
    "endpoint-half-an-ipv6": ({"AWS_ENDPOINT_URL": "http://[::1:9000"}, NOT_A_URL),
    "endpoint-with-a-query": ({"AWS_ENDPOINT_URL": "http://127.0.0.1:9000/?x=1"}, NOT_A_URL),
    "https-to-plain-http": ({"AWS_ENDPOINT_URL": "https://127.0.0.1:{proxy}"}, REACH),
    "region-not-a-name": (
        {"AWS_REGION": "us east"},
        (
            "the region (AWS_REGION, or region in the AWS config) must be a name such as us-east-1, "
            "found 'us east'"
        ),
    ),
    "half-a-key-pair": (
        {"AWS_SECRET_ACCESS_KEY": UNSET},
        "the credentials are incomplete: AWS_SECRET_ACCESS_KEY is missing",
    ),
    "broken-config": ({}, "{folder}/aws-config: not a valid AWS config or credentials file"),
    "profile-without-credentials": (
        {"AWS_PROFILE": "role", **NO_KEYS},
        "the profile's settings give no credentials (InvalidConfigError): correct the profile",
    ),
    "unknown-profile": (
        {"AWS_PROFILE": "nope"},
        "AWS_PROFILE: no profile 'nope' in the AWS config or credentials files",
    ),
    "sso": (
        {"AWS_PROFILE": "team", **NO_KEYS},
        (
            "the profile's sign-in has expired or was never made: run aws sso login, then publish "
            "again"
        ),
    ),
    "credential-process": (
        {"AWS_PROFILE": "broken", **NO_KEYS},
        "the profile's credential_process failed: run it by hand to see why",
    ),
}
CONFIGS: Final = {
    "sso": (
        "[profile team]\nsso_start_url = https://example.awsapps.com/start\n"
        "sso_region = eu-west-1\nsso_account_id = 123456789012\nsso_role_name = Publisher\n"
    ),
    "credential-process": f'[profile broken]\ncredential_process = "{sys.executable}" -c "exit(1)"\n',
    "ftp-endpoint-in-config": "[default]\nendpoint_url = ftp://127.0.0.1:9000\n",
    "broken-config": "[default\nregion = eu-west-1\n",
    "profile-without-credentials": (
        "[profile role]\nrole_arn = arn:aws:iam::1:role/r\ncredential_source = Nowhere\n"
    ),
}
# The cases that reach the store; the others are refused before it.
AT_THE_STORE: Final = {"wrong-secret": SIGNATURES, "unknown-key": SIGNATURES}


@pytest.mark.parametrize(
    "case", [pytest.param(case, marks=AT_THE_STORE.get(case, NO_STORE)) for case in FAILURES]
)
def test_a_failure_is_one_line_and_exit_2(project: Project, case: str) -> None:
    changes, line = FAILURES[case]
    (project.folder / "aws-config").write_text(CONFIGS.get(case, ""))
    ports = {"port": free_port(), "proxy": project.proxy.endpoint.rpartition(":")[2]}
    environ = {name: value.format(**ports) for name, value in changes.items()}
    environ |= {"AWS_CONFIG_FILE": str(project.folder / "aws-config"), "HOME": str(project.folder)}
    done = project.publish(**environ)
    line = line.format(folder=project.folder, **environ)
    assert done == (2, "", f"{project.target}: {line}\n")  # the whole line: no secret in it
    assert project.objects() == {}


@pytest.mark.parametrize(
    ("error", "line"),
    [
        ("PermissionDeniedError", "s3://b/p: " + DENIED),
        ("UnauthenticatedError", "s3://b/p: " + DENIED),
        ("FileNotFoundError", "s3://b/p: no such bucket"),
        ("GenericError", "s3://b/p: cannot reach https://store.example:9000 (AWS_ENDPOINT_URL)"),
        ("NotSupportedError", "s3://b/p: a request failed: NotSupportedError"),
    ],
)
def test_each_store_failure_is_one_line_without_secrets(error: str, line: str) -> None:
    from obstore import exceptions

    kind = getattr(exceptions, error, None) or getattr(builtins, error)
    failure = kind("Error performing PUT https://key:secret@store.example:9000/b/p/k")
    assert explain(Destination("b", "p"), failure, "https://key:secret@store.example:9000") == line


@pytest.mark.parametrize(
    ("url", "error"),
    [
        ("https://bucket/p", "--publish: expected s3://BUCKET[/PREFIX], found 'https://bucket/p'"),
        ("s3:///p", "--publish: expected s3://BUCKET[/PREFIX], found 's3:///p'"),
        (
            "s3://b/a/../c",
            "--publish: the prefix must not have empty, . or .. parts: 's3://b/a/../c'",
        ),
        ("s3://[bucket1/x", "--publish: expected s3://BUCKET[/PREFIX], found 's3://[bucket1/x'"),
        ("s3://bucket1:80/x", BUCKET_NAME),
        ("s3://key:secret-9c1e@bucket1/x", BUCKET_NAME),
    ],
)
@NO_STORE
def test_a_bad_target_is_refused_before_building(project: Project, url: str, error: str) -> None:
    assert project.main("--publish", url) == (2, "", error + "\n")
    assert not project.output.exists()


@NO_STORE
@pytest.mark.parametrize("missing", ["boto3", "obstore"])
def test_without_its_libraries_the_error_names_the_requirements(
    project: Project, missing: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, missing, None)
    needs = "--publish needs boto3 and obstore: pip install 'ratings-api[publish]' "
    line = needs + "(in a checkout: -r requirements-publish.txt)\n"
    assert project.main("--publish", project.target) == (2, "", line)
    assert not project.output.exists()


# Interruptions, races and lost replies converge


@ONE_STORE
@pytest.mark.parametrize(
    ("stop", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGKILL, -9)]
)
def test_a_publish_stopped_midway_says_so_at_once(
    project: Project, stop: signal.Signals, code: int
) -> None:
    """Stopped while the store stalls: at once, the marks written."""
    project.ratings.write_text(many(60))
    server = project.store.process
    assert server is not None
    held = project.proxy.on("PUT", "p/" + document(30), "hold")  # its answer never comes
    process = project.start("--quiet", "--publish-workers", "2")
    try:
        assert held.reached.wait(timeout=60), "it never got that far"
        server.send_signal(signal.SIGSTOP)
        time.sleep(0.3)  # every upload in flight now waits for the store
        process.send_signal(stop)
        out, err = process.communicate(timeout=2)  # at once: else TimeoutExpired
    finally:
        server.send_signal(signal.SIGCONT)
    interrupted = (
        f"{project.target}: publish interrupted by {stop.name}; each object is whole, "
        "old or new: publish again to finish\n"
    )
    assert (process.returncode, out, err) == (code, "", "" if code < 0 else interrupted)
    # --publish-workers: the uploads in flight at once; and, once stopped, its lock's release
    assert project.proxy.peak == 2 + (stop != signal.SIGKILL)
    # every file marked; the next publish, of any catalogue, converges as it does after a
    # holder stopped midway (test_publish_lock.py), its lock taken over after the lease
    assert list(project.state().values()).count(False) == 60 + 8


def test_a_publish_that_another_overtook_plans_again(project: Project) -> None:
    """A publishes whole while B, holding the lock, waits for its state's answer. A takes
    no lock (--single-publisher): the state's versions alone keep it true.

    B's conditional write meets A's state: the store refuses it, B reads it, plans again
    and finishes, and the state tells the truth. (One overtaken while it uploads plans
    again the same way: test_state_chain.py's, in memory.)
    """
    assert project.publish().code == 0
    held = project.proxy.on("GET", f"p/{STATE_KEY}", "hold", 1)  # the read in B's lock
    project.use("b", many(10).replace("  2: [3]", "  2: [5, 5]") + "  11: [4]\n")
    process = project.start()
    try:
        assert held.reached.wait(timeout=60), "B never got that far"
        project.use("a", many(9).replace("  2: [3]", "  2: [1, 1]") + "  12: [3]\n")
        assert project.publish("--single-publisher") == (0, "", "")
        lock = f"p/{LOCK_KEY}"
        project.assert_published(theirs={lock: project.objects()[lock]})  # B holds it
    finally:
        held.release.set()
    out, err = process.communicate(timeout=60)
    assert (process.returncode, err) == (0, "")
    assert out.endswith("; planned 2 times, as another publish wrote the state meanwhile\n")
    project.use("b")
    project.assert_published()
    assert project.publish("--check").code == 0
    project.use("a")
    assert project.publish("--check").code == 1


@SIGNATURES
def test_without_a_region_the_requests_are_signed_for_the_buckets_own(project: Project) -> None:
    """AWS names a bucket's region in x-amz-bucket-region: the proxy adds it here.

    The endpoint comes from the AWS config file, as every AWS tool reads it.
    """
    project.proxy.added_headers["x-amz-bucket-region"] = "eu-west-3"
    config = project.folder / "aws-config"
    config.write_text(f"[default]\nendpoint_url = {project.proxy.endpoint}\n")
    done = project.publish(AWS_CONFIG_FILE=str(config), AWS_ENDPOINT_URL=UNSET, **NO_REGION)
    assert done == (0, "", "")
    project.assert_published()
    # The bucket asked for its region once, unsigned; every other request signed for it.
    assert [each for each in project.proxy.regions if each[1] != "eu-west-3"] == [("HEAD", "")]
