"""``generate.py --publish``: against a real SeaweedFS, its requests counted by a proxy."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import tracemalloc
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Final

import pytest

from ratings_api import publish as publishing
from ratings_api.build import build
from ratings_api.cli import main
from ratings_api.errors import InputError
from ratings_api.loader import Catalogue
from ratings_api.rating import Renderer
from tests.objectstore import RATINGS as CATALOGUE
from tests.objectstore import CountingProxy, Store, free_port, start_counting_proxy

REPO: Final = Path(__file__).resolve().parent.parent
CACHE_CONTROL: Final = "public, max-age=0, must-revalidate"
STATE_KEY: Final = ".ratings-api/state.gz"
BASE: Final = "https://ratings.example.com"
UNSET: Final = "\0unset"  # a variable's value in Project.environ that removes it
RATINGS: Final = CATALOGUE + "  31: []\n"  # and an article no one has rated yet
TYPES: Final = {
    "index.html": "text/html; charset=utf-8",
    "404.html": "application/json",
    "away/api/openapi.json": "application/json",
    "away/api/embed.js": "text/javascript; charset=utf-8",
    "assets/front-page.css": "text/css; charset=utf-8",
    "assets/front-page.js": "text/javascript; charset=utf-8",
    "assets/star.svg": "image/svg+xml",
}


def document(article_id: int) -> str:
    return f"away/api/articles/{article_id}/rating/index.json"


def many(count: int, first: int = 1) -> str:
    lines = "".join(f"  {n}: [{n % 5 + 1}]\n" for n in range(first, first + count))
    return f"base_url: https://ratings.example.com\nscale: [1, 5]\narticles:\n{lines}"


class Project:
    """A ratings file, its output folder, a bucket and the AWS variables pointing at it."""

    def __init__(self, folder: Path, store: Store, proxy: CountingProxy, bucket: str) -> None:
        self.folder = folder
        self.store = store
        self.proxy = proxy
        self.bucket = bucket
        self.ratings = folder / "ratings.yaml"
        self.output = folder / "site"
        self.ratings.write_text(RATINGS)

    def environ(self, **changes: str) -> dict[str, str]:
        # The test run's own variables (coverage's among them), but none of AWS's.
        environ = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        environ.update(self.store.environ())
        environ["AWS_ENDPOINT_URL"] = self.proxy.endpoint
        environ["AWS_CONFIG_FILE"] = str(self.folder / "no-aws-config")
        environ["AWS_SHARED_CREDENTIALS_FILE"] = str(self.folder / "no-aws-credentials")
        environ.update(changes)
        return {name: value for name, value in environ.items() if value != UNSET}

    def command(self, *options: str) -> list[str]:
        return [
            sys.executable,
            "-W",
            "error",
            str(REPO / "generate.py"),
            "--input",
            str(self.ratings),
            "--output",
            str(self.output),
            *options,
        ]

    def run(self, *options: str, **environ: str) -> subprocess.CompletedProcess[str]:
        """``generate.py`` with ``options`` in a process of its own."""
        return subprocess.run(
            self.command(*options),
            env=self.environ(**environ),
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    def start(self, *options: str, **environ: str) -> subprocess.Popen[str]:
        """``generate.py`` with ``options`` started in a process of its own, its output piped."""
        return subprocess.Popen(
            self.command(*options),
            env=self.environ(**environ),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def publish(
        self, *options: str, target: str | None = None, **environ: str
    ) -> subprocess.CompletedProcess[str]:
        """``generate.py --quiet --publish`` to ``target`` (the bucket, prefix ``p``)."""
        target = target or f"s3://{self.bucket}/p"
        return self.run("--quiet", "--publish", target, *options, **environ)

    def objects(self, prefix: str = "") -> dict[str, bytes]:
        """Every object in the bucket (under ``prefix``), read back over S3."""
        client = self.store.client()
        found = {}
        for page in client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=prefix
        ):
            for item in page.get("Contents", []):
                body = client.get_object(Bucket=self.bucket, Key=item["Key"])["Body"].read()
                found[item["Key"]] = body
        return found

    def site(self, prefix: str = "p/") -> dict[str, bytes]:
        """What the bucket must hold: the built files, but _redirects and the build's record."""
        return {
            prefix + path.relative_to(self.output).as_posix(): path.read_bytes()
            for path in self.output.rglob("*")
            if path.is_file() and path.name != "_redirects" and not path.name.startswith(".")
        }

    def state(self, prefix: str = "p/") -> dict[str, bool]:
        """Each file the state records, and whether it knows its bytes."""
        body = self.store.client().get_object(Bucket=self.bucket, Key=prefix + STATE_KEY)
        return recorded(body["Body"].read())

    def assert_published(self, prefix: str = "p/") -> None:
        """The bucket under ``prefix`` holds exactly the site and its state."""
        stored = self.objects(prefix)
        state = recorded(stored.pop(prefix + STATE_KEY))
        assert stored == self.site(prefix)
        assert state == dict.fromkeys((key[len(prefix) :] for key in stored), True)


@pytest.fixture(scope="module")
def proxy(object_store: Store) -> Iterator[CountingProxy]:
    counting = start_counting_proxy(object_store.endpoint)
    yield counting
    counting.stop()


@pytest.fixture
def project(
    tmp_path: Path, object_store: Store, proxy: CountingProxy, request: pytest.FixtureRequest
) -> Project:
    name = request.node.name
    digest = hashlib.md5(name.encode()).hexdigest()[:8]  # parametrized names differ at the end
    bucket = re.sub(r"[^a-z0-9]+", "-", name.lower())[:40].strip("-") + "-" + digest
    object_store.create_bucket(bucket)
    proxy.clear()
    return Project(tmp_path, object_store, proxy, bucket)


def recorded(state: bytes) -> dict[str, bool]:
    """The files a state object records, and whether it knows each one's bytes."""
    return dict(publishing.decode_state(state).entries())


def summary(uploaded: int, removed: int, unchanged: int, requests: int, target: str) -> str:
    return (
        f"published {target}: {uploaded:,} uploaded, {removed:,} removed, "
        f"{unchanged:,} unchanged; {requests:,} request{'' if requests == 1 else 's'} in "
    )


# What a publish stores


def test_first_publish_stores_each_file_with_its_bytes_and_headers(project: Project) -> None:
    done = project.run("--publish", f"s3://{project.bucket}/p")
    assert done.returncode == 0, done.stderr
    # state read, state marked, 11 files, state written
    assert done.stdout.splitlines()[1].startswith(summary(11, 0, 0, 14, f"s3://{project.bucket}/p"))
    assert project.proxy.count() == 14
    project.assert_published()
    expected = {document(n): "application/json" for n in (1, 2, 7, 31)} | TYPES
    assert {key[2:] for key in project.site()} == set(expected)
    client = project.store.client()
    for path, kind in expected.items():
        head = client.head_object(Bucket=project.bucket, Key=f"p/{path}")
        assert (head["ContentType"], head["CacheControl"]) == (kind, CACHE_CONTROL)
        with urllib.request.urlopen(project.store.url(project.bucket, f"p/{path}")) as answer:
            assert answer.headers["Content-Type"] == kind
            assert answer.headers["Cache-Control"] == CACHE_CONTROL
            assert answer.read() == (project.output / path).read_bytes()
    assert (project.output / "404.html").read_bytes() == b'{"detail": "Not found."}\n'


def test_a_bucket_without_prefix(project: Project) -> None:
    done = project.publish(target=f"s3://{project.bucket}")
    assert done.returncode == 0, done.stderr
    project.assert_published(prefix="")


def test_a_second_publish_of_the_same_site_makes_one_request(project: Project) -> None:
    assert project.publish().returncode == 0
    project.proxy.clear()
    done = project.run("--publish", f"s3://{project.bucket}/p")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1].startswith(summary(0, 0, 11, 1, f"s3://{project.bucket}/p"))
    assert project.proxy.requests == [("GET", f"/{project.bucket}/p/{STATE_KEY}")]


def test_one_change_uploads_what_changed(project: Project) -> None:
    assert project.publish().returncode == 0
    before = project.objects()
    project.ratings.write_text(RATINGS.replace("2: [2, 3, 2]", "2: [2, 3, 3]"))
    project.proxy.clear()
    done = project.run("--publish", f"s3://{project.bucket}/p")
    assert done.returncode == 0, done.stderr
    changed = {key for key, body in project.site().items() if before.get(key) != body}
    # The document, and the front page, whose table shows its average.
    assert changed == {"p/" + document(2), "p/index.html"}
    puts = sorted(path for method, path in project.proxy.requests if method == "PUT")
    state = f"/{project.bucket}/p/{STATE_KEY}"
    assert puts == sorted([state, state, *(f"/{project.bucket}/{key}" for key in changed)])
    assert project.proxy.count() == 1 + 2 + len(changed)
    assert done.stdout.splitlines()[1].startswith(
        summary(
            len(changed), 0, 11 - len(changed), 1 + 2 + len(changed), f"s3://{project.bucket}/p"
        )
    )
    project.assert_published()


def test_removed_articles_go_and_the_users_objects_stay(project: Project) -> None:
    client = project.store.client()
    theirs = {
        "p/CNAME": b"ratings.example.com\n",
        "p/away/notes.txt": b"mine\n",
        "p/away/api/articles/7/rating/draft.json": b"{}\n",
        "elsewhere/away/api/articles/2/rating/index.json": b"{}\n",
        "p/.ratings-api-notes": b"not the state\n",
    }
    for key, body in theirs.items():
        client.put_object(Bucket=project.bucket, Key=key, Body=body)
    (project.folder / "site").mkdir()
    (project.output / "CNAME").write_text("ratings.example.com\n")  # the user's: not published
    assert project.publish().returncode == 0
    project.ratings.write_text(RATINGS.replace("  2: [2, 3, 2]\n", "").replace("  31: []\n", ""))
    done = project.run("--publish", f"s3://{project.bucket}/p")
    assert done.returncode == 0, done.stderr
    assert "2 removed" in done.stdout
    stored = project.objects()
    for key, body in theirs.items():
        assert stored.pop(key) == body
    assert "p/" + document(2) not in stored
    site = project.site()
    site.pop("p/CNAME")
    state = recorded(stored.pop("p/" + STATE_KEY))
    assert stored == site
    assert state == dict.fromkeys((key[2:] for key in stored), True)


# The removal guard and --check


def test_the_removal_guard_stops_before_changing_anything(project: Project) -> None:
    project.ratings.write_text(many(20))
    assert project.publish().returncode == 0
    before = project.objects()
    project.ratings.write_text(many(5))
    project.proxy.clear()
    done = project.publish("--max-removals", "14")
    assert done.returncode == 2
    assert done.stderr == (
        f"s3://{project.bucket}/p: this publish would remove 15 files, more than "
        "--max-removals 14; nothing was changed. If that is meant, run again with "
        "--max-removals 15\n"
    )
    assert project.proxy.count("PUT") == project.proxy.count("POST") == 0
    assert project.objects() == before
    assert project.publish("--max-removals", "15").returncode == 0
    project.assert_published()


def test_the_default_guard_is_256(project: Project) -> None:
    project.ratings.write_text(many(300))
    assert project.publish().returncode == 0
    project.ratings.write_text(many(43))
    done = project.publish()
    assert done.returncode == 2
    assert "would remove 257 files, more than --max-removals 256" in done.stderr


def test_check_changes_nothing_and_says_what_differs(project: Project) -> None:
    target = f"s3://{project.bucket}/p"
    assert project.run("--quiet").returncode == 0  # built, not published
    done = project.run("--check", "--publish", target)
    assert (done.returncode, done.stdout) == (1, "")
    lines = done.stderr.splitlines()
    assert lines[0].startswith(
        f"checked {target}: 11 to upload, 0 to remove, 0 unchanged; 1 request in "
    )
    assert lines[1:] == [
        *(f"  upload {document(n)}" for n in (1, 2, 7, 31)),
        "  upload 404.html",
        "  upload assets/front-page.css",
        "  upload assets/front-page.js",
        "  upload assets/star.svg",
        "  upload away/api/embed.js",
        "  upload away/api/openapi.json",
        "  and 1 more",
    ]
    assert project.objects() == {}
    assert project.publish().returncode == 0
    project.ratings.write_text(RATINGS.replace("  31: []\n", ""))
    assert project.run("--quiet").returncode == 0
    project.proxy.clear()
    done = project.run("--check", "--publish", target)
    assert done.returncode == 1
    assert done.stderr.splitlines()[1:] == [
        "  upload away/api/openapi.json",
        "  upload index.html",
        f"  remove {document(31)}",
    ]
    assert [method for method, _ in project.proxy.requests] == ["GET"]
    project.publish()
    done = project.run("--check", "--publish", target)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"checked {target}: 0 to upload, 0 to remove, 10 unchanged; ")


def test_check_of_an_output_not_built_says_so(project: Project) -> None:
    done = project.run("--check", "--publish", f"s3://{project.bucket}/p")
    assert done.returncode == 1
    assert done.stderr.startswith(f"{project.output} is out of date: 12 to write, 0 to remove")
    assert project.proxy.count() == 0


# --repair: a bucket changed by hand


def test_repair_lists_the_bucket_and_puts_back_what_was_changed_by_hand(
    project: Project,
) -> None:
    assert project.publish().returncode == 0
    client = project.store.client()
    client.delete_object(Bucket=project.bucket, Key="p/" + document(7))
    client.put_object(Bucket=project.bucket, Key="p/index.html", Body=b"defaced\n")
    client.put_object(Bucket=project.bucket, Key="p/" + document(99), Body=b"{}\n")
    client.put_object(Bucket=project.bucket, Key="p/away/mine.json", Body=b"{}\n")
    done = project.publish()
    assert done.returncode == 0
    assert project.objects()["p/index.html"] == b"defaced\n"  # the state was trusted
    done = project.run("--publish", f"s3://{project.bucket}/p", "--repair")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1].startswith(
        summary(2, 1, 9, 7, f"s3://{project.bucket}/p")  # get, list, mark, 2 puts, delete, state
    )
    stored = project.objects()
    assert stored.pop("p/away/mine.json") == b"{}\n"
    stored.pop("p/" + STATE_KEY)
    assert stored == project.site()


# Failures: one line, exit 2, no secret


def test_wrong_credentials(project: Project) -> None:
    secret = "wrong-secret-2f7c1a"
    done = project.publish(AWS_SECRET_ACCESS_KEY=secret)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"s3://{project.bucket}/p: access denied (SignatureDoesNotMatch): check the "
        "credentials (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_PROFILE) and their "
        "permissions\n"
    )
    assert secret not in done.stderr + done.stdout
    done = project.publish(AWS_ACCESS_KEY_ID="nobody")
    assert done.returncode == 2
    assert project.store.secret_key not in done.stderr + done.stdout
    assert project.objects() == {}


def test_no_credentials(project: Project) -> None:
    done = project.publish(AWS_ACCESS_KEY_ID="", AWS_SECRET_ACCESS_KEY="")
    assert (done.returncode, done.stderr) == (
        2,
        (
            f"s3://{project.bucket}/p: no credentials: set AWS_ACCESS_KEY_ID and "
            "AWS_SECRET_ACCESS_KEY, or AWS_PROFILE\n"
        ),
    )


def test_a_missing_bucket(project: Project) -> None:
    done = project.publish(target="s3://no-such-bucket/p")
    assert (done.returncode, done.stderr) == (2, "s3://no-such-bucket/p: no such bucket\n")


def test_an_unreachable_endpoint(project: Project) -> None:
    port = free_port()
    done = project.publish(AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}")
    assert (done.returncode, done.stderr) == (
        2,
        f"s3://{project.bucket}/p: cannot reach http://127.0.0.1:{port} (AWS_ENDPOINT_URL)\n",
    )


@pytest.mark.parametrize(
    ("url", "error"),
    [
        ("https://bucket/p", "--publish: expected s3://BUCKET[/PREFIX], found 'https://bucket/p'"),
        ("s3:///p", "--publish: expected s3://BUCKET[/PREFIX], found 's3:///p'"),
        (
            "s3://b/a/../c",
            "--publish: the prefix must not have empty, . or .. parts: 's3://b/a/../c'",
        ),
    ],
)
def test_a_bad_target_is_refused_before_building(project: Project, url: str, error: str) -> None:
    done = project.run("--publish", url)
    assert (done.returncode, done.stdout, done.stderr) == (2, "", error + "\n")
    assert not project.output.exists()


@pytest.mark.parametrize("missing", ["boto3", "obstore"])
def test_without_its_libraries_the_error_names_the_requirements(
    project: Project, missing: str
) -> None:
    code = (
        f"import sys; sys.modules[{missing!r}] = None; from ratings_api.cli import main; "
        "raise SystemExit(main(sys.argv[1:]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, *project.command("--publish", "s3://b/p")[4:]],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert (done.returncode, done.stdout, done.stderr) == (
        2,
        "",
        "--publish needs boto3 and obstore: pip install -r requirements-publish.txt\n",
    )
    assert not project.output.exists()


# Interruptions and races converge


def test_a_publish_killed_midway_converges_when_run_again(project: Project) -> None:
    project.ratings.write_text(many(600))
    assert project.publish().returncode == 0
    project.ratings.write_text(many(600, first=301))  # 300 removed, 300 new, 300 changed?
    assert project.run("--quiet").returncode == 0
    project.proxy.clear()
    process = subprocess.Popen(
        project.command(
            "--quiet",
            "--publish",
            f"s3://{project.bucket}/p",
            "--max-removals",
            "300",
            "--publish-workers",
            "2",
        ),
        env=project.environ(),
    )
    deadline = time.monotonic() + 60
    while project.proxy.count("PUT") < 100 and time.monotonic() < deadline:
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert 100 <= project.proxy.count("PUT") < 302, "killed too late to test anything"
    assert project.proxy.peak == 2  # --publish-workers: the uploads in flight at once
    state = project.state()
    assert sum(1 for known in state.values() if not known) == 300 + 300 + 2
    # The next publish, even of another catalogue, ends with exactly its site.
    project.ratings.write_text(many(500, first=250))
    done = project.publish("--max-removals", "1000")
    assert done.returncode == 0, done.stderr
    project.assert_published()


@pytest.mark.parametrize(("stop", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_interrupted_publish_converges(project: Project, stop: signal.Signals, code: int) -> None:
    project.ratings.write_text(many(600))
    assert project.run("--quiet").returncode == 0
    process = project.start(
        "--quiet", "--publish", f"s3://{project.bucket}/p", "--publish-workers", "2"
    )
    deadline = time.monotonic() + 60
    while project.proxy.count("PUT") < 100 and time.monotonic() < deadline:
        time.sleep(0.01)
    process.send_signal(stop)
    stopped = time.monotonic()
    stdout, stderr = process.communicate(timeout=30)
    assert time.monotonic() - stopped < 5, "the publish went on after the signal"
    assert project.proxy.count("PUT") < 600, "interrupted too late to test anything"
    assert (process.returncode, stdout, stderr) == (
        code,
        "",
        (
            f"s3://{project.bucket}/p: publish interrupted by {stop.name}; each object is whole, "
            "old or new: publish again to finish\n"
        ),
    )
    done = project.publish()
    assert done.returncode == 0, done.stderr
    project.assert_published()


def test_a_store_going_away_midway_exits_2_and_the_next_publish_converges(
    project: Project,
) -> None:
    project.ratings.write_text(many(800))
    assert project.run("--quiet").returncode == 0
    process = project.start(
        "--quiet",
        "--publish",
        f"s3://{project.bucket}/p",
        "--publish-workers",
        "2",
        AWS_ENDPOINT_URL=project.store.endpoint,
    )
    client = project.store.client()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        listed = client.list_objects_v2(Bucket=project.bucket, Prefix="p/away/")
        if listed.get("KeyCount", 0) >= 50:
            break
        time.sleep(0.05)
    project.store.stop()
    _, errors = process.communicate(timeout=120)
    assert process.returncode == 2
    assert errors == (
        f"s3://{project.bucket}/p: cannot reach {project.store.endpoint} (AWS_ENDPOINT_URL)\n"
    )
    project.store.restart()
    done = project.publish()
    assert done.returncode == 0, done.stderr
    project.assert_published()


def test_two_publishes_at_once_converge(project: Project, monkeypatch: pytest.MonkeyPatch) -> None:
    """One publish runs whole while another is between its uploads and its state."""
    for name, value in project.environ().items():
        monkeypatch.setenv(name, value)
    first, second = project.folder / "first", project.folder / "second"
    first.mkdir()
    second.mkdir()
    (first / "ratings.yaml").write_text(many(30))
    (second / "ratings.yaml").write_text(many(30, first=11))
    target = publishing.Target(project.bucket, "p")
    for folder in (first, second):
        assert (
            main(
                [
                    "--quiet",
                    "--input",
                    str(folder / "ratings.yaml"),
                    "--output",
                    str(folder / "site"),
                ]
            )
            == 0
        )
    ran: list[str] = []

    codes: list[int] = []

    def second_publish() -> None:
        options = ["--quiet", "--input", str(second / "ratings.yaml")]
        options += ["--output", str(second / "site"), "--publish", f"s3://{project.bucket}/p"]
        codes.append(main([*options, "--max-removals", "100"]))

    def run_second(stage: str, done: int, total: int) -> None:
        if not ran:
            ran.append(stage)
            # A thread of its own: this callback runs on the first publish's event loop.
            thread = threading.Thread(target=second_publish)
            thread.start()
            thread.join()
            assert codes == [0]

    result = build(str(first / "ratings.yaml"), str(first / "site"), base_url=None, environ={})
    outcome = publishing.publish(
        publishing.site_of(result),
        target,
        max_removals=100,
        workers=1,
        progress=run_second,
    )
    assert ran
    assert outcome.plans == 2  # its marks met the second's final state: it planned again
    for folder in (first, second, first):
        project.output = folder / "site"
        project.ratings = folder / "ratings.yaml"
        done = project.publish("--max-removals", "100")
        assert done.returncode == 0, done.stderr
        project.assert_published()


CHANGED: Final = "base_url: https://ratings.example.com\nscale: [1, 5]\narticles:\n{}"


def catalogue(project: Project, name: str, articles: dict[int, list[int]]) -> Path:
    """A folder with a ratings file of ``articles`` (its output goes beside it)."""
    folder = project.folder / name
    folder.mkdir()
    lines = "".join(f"  {n}: {ratings}\n" for n, ratings in articles.items())
    (folder / "ratings.yaml").write_text(CHANGED.format(lines))
    return folder


def use(project: Project, folder: Path) -> None:
    """Make ``project``'s next runs publish the catalogue of ``folder``."""
    project.ratings, project.output = folder / "ratings.yaml", folder / "site"


def test_a_publish_that_read_the_state_before_another_ran_whole_replans(
    project: Project,
) -> None:
    """B reads the state, then A publishes whole, then B goes on: B's plan is stale.

    B's state read is answered only after A has finished (the proxy holds the
    answer): B's conditional writes fail, and B must read and plan again.
    """
    base = {n: [n % 5 + 1] for n in range(1, 11)}
    first = catalogue(project, "first", base)
    a = catalogue(project, "a", {**{n: base[n] for n in range(1, 10)}, 2: [1, 1], 12: [3]})
    b = catalogue(project, "b", {**base, 2: [5, 5], 11: [4]})
    use(project, first)
    assert project.publish().returncode == 0
    held = project.proxy.hold_reply("GET", f"p/{STATE_KEY}")
    use(project, b)
    process = project.start("--quiet", "--publish", f"s3://{project.bucket}/p")
    try:
        assert held.reached.wait(timeout=60), "B never read the state"
        use(project, a)
        done = project.publish()
        assert (done.returncode, done.stderr) == (0, "")
        project.assert_published()
    finally:
        held.release.set()
    stdout, stderr = process.communicate(timeout=120)
    assert (process.returncode, stdout, stderr) == (0, "", "")
    use(project, b)
    project.assert_published()
    # The state tells the truth: B is current, A is not.
    assert project.publish("--check").returncode == 0
    use(project, a)
    assert project.publish("--check").returncode == 1


def test_a_state_it_cannot_read_stops_it_and_repair_replaces_it(project: Project) -> None:
    assert project.publish().returncode == 0
    client = project.store.client()
    client.put_object(Bucket=project.bucket, Key="p/" + STATE_KEY, Body=b"not gzip")
    done = project.publish()
    assert (done.returncode, done.stderr) == (
        2,
        (
            f"{STATE_KEY}: not a state this version can read; --repair lists the bucket "
            "and writes a new one\n"
        ),
    )
    done = project.publish("--repair")
    assert done.returncode == 0, done.stderr
    project.assert_published()


# Failures: one line, exit 2, no secret


def setting_refused(project: Project, line: str, **environ: str) -> None:
    """A publish with ``environ`` exits 2 with ``line``, having written nothing."""
    done = project.publish(**environ)
    assert (done.returncode, done.stdout, done.stderr) == (2, "", line + "\n")
    assert project.objects() == {}


def test_an_unknown_profile(project: Project) -> None:
    setting_refused(
        project,
        f"s3://{project.bucket}/p: AWS_PROFILE: no profile 'nope' in the AWS config or "
        "credentials files",
        AWS_PROFILE="nope",
    )


def test_an_endpoint_with_a_key_in_it_is_refused_without_showing_it(project: Project) -> None:
    setting_refused(
        project,
        f"s3://{project.bucket}/p: the endpoint (AWS_ENDPOINT_URL, or endpoint_url in the AWS "
        "config) is not a URL such as https://HOST[:PORT]",
        AWS_ENDPOINT_URL="key:secret-9c1e@127.0.0.1:9000",
    )


def test_a_profile_whose_sign_in_is_missing(project: Project) -> None:
    config = project.folder / "aws-config"
    config.write_text(
        "[profile team]\nsso_start_url = https://example.awsapps.com/start\n"
        "sso_region = eu-west-1\nsso_account_id = 123456789012\nsso_role_name = Publisher\n"
    )
    setting_refused(
        project,
        f"s3://{project.bucket}/p: the profile's sign-in has expired or was never made: "
        "run aws sso login, then publish again",
        AWS_PROFILE="team",
        AWS_CONFIG_FILE=str(config),
        AWS_ACCESS_KEY_ID=UNSET,
        AWS_SECRET_ACCESS_KEY=UNSET,
        HOME=str(project.folder),
    )


def state_of(head: dict[str, object], columns: bytes = b"") -> bytes:
    return gzip.compress(json.dumps(head).encode() + b"\n" + columns)


UNREADABLE: Final = (
    f"{STATE_KEY}: not a state this version can read; --repair lists the bucket "
    "and writes a new one"
)
NEWER: Final = (
    f"{STATE_KEY}: written by a newer version of ratings-api (state format 3; this one reads "
    "2): upgrade it, or --repair lists the bucket and writes a state of this version"
)
GOOD_HEAD: Final = {
    "articles": 0,
    "cache_control": CACHE_CONTROL,
    "files": {},
    "format": 2,
    "stamp": "",
}


def test_a_state_lacking_a_key_or_newer_is_one_line_and_repair_replaces_it(
    project: Project,
) -> None:
    client = project.store.client()
    newer = state_of({**GOOD_HEAD, "format": 3, "stamp": "", "shards": 4})
    no_header = state_of({key: value for key, value in GOOD_HEAD.items() if key != "cache_control"})
    for data, line in [
        (newer, NEWER),
        (no_header, UNREADABLE),
    ]:
        client.put_object(Bucket=project.bucket, Key=f"p/{STATE_KEY}", Body=data)
        done = project.publish()
        assert (done.returncode, done.stdout, done.stderr) == (2, "", line + "\n")
    done = project.publish("--repair")
    assert (done.returncode, done.stderr) == (0, "")
    project.assert_published()


def test_a_lost_reply_to_its_own_state_write_is_not_a_race(project: Project) -> None:
    """The store writes the marks, the answer is lost, the SDK's retry finds them written."""
    dropped = project.proxy.drop_reply("PUT", f"p/{STATE_KEY}")
    done = project.publish()
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert dropped.reached.is_set()
    state = f"/{project.bucket}/p/{STATE_KEY}"
    seen = [request for request in project.proxy.requests if request[1].startswith(state)]
    # read; marks, lost; their retry (412); read back: ours; final state
    assert [method for method, _ in seen] == ["GET", "PUT", "PUT", "GET", "PUT"]
    project.assert_published()


def test_without_a_region_the_uploads_are_signed_for_the_buckets_own(project: Project) -> None:
    """AWS names a bucket's region in x-amz-bucket-region: the proxy adds it here."""
    project.proxy.added_headers["x-amz-bucket-region"] = "eu-west-3"
    done = project.publish(AWS_REGION=UNSET, AWS_DEFAULT_REGION=UNSET)
    assert (done.returncode, done.stderr) == (0, "")
    project.assert_published()
    regions = {
        (
            method,
            "state" if path.endswith(STATE_KEY) else "bucket" if path.count("/") == 1 else "file",
            region,
        )
        for method, path, region in project.proxy.regions
    }
    assert regions == {
        ("GET", "state", "us-east-1"),
        ("PUT", "state", "us-east-1"),
        ("HEAD", "bucket", "us-east-1"),
        ("PUT", "file", "eu-west-3"),
    }


@pytest.mark.parametrize(("stop", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_stop_signal_ends_it_at_once_while_the_store_stalls(
    project: Project, stop: signal.Signals, code: int
) -> None:
    project.ratings.write_text(many(400))
    assert project.run("--quiet").returncode == 0
    process = project.start(
        "--quiet", "--publish", f"s3://{project.bucket}/p", "--publish-workers", "4"
    )
    weed = project.store.process
    assert weed is not None
    deadline = time.monotonic() + 60
    while project.proxy.count("PUT") < 50 and time.monotonic() < deadline:
        time.sleep(0.01)
    weed.send_signal(signal.SIGSTOP)
    try:
        time.sleep(0.5)  # every upload in flight now waits for the store
        process.send_signal(stop)
        stopped = time.monotonic()
        stdout, stderr = process.communicate(timeout=60)
        took = time.monotonic() - stopped
    finally:
        weed.send_signal(signal.SIGCONT)
    assert took < 2, f"stopped {took:.1f} s after {stop.name}"
    assert (process.returncode, stdout, stderr) == (
        code,
        "",
        (
            f"s3://{project.bucket}/p: publish interrupted by {stop.name}; each object is whole, "
            "old or new: publish again to finish\n"
        ),
    )
    assert 50 <= project.proxy.count("PUT") < 400, "interrupted too late to test anything"
    done = project.publish()
    assert (done.returncode, done.stderr) == (0, "")
    project.assert_published()


def test_publish_and_serve_do_not_go_together(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--serve", "--publish", "s3://b/p"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.endswith(
        "generate.py: error: --publish and --serve do not go together\n"
    )


# The state and the plan, without a store


def site_of_numbers(numbers: dict[int, tuple[int, int]], base_url: str = BASE) -> publishing.Site:
    catalogue = Catalogue(
        ids=list(numbers),
        sums=[total for total, _ in numbers.values()],
        counts=[count for _, count in numbers.values()],
    )
    return publishing.Site(catalogue, Renderer(base_url), {"index.html": b"<!doctype html>\n"})


def published(site: publishing.Site) -> publishing.State:
    """The state of ``site``, once written to the bucket and read back."""
    return publishing.decode_state(publishing.encode_state(site.state()[0]))


def uploads(todo: publishing.Plan) -> list[str]:
    return [path for path, _ in todo.uploads]


def test_a_state_read_back_is_the_state_written() -> None:
    site = site_of_numbers({7: (29, 6), 2**62: (0, 0), 3: (-5, 1)})
    state = published(site)

    assert (state.stamp, list(state.ids), list(state.sums), list(state.counts)) == (
        Renderer(BASE).stamp,
        [7, 2**62, 3],
        [29, 0, -5],
        [6, 0, 1],
    )
    assert state.files == {"index.html": hashlib.md5(b"<!doctype html>\n").hexdigest()}
    assert dict(state.entries()) == {
        document(7): True,
        document(2**62): True,
        document(3): True,
        "index.html": True,
    }
    assert publishing.encode_state(state) == publishing.encode_state(site.state()[0])


def test_the_same_site_plans_nothing() -> None:
    site = site_of_numbers({n: (n % 7, n % 3) for n in range(1, 10_001)})

    todo, final = publishing.plan(site, published(site))

    assert (todo.uploads, todo.removals, todo.unchanged) == ([], [], 10_001)
    assert publishing.encode_state(final) == publishing.encode_state(site.state()[0])


@pytest.mark.parametrize("place", [0, 4095, 4096, 9999])
def test_one_number_changed_anywhere_uploads_that_document(place: int) -> None:
    numbers = {n: (n % 7, n % 3) for n in range(1, 10_001)}
    before = published(site_of_numbers(numbers))
    article = place + 1
    numbers[article] = (numbers[article][0] + 1, numbers[article][1])

    todo, _ = publishing.plan(site_of_numbers(numbers), before)

    assert (uploads(todo), todo.removals, todo.unchanged) == ([document(article)], [], 10_000)
    assert todo.uploads == [(document(article), place)]


def test_articles_added_moved_and_removed() -> None:
    before = published(site_of_numbers({1: (5, 1), 2: (4, 1), 3: (3, 1), 4: (2, 1)}))

    todo, _ = publishing.plan(site_of_numbers({4: (2, 1), 9: (1, 1), 1: (5, 1), 3: (3, 2)}), before)

    assert uploads(todo) == [document(9), document(3)]
    assert todo.removals == [document(2)]
    assert todo.unchanged == 3  # 4, 1 and index.html


def test_another_base_url_uploads_every_document() -> None:
    numbers = {1: (5, 1), 2: (4, 1)}
    before = published(site_of_numbers(numbers))

    todo, _ = publishing.plan(site_of_numbers(numbers, "https://other.example.com"), before)

    assert (uploads(todo), todo.removals, todo.unchanged) == ([document(1), document(2)], [], 1)


def test_numbers_past_64_bits_are_recorded_by_digest_and_back() -> None:
    small = {1: (5, 1), 2: (4, 1)}
    large = {1: (5, 1), 2: (2**70, 2**64)}
    first = published(site_of_numbers(small))

    todo, final = publishing.plan(site_of_numbers(large), first)

    assert (uploads(todo), todo.removals) == ([document(1), document(2)], [])
    assert (list(final.ids), sorted(final.files)) == (
        [],
        sorted([*map(document, (1, 2)), "index.html"]),
    )
    state = publishing.decode_state(publishing.encode_state(final))
    assert publishing.plan(site_of_numbers(large), state)[0].uploads == []
    todo, _ = publishing.plan(site_of_numbers({1: (5, 1)}), state)
    assert (uploads(todo), todo.removals) == ([document(1)], [document(2)])


def test_marking_records_each_touched_file_as_unknown() -> None:
    state = published(site_of_numbers({1: (5, 1), 2: (4, 1)}))

    marks = publishing.marked(state, [document(2), document(8), "index.html", "new.css"])

    assert dict(marks.entries()) == {
        document(1): True,
        document(2): False,
        document(8): False,
        "index.html": False,
        "new.css": False,
    }
    assert dict(state.entries())[document(2)]  # the state read is left as it was


def test_a_state_written_with_other_headers_knows_no_file() -> None:
    state = site_of_numbers({1: (5, 1)}).state()[0]
    data = gzip.decompress(publishing.encode_state(state))
    other = data.replace(CACHE_CONTROL.encode(), b"public, max-age=60", 1)

    read = publishing.decode_state(gzip.compress(other))

    assert dict(read.entries()) == {document(1): False, "index.html": False}


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda data: data[:-9], id="truncated-gzip"),
        pytest.param(lambda data: gzip.compress(gzip.decompress(data)[:-8]), id="short-column"),
        pytest.param(
            lambda data: gzip.compress(b'{"files": {}, "format": 1}\n'), id="first-format"
        ),
        pytest.param(lambda data: gzip.compress(b"[]\n"), id="not-an-object"),
        pytest.param(lambda data: gzip.compress(b"not json\n"), id="not-json"),
        pytest.param(lambda data: gzip.compress(b"{}"), id="no-line"),
        pytest.param(lambda data: state_of({**GOOD_HEAD, "format": True}), id="format-true"),
        pytest.param(lambda data: state_of({**GOOD_HEAD, "articles": -1}), id="negative-size"),
        *(
            pytest.param(
                lambda data, key=key: state_of(
                    {name: value for name, value in GOOD_HEAD.items() if name != key}
                ),
                id=f"no-{key}",
            )
            for key in GOOD_HEAD
        ),
        pytest.param(
            lambda data: gzip.compress(
                gzip.decompress(data).replace(b'"files":{', b'"files":{"a":1,', 1)
            ),
            id="digest-not-text",
        ),
    ],
)
def test_a_damaged_state_is_refused_with_one_line(damage: Callable[[bytes], bytes]) -> None:
    data = publishing.encode_state(site_of_numbers({1: (5, 1)}).state()[0])

    with pytest.raises(InputError) as error:
        publishing.decode_state(damage(data))

    assert str(error.value) == (
        f"{STATE_KEY}: not a state this version can read; --repair lists the bucket "
        "and writes a new one"
    )


def test_a_state_of_a_newer_format_says_so() -> None:
    with pytest.raises(InputError) as error:
        publishing.decode_state(state_of({**GOOD_HEAD, "format": 3, "shards": 4}))

    assert str(error.value) == NEWER


def test_each_write_carries_a_token_and_the_plan_ignores_it() -> None:
    site = site_of_numbers({1: (5, 1)})
    state = replace(site.state()[0], token="f00d")

    read = publishing.decode_state(publishing.encode_state(state))

    assert read.token == "f00d"
    assert publishing.plan(site, read)[0].uploads == []
    assert json.loads(
        gzip.decompress(publishing.encode_state(site.state()[0])).split(b"\n")[0]
    ) == {
        **GOOD_HEAD,
        "articles": 1,
        "files": {"index.html": hashlib.md5(b"<!doctype html>\n").hexdigest()},
        "stamp": Renderer(BASE).stamp,
    }


def test_a_first_publish_plans_every_file_without_a_path_each() -> None:
    site = site_of_numbers({n: (n, 1) for n in range(1, 100_001)})
    tracemalloc.start()
    try:
        todo, _ = publishing.plan(site, publishing.State())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()

    assert len(todo.uploads) == 100_001
    assert todo.uploads[0] == (document(1), 0)
    assert todo.uploads[-2:] == [(document(100_000), 99_999), ("index.html", -1)]
    # A column of places: a list of (path, place) would take about 15 MB. The state's
    # three 64-bit columns, copied from the catalogue's lists, take 2.4 MB.
    assert peak < 4_000_000


@pytest.mark.parametrize(
    ("error", "line"),
    [
        (
            "ExpiredToken",
            (
                "s3://b/p: the credentials have expired (ExpiredToken): get new ones "
                "(AWS_SESSION_TOKEN, or aws sso login), then publish again"
            ),
        ),
        ("NoRegionError", "s3://b/p: no region: set AWS_REGION, or region in the AWS config"),
        (
            "CredentialRetrievalError",
            "s3://b/p: the profile's credential_process failed: run it by hand to see why",
        ),
    ],
)
def test_other_sdk_failures_are_one_line(error: str, line: str) -> None:
    from botocore import exceptions

    failure: Exception
    if error == "ExpiredToken":
        answer = {"Error": {"Code": error}, "ResponseMetadata": {"HTTPStatusCode": 400}}
        failure = exceptions.ClientError(answer, "GetObject")  # type: ignore[arg-type]
    elif error == "NoRegionError":
        failure = exceptions.NoRegionError()
    else:
        failure = exceptions.CredentialRetrievalError(provider="process", error_msg="secret")

    assert publishing._explain(publishing.Target("b", "p"), failure) == line


class ContestedBucket:
    """A bucket whose state another publish rewrites before each of this one's writes."""

    target = publishing.Target("b", "p")
    requests = 0

    def __init__(self) -> None:
        self.reads = 0

    def read_state(self, *, repair: bool = False) -> publishing.Read:
        self.reads += 1
        return publishing.Read(publishing.State(), f'"v{self.reads}"')

    def write_state(self, state: publishing.State, version: str | None) -> str | None:
        return None  # the condition failed: another publish wrote the state


def test_a_state_that_keeps_changing_stops_it_after_ten_plans() -> None:
    bucket = ContestedBucket()
    options = publishing.Options(
        check=False, repair=False, max_removals=256, workers=4, progress=None
    )

    with pytest.raises(InputError) as error:
        publishing._publish(bucket, site_of_numbers({1: (5, 1)}), options)  # type: ignore[arg-type]

    assert str(error.value) == ("s3://b/p: the state keeps changing: is another publish running?")
    assert bucket.reads == publishing.ATTEMPTS + 1


def test_a_publish_that_planned_again_says_so() -> None:
    todo = publishing.Plan([("index.html", -1)], [], 3)
    outcome = publishing.Outcome(todo, 9, plans=2)

    line = publishing.describe(publishing.Target("b", "p"), outcome, 1.5, check=False)

    assert line == (
        "published s3://b/p: 1 uploaded, 0 removed, 3 unchanged; 9 requests in 1.50 s; "
        "planned 2 times, as another publish wrote the state meanwhile"
    )


DENIED: Final = (
    "s3://b/p: access denied (403): check the credentials (AWS_ACCESS_KEY_ID, "
    "AWS_SECRET_ACCESS_KEY, AWS_PROFILE) and their permissions"
)


@pytest.mark.parametrize(
    ("error", "line"),
    [
        (
            "PermissionDeniedError",
            DENIED,
        ),
        (
            "UnauthenticatedError",
            DENIED,
        ),
        ("NotFoundError", "s3://b/p: no such bucket"),
        ("GenericError", "s3://b/p: cannot reach https://store.example:9000 (AWS_ENDPOINT_URL)"),
        ("NotSupportedError", "s3://b/p: an upload failed: NotSupportedError"),
    ],
)
def test_a_failed_upload_is_one_line_without_secrets(error: str, line: str) -> None:
    from obstore import exceptions

    text = (
        "Error performing PUT https://key:secret@store.example:9000/b/p/k after 4 retries"
        if error != "GenericError"
        else "HTTP error: error sending request for url (https://store.example:9000/b/p/k)"
    )
    failure = getattr(exceptions, error)(text)

    explained = publishing._explain_upload(
        publishing.Target("b", "p"), "https://key:secret@store.example:9000", failure
    )

    assert explained == line
