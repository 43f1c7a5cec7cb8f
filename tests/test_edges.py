"""What only the nginx edge in front of a bucket does: its cache, counted at the store.

The contract itself is checked on every edge by tests/test_http_contract.py.
"""

from __future__ import annotations

import http.server
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from ratings_api.contract import ERROR_TYPE, NOT_FOUND
from tests.contract import Host, request, stop
from tests.edges import (
    NGINX_EDGE_CACHE_SECONDS,
    NGINX_EDGE_STALE_SECONDS,
    nginx_edge,
    start_edge_nginx,
    store_reads,
)
from tests.objectstore import Store

pytestmark = pytest.mark.real_world

HOT = "/away/api/articles/7/rating/"


@pytest.fixture(scope="module")
def edge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Host, Store]]:
    host, store = nginx_edge(tmp_path_factory.mktemp("nginx_edge"))
    try:
        yield host, store
    finally:
        host.stop()


def test_a_hot_article_reaches_the_store_once_per_cache_lifetime(edge: tuple[Host, Store]) -> None:
    host, store = edge
    before = store_reads(store)
    first = request(host.port, "GET", HOT)
    assert (first.status, first.header("X-Cache-Status")) == (200, "MISS")
    assert store_reads(store) == before + 1
    started = time.monotonic()
    statuses = [request(host.port, "GET", HOT).header("X-Cache-Status") for _ in range(20)]
    assert time.monotonic() - started < NGINX_EDGE_CACHE_SECONDS, "too slow to tell"
    assert statuses == ["HIT"] * 20
    assert store_reads(store) == before + 1  # none of the 20 reached the store
    time.sleep(NGINX_EDGE_STALE_SECONDS + 0.1)
    # Expired: asked again with If-None-Match, and the store's 304 renews the copy.
    again = request(host.port, "GET", HOT)
    assert (again.status, again.body) == (200, first.body)
    assert again.header("X-Cache-Status") == "REVALIDATED"
    assert store_reads(store) == before + 2


def test_a_query_is_not_a_new_copy_and_a_404_is_cached_too(edge: tuple[Host, Store]) -> None:
    host, store = edge
    request(host.port, "GET", "/away/api/articles/12/rating/")
    before = store_reads(store)
    replies = [request(host.port, "GET", f"/away/api/articles/12/rating/?v={n}") for n in range(5)]
    assert [reply.header("X-Cache-Status") for reply in replies] == ["HIT"] * 5
    assert store_reads(store) == before
    replies = [request(host.port, "GET", "/away/api/articles/2/rating/") for _ in range(3)]
    assert [(reply.status, reply.body) for reply in replies] == [(404, NOT_FOUND)] * 3
    assert store_reads(store) == before + 1


def test_no_path_reads_or_poisons_the_cache_entry_of_the_existence_check(
    edge: tuple[Host, Store],
) -> None:
    """The check behind `7/rating`'s redirect fills no entry that `GET /7/exists` could
    read, and a 404 cached for `GET /12/exists` does not take `12/rating`'s redirect offline."""
    host, _ = edge
    assert request(host.port, "GET", "/away/api/articles/7/rating").status == 301
    for path in ("/12/exists", "/away/api/articles/12/rating/index.json", "/1000000/exists"):
        assert request(host.port, "GET", path).status == 404
    for method in ("GET", "HEAD"):
        reply = request(host.port, method, "/7/exists")
        assert (reply.status, reply.header("Content-Type")) == (404, ERROR_TYPE)
        assert reply.body == (NOT_FOUND if method == "GET" else b"")
        for article in (12, 1000000):
            reply = request(host.port, method, f"/away/api/articles/{article}/rating?v=1")
            assert (reply.status, reply.header("Location")) == (301, "rating/?v=1")


def test_the_existence_check_and_the_document_share_one_entry(edge: tuple[Host, Store]) -> None:
    """One key per object: the redirect's check fills the entry the document is read from."""
    host, store = edge
    time.sleep(NGINX_EDGE_STALE_SECONDS + 0.1)  # every copy of article 31 expired
    before = store_reads(store)
    assert request(host.port, "GET", "/away/api/articles/31/rating").status == 301
    reply = request(host.port, "GET", "/away/api/articles/31/rating/")
    assert (reply.status, reply.header("X-Cache-Status")) == (200, "HIT")
    assert reply.body == host.document(31)
    assert store_reads(store) == before + 1


class Forbidding(http.server.BaseHTTPRequestHandler):
    """A store that may not be listed: every missing key is a 403 with an XML body, as S3's."""

    def do_GET(self) -> None:
        body = b"<?xml version='1.0'?><Error><Code>AccessDenied</Code></Error>"
        self.send_response(403)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body if self.command == "GET" else b"")

    def do_HEAD(self) -> None:
        self.do_GET()

    def log_message(self, format: str, *args: object) -> None:
        pass


def test_a_store_that_answers_403_in_xml_gives_the_json_404(tmp_path: Path) -> None:
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), Forbidding) as store:
        threading.Thread(target=store.serve_forever, daemon=True).start()
        process, port, _ = start_edge_nginx(tmp_path, store.server_address[1])
        try:
            for path in (HOT, HOT.rstrip("/"), "/", "/robots.txt", "/about/"):
                for method in ("GET", "HEAD"):
                    reply = request(port, method, path)
                    assert (reply.status, reply.header("Content-Type")) == (404, ERROR_TYPE)
                    assert reply.body == (NOT_FOUND if method == "GET" else b"")
                    assert reply.header("Access-Control-Allow-Origin") == "*"
        finally:
            stop(process)
            store.shutdown()
