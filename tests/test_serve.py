"""Serving, beyond the contract suite's points: the app called in this process as a WSGI
server calls it (files replaced while they are served, ranges of a file too large to
keep, WhiteNoise's assets, what it imports), and ``--serve`` run as a user runs it (its
lines, its watcher, an input gone for a moment, an absolute-form request, an interpreter
without what macOS's and Windows's Pythons lack). The same absolute-form request runs on
gunicorn."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Final

import pytest

from ratings_api.contract import COMMON_HEADERS
from ratings_api.devserver import POLL_SECONDS
from ratings_api.server import KEEP_BYTES, create_app
from tests.contract import NOT_FOUND, Host, call_app, raw_request, request, wait_until
from tests.hosts import start_gunicorn, start_serve
from tests.served import serving
from tests.test_portable import on_windows
from tests.trees import built

RACE_SECONDS: Final = 0.5
GOOD: Final = "articles:\n  7: [5]\n"
A_BASE_URL: Final = ("--base-url", "https://a.example")

# The app in this process


def test_a_file_removed_by_a_rebuild_is_a_404(tmp_path: Path) -> None:
    app = create_app(str(built(tmp_path, "articles:\n  1: [5]\n  2: [4]\n", *A_BASE_URL)))
    assert call_app(app, "GET", b"/away/api/articles/2/rating/")[0] == 200
    built(tmp_path, "articles:\n  1: [5]\n", *A_BASE_URL)
    assert call_app(app, "GET", b"/away/api/articles/2/rating/")[::2] == (404, NOT_FOUND)


def test_a_root_linked_to_another_release_is_served_with_no_restart(tmp_path: Path) -> None:
    """A deploy that points the site's link at a new release: every document is the new one's,
    those asked for before and those not."""
    releases = [tmp_path / "1", tmp_path / "2"]
    for release, rating in zip(releases, (5, 1), strict=True):
        release.mkdir()
        built(release, f"articles:\n  7: [{rating}]\n  8: [{rating}]\n", *A_BASE_URL)
    (tmp_path / "site").symlink_to(releases[0] / "site")
    app = create_app(str(tmp_path / "site"))
    assert call_app(app, "GET", b"/away/api/articles/7/rating/")[0] == 200
    (tmp_path / "next").symlink_to(releases[1] / "site")
    (tmp_path / "next").replace(tmp_path / "site")
    for article in (7, 8):
        document = releases[1] / "site" / "away" / "api" / "articles" / str(article) / "rating"
        url = f"/away/api/articles/{article}/rating/".encode()
        assert call_app(app, "GET", url)[::2] == (200, (document / "index.json").read_bytes())


LINK: Final = b"(a link to ../secret.txt)"  # made a link, not a file of these bytes
# What a rebuild renames into place again and again while the app serves it: a file the
# app keeps in memory, one it reads at each request, and a link, never followed.
SWAPS: Final = {
    "kept": (b"short\n", b"a longer version\n"),
    "read": (b"short\n", b"a version too long to keep\n" * (KEEP_BYTES // 20)),
    "link": (b"plain\n", LINK),
}


@pytest.mark.parametrize("versions", SWAPS.values(), ids=SWAPS)
def test_the_answers_describe_the_bytes_sent_while_a_rebuild_replaces_the_file(
    versions: tuple[bytes, bytes], tmp_path: Path
) -> None:
    """Replaced between the lookup and the open: never its old length, never a link's target."""
    site = tmp_path / "site"
    site.mkdir()
    (tmp_path / "secret.txt").write_bytes(b"a file outside the site\n")

    def swap(turn: int) -> None:
        if versions[turn % 2] == LINK:
            os.symlink("../secret.txt", site / "next")
        else:
            (site / "next").write_bytes(versions[turn % 2])
        os.replace(site / "next", site / "file.txt")

    swap(0)
    app = create_app(str(site))
    done = threading.Event()

    def swapping() -> None:
        turn = 1
        while not done.is_set():
            swap(turn)
            turn += 1

    thread = threading.Thread(target=swapping)
    thread.start()
    try:
        deadline = time.monotonic() + RACE_SECONDS
        while time.monotonic() < deadline:
            status, headers, body = call_app(app, "GET", b"/file.txt")
            if status == 404 and LINK in versions:
                assert body == NOT_FOUND
            else:
                assert (status, dict(headers)["Content-Length"]) == (200, str(len(body)))
                assert body in set(versions) - {LINK}
    finally:
        done.set()
        thread.join()


LARGE: Final = bytes(range(256)) * (KEEP_BYTES // 32)  # longer than a read, too
# A Range of a file read at each request, and the status and bytes it gets.
LARGE_RANGES: Final = {
    "bytes=0-9": (206, LARGE[:10]),
    "bytes=-1": (206, LARGE[-1:]),
    "bytes=1000-": (206, LARGE[1000:]),
    "bytes=0-1,3-4": (200, LARGE),
    "bytes=": (200, LARGE),
    f"bytes={len(LARGE)}-": (416, b""),
}


@pytest.mark.parametrize("asked", LARGE_RANGES)
def test_a_file_too_large_to_keep_is_read_in_ranges(asked: str, tmp_path: Path) -> None:
    (tmp_path / "large.bin").write_bytes(LARGE)
    app = create_app(str(tmp_path))

    status, _, body = call_app(app, "GET", b"/large.bin", {"Range": asked})

    assert (status, body) == LARGE_RANGES[asked]


def test_whitenoise_serves_the_assets_with_the_contract_s_headers(tmp_path: Path) -> None:
    """Indexed at start-up, as in production: one added since is the JSON 404. Ranges and
    conditions are WhiteNoise's, as docs/http-api.md says."""
    site = built(tmp_path, GOOD, *A_BASE_URL)
    app = create_app(str(site))
    star = (site / "assets/star.svg").read_bytes()
    (site / "assets/new.svg").write_bytes(star)
    etag = f'"{(site / "assets/star.svg").stat().st_mtime_ns:x}-{len(star):x}"'
    common = list(COMMON_HEADERS)

    found = call_app(app, "GET", b"/assets/star.svg")
    assert (found[0], found[2], found[1][-3:]) == (200, star, common)
    assert [dict(found[1])[name] for name in ("Content-Type", "ETag")] == ["image/svg+xml", etag]
    answers = [  # what the app answers otherwise: docs/http-api.md's first table
        ({"If-None-Match": etag}, 304, b""),
        ({"If-None-Match": f"*, W/{etag}"}, 200, star),  # 304
        ({"Range": "bytes=0-0"}, 416, b""),  # 206 and a byte
        ({"Range": "bytes=-0"}, 206, star),  # 416
        ({"Range": "bytes=0-9", "If-Range": '"another"'}, 206, star[:10]),  # 200, the whole
    ]
    for headers, status, body in answers:
        answer = call_app(app, "GET", b"/assets/star.svg", headers)
        assert (answer[0], answer[2], answer[1][-3:]) == (status, body, common), headers
    assert call_app(app, "GET", b"/assets/new.svg")[::2] == (404, NOT_FOUND)


def test_the_app_imports_neither_the_builder_nor_the_command_line() -> None:
    """gunicorn loads the app alone (and WhiteNoise): no PyYAML, no Jinja2, no reader, no CLI."""
    code = "import ratings_api.server, sys; print(' '.join(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = done.stdout.split()
    assert "ratings_api.server" in loaded
    unwanted = ("yaml", "jinja2", "argparse")
    unwanted += ("ratings_api.loader", "ratings_api.build", "ratings_api.cli")
    assert [name for name in unwanted if name in loaded] == []


# --serve as a user runs it


# Injected as the build runs under --serve: its second and third writes fail as a bug and as a
# full disk would; the others write.
FAILING_WRITES: Final = """\
import ratings_api.writer
real, writes = ratings_api.writer.sync_site, []
def sync_site(*args, **kwargs):
    writes.append(len(writes))
    if len(writes) == 2:
        raise RuntimeError("a bug in a rebuild")
    if len(writes) == 3:
        raise OSError(28, "No space left on device")
    return real(*args, **kwargs)
ratings_api.writer.sync_site = sync_site
"""


def test_serve_rebuilds_on_each_change_and_outlives_a_failed_rebuild(tmp_path: Path) -> None:
    """An input gone for a moment (an editor saving by rename) is no change; a mistake, a bug and
    a machine's error each leave the last good build served, and the watching goes on. In an
    interpreter without what macOS's and Windows's Pythons lack."""
    source = tmp_path / "ratings.yaml"
    windows = partial(on_windows, "--serve", "--port", "0", then=FAILING_WRITES)
    with serving(tmp_path, "articles: {}\n", command=windows) as served:
        source.unlink()
        time.sleep(POLL_SECONDS * 4)  # several polls find no file
        told = ("still serving the last good build", "ratings.yaml changed: built")
        log, process = served.log, served.process
        for count, edit in enumerate(["articles:\n  7: [x]\n", GOOD, f"# edited\n{GOOD}", GOOD]):
            # Saved by rename, as editors save: the watcher never reads a half-written file.
            (tmp_path / "saved").write_text(edit, encoding="utf-8")
            os.replace(tmp_path / "saved", source)
            wait_until(lambda n=count: sum(map(log.read_text().count, told)) > n, process, log)
        reply = request(
            int(served.address.rsplit(":", 1)[1]), "GET", "/away/api/articles/7/rating/"
        )
    lines = [line for line in log.read_text().splitlines() if " - - [" not in line]
    assert lines[0].startswith("built site: 0 articles")
    assert lines[1] == f"Serving site/ at {served.address}/ — no articles yet"
    assert lines[2:4] == [
        "ratings.yaml:2:7: article 7: a rating must be an integer, found 'x'",
        "still serving the last good build",
    ]
    assert lines[4] == "Traceback (most recent call last):"
    assert lines[lines.index("RuntimeError: a bug in a rebuild") + 1 : -1] == [
        "ratings.yaml: the rebuild failed (a bug: please report the traceback above)",
        "still serving the last good build",
        "ratings.yaml: the rebuild failed: [Errno 28] No space left on device",
        "still serving the last good build",
    ]
    assert lines[-1].startswith("ratings.yaml changed: built site: 1 article")
    assert (reply.status, reply.headers["Content-Type"]) == (200, "application/json")
    assert reply.body == (served.site / "away/api/articles/7/rating/index.json").read_bytes()


# An absolute-form target (RFC 9112, 3.2.2) is answered by its path, on --serve as on gunicorn.
SERVERS: Final = {
    "--serve": start_serve,
    "gunicorn": pytest.param(start_gunicorn, marks=pytest.mark.real_world),
}


@pytest.mark.parametrize("start_server", SERVERS.values(), ids=SERVERS)
def test_an_absolute_form_target_is_answered_by_its_path(
    start_server: Callable[[Path], Host], tmp_path: Path
) -> None:
    server = start_server(tmp_path)
    try:
        address = f"http://127.0.0.1:{server.port}"
        rating = raw_request(server.port, f"{address}/away/api/articles/7/rating/".encode())
        no_slash = raw_request(server.port, f"{address}/away/api/articles/7/rating".encode())
        outside = raw_request(server.port, f"{address}/../secret.txt".encode())
    finally:
        server.stop()

    assert (rating.status, rating.body) == (200, server.document(7))
    assert (no_slash.status, no_slash.header("Location")) == (301, "rating/")
    assert (outside.status, outside.body) == (404, NOT_FOUND)
