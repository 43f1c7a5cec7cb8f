"""Serving, beyond the contract suite's points: the app called in this process as a WSGI
server calls it (no site, files replaced while they are served, ranges of a file too large to
keep, WhiteNoise's assets, what it imports), and ``--serve`` run as a user runs it (its
lines, its watcher, an input gone for a moment, a failed rebuild, Ctrl-C, files it cannot
serve, a site lost, an absolute-form request, an interpreter without what macOS's and
Windows's Pythons lack). The same absolute-form request runs on gunicorn."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from functools import partial
from pathlib import Path
from typing import Final

import pytest

from ratings_api.contract import COMMON_HEADERS, ERROR_TYPE, SERVER_ERROR
from ratings_api.devserver import POLL_SECONDS
from ratings_api.errors import InputError
from ratings_api.server import KEEP_BYTES, create_app
from tests.contract import NOT_FOUND, RATINGS, SECRET, STOP_SECONDS, Host, call_app, wait_until
from tests.hosts import start_gunicorn
from tests.served import serving
from tests.test_portable import on_windows
from tests.trees import built, document

RACE_SECONDS: Final = 0.5
A_BASE_URL: Final = ("--base-url", "https://a.example")
R7: Final = "/away/api/articles/7/rating/"

# The app in this process


def test_a_root_linked_to_another_release_is_served_with_no_restart(tmp_path: Path) -> None:
    """No app before the first release; then a deploy that points the site's link at a new
    release: every document is the new one's, those asked for before and those not."""
    site = tmp_path / "site"
    with pytest.raises(InputError) as caught:
        create_app(str(site))
    assert str(caught.value) == f"{site}: no such folder: build the site first (python generate.py)"
    releases = [tmp_path / "1", tmp_path / "2"]
    for release, rating in zip(releases, (5, 1), strict=True):
        release.mkdir()
        built(release, f"articles:\n  7: [{rating}]\n  8: [{rating}]\n", *A_BASE_URL)
    site.symlink_to(releases[0] / "site")
    app = create_app(str(site))
    assert call_app(app, "GET", R7.encode())[0] == 200
    (tmp_path / "next").symlink_to(releases[1] / "site")
    (tmp_path / "next").replace(site)
    for article in (7, 8):
        url = f"/away/api/articles/{article}/rating/".encode()
        assert call_app(app, "GET", url)[::2] == (200, (site / document(article)).read_bytes())


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

    (site / "file.txt").write_bytes(versions[0])
    app = create_app(str(site))
    done = threading.Event()

    def swapping() -> None:
        turn = 1
        while not done.is_set():
            if versions[turn % 2] == LINK:
                os.symlink("../secret.txt", site / "next")
            else:
                (site / "next").write_bytes(versions[turn % 2])
            os.replace(site / "next", site / "file.txt")
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
    site = built(tmp_path, "articles:\n  7: [5]\n", *A_BASE_URL)
    app = create_app(str(site))
    star = (site / "assets/star.svg").read_bytes()
    (site / "assets/new.svg").write_bytes(star)
    etag = f'"{(site / "assets/star.svg").stat().st_mtime_ns:x}-{len(star):x}"'

    found = call_app(app, "GET", b"/assets/star.svg")
    assert (found[0], found[2], found[1][-3:]) == (200, star, [*COMMON_HEADERS])
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
        assert (answer[0], answer[2], answer[1][-3:]) == (status, body, [*COMMON_HEADERS]), headers
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


# Injected as --serve runs: its third and fourth writes (the second and third rebuilds that
# get that far) fail as a bug and as a full disk would; the others write.
FAILING_WRITES: Final = """\
import itertools, ratings_api.writer
real, writes = ratings_api.writer.sync_site, itertools.count(1)
failures = {3: RuntimeError("a bug in a rebuild"), 4: OSError(28, "No space left on device")}
def sync_site(*args, **kwargs):
    if (failure := failures.get(next(writes))) is not None:
        raise failure
    return real(*args, **kwargs)
ratings_api.writer.sync_site = sync_site
"""
ONE: Final = "articles:\n  7: [1]\n"
# Saved in turn: two articles, a mistake, then one article three times (a bug, a full disk).
EDITS: Final = ["articles:\n  7: [5]\n  8: [4]\n", "articles:\n  7: [x]\n", ONE, f"#\n{ONE}", ONE]


def test_serve_rebuilds_on_each_change_outlives_a_failed_rebuild_and_stops_on_ctrl_c(
    tmp_path: Path,
) -> None:
    """An input gone for a moment (an editor saving by rename) is no change; a mistake, a bug
    and a machine's error each leave the last good build served, and the watching goes on; an
    article a rebuild drops is a 404 at once; Ctrl-C stops it with 0. No base URL anywhere: the
    served address is the base URL. In an interpreter without what macOS's and Windows's
    Pythons lack."""
    source = tmp_path / "ratings.yaml"
    windows = partial(on_windows, "--serve", "--port", "0", then=FAILING_WRITES)
    told = ("still serving the last good build", "ratings.yaml changed: built")
    answers = []
    with serving(tmp_path, "articles: {}\n", command=windows) as served:
        log, process = served.log, served.process
        source.unlink()
        time.sleep(POLL_SECONDS * 4)  # several polls find no file
        for count, edit in enumerate(EDITS):
            # Saved by rename, as editors save: the watcher never reads a half-written file.
            (tmp_path / "saved").write_text(edit, encoding="utf-8")
            os.replace(tmp_path / "saved", source)
            wait_until(lambda n=count: sum(map(log.read_text().count, told)) > n, process, log)
            replies = [served.request("GET", f"/away/api/articles/{n}/rating/") for n in (7, 8)]
            answers.append([(reply.status, reply.body) for reply in replies])
        process.send_signal(signal.SIGINT)
        assert process.wait(STOP_SECONDS) == 0
    seven = f'{{"article_url": "{served.address}/away/api/articles/7/", "id": 7, "rating_sum": '
    assert [status for status, _ in answers[0]] == [200, 200]
    assert answers[0][0][1].startswith(f"{seven}5,".encode())
    assert answers[1:4] == [answers[0]] * 3
    assert answers[4] == [(200, served.document(7)), (404, NOT_FOUND)]
    assert answers[4][0][1].startswith(f"{seven}1,".encode())
    lines = [line for line in log.read_text().splitlines() if " - - [" not in line]
    assert lines[0].startswith("built site: 0 articles")
    assert lines[1] == f"Serving site/ at {served.address}/ — no articles yet"
    assert lines[2].startswith("ratings.yaml changed: built site: 2 articles")
    assert lines[3:6] == [
        "ratings.yaml:2:7: article 7: a rating must be an integer, found 'x'",
        "still serving the last good build",
        "Traceback (most recent call last):",
    ]
    assert lines[lines.index("RuntimeError: a bug in a rebuild") + 1 : -1] == [
        "ratings.yaml: the rebuild failed (a bug: please report the traceback above)",
        "still serving the last good build",
        "ratings.yaml: the rebuild failed: [Errno 28] No space left on device",
        "still serving the last good build",
    ]  # and last, nothing after the rebuild's line: no traceback on Ctrl-C
    assert lines[-1].startswith("ratings.yaml changed: built site: 1 article;")


def answers_absolute_forms_by_their_paths(server: Host) -> None:
    """A rating, and the same without its slash, each asked by an absolute-form target (RFC 9112,
    3.2.2), are answered as their paths are (a path out of the site: the contract's point)."""
    replies = [server.request("GET", f"{server.address}{path}") for path in (R7, R7[:-1])]
    assert [(reply.status, reply.header("Location"), reply.body) for reply in replies] == [
        (200, None, server.document(7)),
        (301, "rating/", b""),
    ]


def test_serve_quiet_says_where_then_only_what_fails(tmp_path: Path) -> None:
    """--quiet: where it serves and an article to try, then only what fails: a FIFO, a socket or
    an unreadable file is the JSON 404, and the site's folder gone from under it a JSON 500,
    with one line and no traceback. An absolute-form target is answered by its path."""
    with serving(tmp_path, RATINGS, "--quiet") as served:
        site = served.site
        answers_absolute_forms_by_their_paths(served)
        os.mkfifo(site / "fifo")
        (site / "unreadable.txt").write_bytes(SECRET)
        (site / "unreadable.txt").chmod(0)
        with socket.socket(socket.AF_UNIX) as listening:
            listening.bind(str(site / "socket"))
            for path in ("/fifo", "/socket", *(["/unreadable.txt"] if os.geteuid() else [])):
                reply = served.request("GET", path)
                assert (reply.status, reply.body) == (404, NOT_FOUND), path
        os.rename(site, tmp_path / "elsewhere")
        for method in ("GET", "HEAD"):
            reply = served.request(method, R7)
            assert (reply.status, reply.body) == (500, SERVER_ERROR if method == "GET" else b"")
            sent = (reply.header("Content-Type"), reply.header("Content-Length"))
            assert sent == (ERROR_TYPE, str(len(SERVER_ERROR)))
            assert reply.header("Access-Control-Allow-Origin") == "*"
        os.rename(tmp_path / "elsewhere", site)
        assert served.request("GET", R7).status == 200
    lost = f"{site}: cannot open the site's folder: No such file or directory"
    assert served.log.read_text() == (
        f"Serving site/ at {served.address}/ — try {served.address}/away/api/articles/1/rating/\n"
        f"GET {R7}: 500: {lost}\nHEAD {R7}: 500: {lost}\n"
    )


@pytest.mark.real_world
def test_gunicorn_answers_an_absolute_form_target_by_its_path(tmp_path: Path) -> None:
    server = start_gunicorn(tmp_path)
    try:
        answers_absolute_forms_by_their_paths(server)
    finally:
        server.stop()
