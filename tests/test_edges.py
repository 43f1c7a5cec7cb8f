"""What only the edges in front of a bucket do: nginx's cache, counted at the store.

The contract itself is checked on every edge by tests/test_http_contract.py.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from ratings_api.publish import STATE_NAME
from tests.contract import Host, request
from tests.edges import (
    BUCKET,
    NGINX_EDGE_CACHE_SECONDS,
    NGINX_EDGE_STALE_SECONDS,
    PREFIX,
    nginx_edge,
    store_reads,
)
from tests.objectstore import Store

HOT = "/away/api/articles/7/rating/"


@pytest.fixture(scope="module")
def edge(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Host, Store]]:
    host, store = nginx_edge(tmp_path_factory.mktemp("nginx_edge"))
    try:
        yield host, store
    finally:
        host.stop()


def test_a_hot_article_reaches_the_store_once_per_cache_lifetime(
    edge: tuple[Host, Store],
) -> None:
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
    assert (again.status, again.body, again.header("X-Cache-Status")) == (
        200,
        first.body,
        "REVALIDATED",
    )
    assert store_reads(store) == before + 2


def test_a_query_is_not_a_new_copy(edge: tuple[Host, Store]) -> None:
    host, store = edge
    request(host.port, "GET", "/away/api/articles/12/rating/")
    before = store_reads(store)
    replies = [request(host.port, "GET", f"/away/api/articles/12/rating/?v={n}") for n in range(5)]
    assert [reply.header("X-Cache-Status") for reply in replies] == ["HIT"] * 5
    assert store_reads(store) == before


def test_a_missing_article_is_the_json_404_and_cached_too(edge: tuple[Host, Store]) -> None:
    host, store = edge
    before = store_reads(store)
    replies = [request(host.port, "GET", "/away/api/articles/2/rating/") for _ in range(3)]
    assert [(reply.status, reply.body) for reply in replies] == [
        (404, b'{"detail": "Not found."}\n')
    ] * 3
    assert store_reads(store) == before + 1


def test_the_publishers_state_is_not_served(edge: tuple[Host, Store]) -> None:
    host, store = edge
    key = f"{PREFIX}/{STATE_NAME}"
    assert store.client().head_object(Bucket=BUCKET, Key=key)["ContentLength"] > 0  # it is there
    for method in ("GET", "HEAD"):
        reply = request(host.port, method, f"/{STATE_NAME}")
        assert reply.status == 404
        assert reply.body == (b'{"detail": "Not found."}\n' if method == "GET" else b"")
