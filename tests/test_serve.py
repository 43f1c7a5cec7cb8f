"""Serving, beyond the contract suite's points: the app called in this process as a WSGI
server calls it (files replaced while they are served, ranges of a file too large to
keep, what it imports), and ``--serve`` run as a user runs it (its lines, its watcher,
an input gone for a moment, an absolute-form request, an interpreter without what
macOS's and Windows's Pythons lack). The same absolute-form request runs on gunicorn."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import redirect_stderr
from pathlib import Path
from typing import Final

import pytest

from ratings_api import devserver
from ratings_api.build import build
from ratings_api.devserver import POLL_SECONDS
from ratings_api.server import KEEP_BYTES, create_app
from tests.contract import (
    CACHE_CONTROL,
    NOT_FOUND,
    READY_SECONDS,
    SECRET,
    Host,
    call_app,
    make_project,
    raw_request,
    request,
    start,
    stop,
    wait_for,
)
from tests.hosts import SERVING, serve_command, start_gunicorn, start_serve
from tests.served import serving
from tests.test_portable import RATINGS, on_windows

RACE_SECONDS: Final = 0.5
GOOD: Final = "articles:\n  7: [5]\n"
UNREADABLE: Final = "the base URL cannot be read as a URL"

# The app in this process


def test_a_file_removed_by_a_rebuild_is_a_404(tmp_path: Path) -> None:
    source = tmp_path / "ratings.yaml"
    source.write_text("articles:\n  1: [5]\n  2: [4]\n", encoding="utf-8")
    build(str(source), str(tmp_path / "site"), base_url="https://a.example", environ={})
    app = create_app(str(tmp_path / "site"))
    assert call_app(app, "GET", b"/away/api/articles/2/rating/")[0] == 200
    source.write_text("articles:\n  1: [5]\n", encoding="utf-8")
    build(str(source), str(tmp_path / "site"), base_url="https://a.example", environ={})
    assert call_app(app, "GET", b"/away/api/articles/2/rating/")[::2] == (404, NOT_FOUND)


def swapped_answers(
    site: Path, swap: Callable[[int], None]
) -> Iterator[tuple[int, list[tuple[str, str]], bytes]]:
    """The app's answers to ``/file.txt`` for RACE_SECONDS, while another thread calls
    ``swap(1)``, ``swap(2)``... (``swap(0)`` first, before the app starts)."""
    swap(0)
    app = create_app(str(site))
    done = threading.Event()

    def run() -> None:
        turn = 1
        while not done.is_set():
            swap(turn)
            turn += 1

    thread = threading.Thread(target=run)
    thread.start()
    try:
        deadline = time.monotonic() + RACE_SECONDS
        while time.monotonic() < deadline:
            yield call_app(app, "GET", b"/file.txt")
    finally:
        done.set()
        thread.join()


# A file the app keeps in memory, and one it reads at each request.
VERSIONS: Final = {
    "kept": (b"short\n", b"a longer version\n"),
    "read": (b"short\n", b"a version too long to keep\n" * (KEEP_BYTES // 20)),
}


@pytest.mark.parametrize("versions", VERSIONS.values(), ids=VERSIONS)
def test_the_headers_describe_the_bytes_sent_while_a_rebuild_replaces_the_file(
    versions: tuple[bytes, bytes], tmp_path: Path
) -> None:
    """A file renamed into place between the lookup and the open: never its old length."""
    site = tmp_path / "site"
    site.mkdir()

    def replace(turn: int) -> None:
        (tmp_path / "next").write_bytes(versions[turn % 2])
        os.replace(tmp_path / "next", site / "file.txt")

    for status, headers, body in swapped_answers(site, replace):
        assert (status, dict(headers)["Content-Length"]) == (200, str(len(body)))
        assert body in versions


def test_a_link_swapped_in_for_a_file_is_never_followed(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (tmp_path / "secret.txt").write_bytes(SECRET)

    def swap(turn: int) -> None:
        if turn % 2:
            os.symlink("../secret.txt", site / "next")
        else:
            (site / "next").write_bytes(b"plain\n")
        os.replace(site / "next", site / "file.txt")

    for status, _, body in swapped_answers(site, swap):
        assert (status, body) in ((200, b"plain\n"), (404, NOT_FOUND))


LARGE: Final = bytes(range(256)) * (KEEP_BYTES // 32)  # longer than a read, too
# A Range of a file read at each request, and the status and bytes it gets.
LARGE_RANGES: Final = {
    "bytes=0-9": (206, LARGE[:10]),
    "bytes=-1": (206, LARGE[-1:]),
    "bytes=1000-": (206, LARGE[1000:]),
    "bytes=0-1,3-4": (200, LARGE),
    f"bytes={len(LARGE)}-": (416, b""),
}


@pytest.mark.parametrize("asked", LARGE_RANGES)
def test_a_file_too_large_to_keep_is_read_in_ranges(asked: str, tmp_path: Path) -> None:
    (tmp_path / "large.bin").write_bytes(LARGE)
    app = create_app(str(tmp_path))

    status, _, body = call_app(app, "GET", b"/large.bin", {"Range": asked})

    assert (status, body) == LARGE_RANGES[asked]


def test_whitenoise_serves_the_assets_with_the_contract_s_headers(tmp_path: Path) -> None:
    """Indexed at start-up, as in production: one added since is the JSON 404."""
    (tmp_path / "ratings.yaml").write_text(GOOD, encoding="utf-8")
    build(
        str(tmp_path / "ratings.yaml"),
        str(tmp_path / "site"),
        base_url="https://a.example",
        environ={},
    )
    app = create_app(str(tmp_path / "site"))
    star = tmp_path / "site/assets/star.svg"
    (tmp_path / "site/assets/new.svg").write_bytes(star.read_bytes())
    etag = f'"{star.stat().st_mtime_ns:x}-{star.stat().st_size:x}"'

    answers = {
        name: call_app(app, "GET", path, headers)
        for name, path, headers in (
            ("found", b"/assets/star.svg", {}),
            ("not modified", b"/assets/star.svg", {"If-None-Match": etag}),
            ("added since", b"/assets/new.svg", {}),
        )
    }

    common = [("Access-Control-Allow-Origin", "*"), ("X-Content-Type-Options", "nosniff")]
    common += [("Cache-Control", CACHE_CONTROL)]
    status, headers, body = answers["found"]
    assert (status, body, headers[-3:]) == (200, star.read_bytes(), common)
    assert dict(headers)["Content-Type"] == "image/svg+xml"
    assert dict(headers)["ETag"] == etag
    assert answers["not modified"] == (304, [("ETag", etag), *common], b"")
    assert answers["added since"][::2] == (404, NOT_FOUND)
    assert answers["added since"][1][-3:] == common


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


def test_serve_with_no_article_yet_says_so(tmp_path: Path) -> None:
    (tmp_path / "ratings.yaml").write_text("articles: {}\n", encoding="utf-8")
    log = tmp_path / "serve.log"
    process = start(serve_command(), tmp_path, log)
    try:
        port = int(wait_for(SERVING, log, process)[1])
    finally:
        stop(process)
    lines = log.read_text().splitlines()
    assert lines[0].startswith("built site: 0 articles")
    assert lines[1] == f"Serving site/ at http://127.0.0.1:{port}/ — no articles yet"


def test_serve_waits_out_an_input_gone_for_a_moment(tmp_path: Path) -> None:
    """As while an editor saves by rename: no file at a poll is no change, and no error."""
    make_project(tmp_path)
    source = tmp_path / "ratings.yaml"
    log = tmp_path / "serve.log"
    process = start(serve_command(), tmp_path, log)
    try:
        wait_for(SERVING, log, process)
        text = source.read_text(encoding="utf-8")
        source.unlink()
        time.sleep(POLL_SECONDS * 4)  # several polls find no file
        source.write_text(text.replace("7: [5, 4", "7: [1, 4"), encoding="utf-8")
        wait_for(r"^ratings\.yaml changed: built site: 5 articles", log, process)
    finally:
        stop(process)
    lines = log.read_text().splitlines()
    assert [line.split(":")[0] for line in lines[2:]] == ["ratings.yaml changed"], lines


FIXED: Final = "\nratings.yaml changed: built site: 5 articles"


def test_serve_survives_an_unreadable_base_url_and_rebuilds_once_fixed(tmp_path: Path) -> None:
    """Issue 15: this value killed the watcher thread, and the site was never rebuilt again."""
    source = make_project(tmp_path)
    good = source.read_text(encoding="utf-8")
    log = tmp_path / "serve.log"
    process = start(serve_command(), tmp_path, log)
    try:
        wait_for(SERVING, log, process)
        source.write_text("base_url: 'http://[::1'\n" + good, encoding="utf-8")
        wait_for(r"^still serving the last good build$", log, process)
        source.write_text("base_url: https://fixed.example\n" + good, encoding="utf-8")
        wait_for(FIXED.strip(), log, process)
    finally:
        stop(process)
    lines = log.read_text().splitlines()
    assert lines[2:4] == [
        f"ratings.yaml:1:11: base_url: {UNREADABLE} (Invalid IPv6 URL), found 'http://[::1'",
        "still serving the last good build",
    ]
    assert lines[4].startswith(FIXED.strip()), lines
    assert len(lines) == 5, lines
    document = tmp_path / "site/away/api/articles/7/rating/index.json"
    assert document.read_bytes().startswith(
        b'{"article_url": "https://fixed.example/away/api/articles/7/"'
    )


def watch_with(rebuild: Callable[[], str], edits: int, source: Path) -> tuple[list[str], str]:
    """Run the watcher over ``source`` for ``edits`` edits; what it said, and its stderr."""
    said: list[str] = []
    stop_watching = threading.Event()
    errors = io.StringIO()
    with redirect_stderr(errors):
        watcher = threading.Thread(
            target=devserver._watch,
            args=(
                str(source),
                devserver._signature(str(source)),
                rebuild,
                stop_watching,
                said.append,
            ),
        )
        watcher.start()
        try:
            for edit in range(edits):
                source.write_text(f"# edit {edit}\n" + GOOD, encoding="utf-8")
                deadline = time.monotonic() + READY_SECONDS
                while len(said) + errors.getvalue().count("still serving") <= edit:
                    assert watcher.is_alive(), errors.getvalue()
                    assert time.monotonic() < deadline, errors.getvalue()
                    time.sleep(0.02)
        finally:
            stop_watching.set()
            watcher.join()
    return said, errors.getvalue()


def test_the_watcher_outlives_any_exception_of_a_rebuild(tmp_path: Path) -> None:
    """A bug is reported loudly, a machine's error in one line, and the watching goes on."""
    source = tmp_path / "ratings.yaml"
    source.write_text(GOOD, encoding="utf-8")
    outcomes: list[BaseException | str] = [
        RuntimeError("a bug in a rebuild"),
        OSError(28, "No space left on device"),
        "built site: 1 article",
    ]

    def rebuild() -> str:
        outcome = outcomes.pop(0)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    said, errors = watch_with(rebuild, 3, source)

    assert said == [f"{source} changed: built site: 1 article"]
    assert errors.startswith("Traceback (most recent call last):\n")
    assert errors.endswith(
        "RuntimeError: a bug in a rebuild\n"
        f"{source}: the rebuild failed (a bug: please report the traceback above)\n"
        "still serving the last good build\n"
        f"{source}: the rebuild failed: [Errno 28] No space left on device\n"
        "still serving the last good build\n"
    )


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


def test_serve_runs_without_what_macos_and_windows_lack(tmp_path: Path) -> None:
    with serving(
        tmp_path, RATINGS, command=lambda *options: on_windows("--serve", "--port", "0", *options)
    ) as served:
        port = int(served.address.rsplit(":", 1)[1])
        reply = request(port, "GET", "/away/api/articles/7/rating/")

    assert (reply.status, reply.headers["Content-Type"]) == (200, "application/json")
    assert reply.body == (served.site / "away/api/articles/7/rating/index.json").read_bytes()
