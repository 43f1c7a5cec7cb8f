"""Corners of serving that the contract suite does not reach: a bounded cache, removed files,
a port out of range, a site with no article yet, an input gone for a moment."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any
from wsgiref.types import WSGIApplication
from wsgiref.util import setup_testing_defaults

from ratings_api.build import build
from ratings_api.server import POLL_SECONDS, LazyWhiteNoise, api_fallback, create_app
from tests.contract import make_project, start, stop, wait_for
from tests.hosts import SERVING, refused_serve, serve_command

BASE_URL = "https://ratings.example.com"


def build_site(folder: Path, articles: str) -> Path:
    source = folder / "ratings.yaml"
    source.write_text(f"articles:\n{articles}", encoding="utf-8")
    site = folder / "site"
    build(str(source), str(site), base_url=BASE_URL, environ={})
    return site


def get(app: WSGIApplication, path: str) -> tuple[str, bytes]:
    """The status line and the body of a GET, asked of the WSGI app in this process."""
    environ: dict[str, Any] = {}
    setup_testing_defaults(environ)
    environ.update(REQUEST_METHOD="GET", PATH_INFO=path)
    statuses = []

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        statuses.append(status)
        return lambda data: None

    answer = app(environ, start_response)
    try:
        body = b"".join(answer)
    finally:
        close = getattr(answer, "close", None)
        if close is not None:
            close()  # the file it read from
    return statuses[0], body


def document(article_id: int, total: int, count: int, value: str) -> bytes:
    return (
        f'{{"article_url": "{BASE_URL}/away/api/articles/{article_id}/", "id": {article_id}, '
        f'"rating_sum": {total}, "rating_count": {count}, "rating_value": "{value}"}}\n'
    ).encode()


def test_a_file_removed_by_a_rebuild_is_not_served_from_the_cache(tmp_path: Path) -> None:
    site = build_site(tmp_path, "  1: [5]\n  2: [4]\n")
    app = create_app(str(site))
    assert get(app, "/away/api/articles/2/rating/") == ("200 OK", document(2, 4, 1, "4.0"))

    build_site(tmp_path, "  1: [5]\n")

    status, body = get(app, "/away/api/articles/2/rating/")
    assert (status, body) == ("404 Not Found", b'{"detail": "Not found."}\n')


def test_the_cache_keeps_the_latest_files_up_to_its_size(tmp_path: Path) -> None:
    site = build_site(tmp_path, "  1: [5]\n  2: [4]\n  3: [3]\n")
    app = LazyWhiteNoise(api_fallback, str(site), cache_size=2)
    for article_id, total in ((1, 5), (2, 4), (3, 3)):
        path = f"/away/api/articles/{article_id}/rating/"
        assert get(app, path) == ("200 OK", document(article_id, total, 1, f"{total}.0"))
    # The oldest went when the third came: memory stays bounded however many are asked for.
    assert list(app._cache) == ["/away/api/articles/2/rating/", "/away/api/articles/3/rating/"]
    assert get(app, "/away/api/articles/1/rating/") == ("200 OK", document(1, 5, 1, "5.0"))


def test_serve_refuses_a_port_out_of_range_with_exit_2(tmp_path: Path) -> None:
    (tmp_path / "ratings.yaml").write_text("articles:\n  7: [5]\n", encoding="utf-8")
    done = refused_serve(tmp_path, "65536")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == "--port 65536: a port is a number from 0 to 65535\n"
    assert not (tmp_path / "site").exists()  # refused before building


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
