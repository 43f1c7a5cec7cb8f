"""Corners of serving that the contract suite does not reach: files replaced while
they are served (the WSGI app called in this process, as a WSGI server calls it),
a site with no article yet, an input gone for a moment."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from ratings_api.build import build
from ratings_api.devserver import POLL_SECONDS
from ratings_api.server import create_app
from tests.contract import NOT_FOUND, SECRET, call_app, make_project, start, stop, wait_for
from tests.hosts import SERVING, serve_command

RACE_SECONDS = 0.5


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


def test_the_headers_describe_the_bytes_sent_while_a_rebuild_replaces_the_file(
    tmp_path: Path,
) -> None:
    """A file renamed into place between the lookup and the open: never its old length."""
    site = tmp_path / "site"
    site.mkdir()
    versions = (b"short\n", b"a longer version\n")

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
