"""The HTTP contract: the one conformance suite, then what only the nginx edge does (what only
``--serve`` or the app does: tests/test_serve.py).

Each point of ``POINTS`` (tests/contract-table.txt) has an observation in the words of its table: the app, called in this process, must answer each as the contract says (the quick tier),
and every real host (tests/hosts.py) as the app or as its documented difference;
the CloudFront function, run in node, is held to the app on each point it answers alone.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import datetime
import email.utils
import http.server
import itertools
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Final
from urllib.parse import urljoin, urlsplit

import pytest

from ratings_api.build import build
from ratings_api.contract import (
    ALLOW,
    COMMON_HEADERS,
    CONTENT_TYPES,
    ERROR_TYPE,
    FRONT_PAGE_CSP,
    MAX_ID,
    NOT_FOUND,
    not_allowed,
)
from ratings_api.contract import PREFLIGHT as CONTRACT_PREFLIGHT
from tests.contract import (
    ARTICLES,
    HEAD_SECONDS,
    NOT_RUN,
    POINTS,
    RATINGS,
    REPO,
    REQUEST_SECONDS,
    SECRET,
    STOP_SECONDS,
    Host,
    Reply,
    process_tree,
    wait_until,
)
from tests.hosts import (
    DIFFERENCES,
    HOSTS,
    NGINX_EDGE_CACHE_SECONDS,
    NGINX_EDGE_STALE_SECONDS,
    install_host_tools,
    start_app,
    start_cloudfront,
    start_edge_nginx,
)

# What a host answers, in the few words of the table: outcomes that are not answers, then answers.
STOPS: Final = "no answer: the server exits"
NO_ANSWER_SECONDS: Final = 2.0
NO_ANSWER: Final = f"no answer within {NO_ANSWER_SECONDS:g} s"

FOUND: Final = "200 and the file"
JSON_ERROR: Final = "the JSON error"
ITS_LENGTH: Final = "the body's length"
PREFLIGHT: Final = "204, `Allow` and the `Access-Control-Allow-*` headers"
NOT_ALLOWED: Final = "405, `Allow` and " + JSON_ERROR
WHOLE: Final = "200 and the whole document"
WHOLE_206: Final = "206 and the whole document"


def rating_path(article_id: int | str) -> str:
    return f"/away/api/articles/{article_id}/rating/"


R7: Final = rating_path(7)
NO_SLASH: Final = "/away/api/articles/7/rating"
ORIGIN: Final = {"Origin": "https://news.example.org"}  # a page elsewhere that embeds a rating
# 127.0.0.1 and ::1 as /proc/net/tcp and tcp6 write them: 32-bit words in the machine's order.
LOOPBACK: Final = ("0100007F", "00000000000000000000000001000000")
REBUILD: Final = "a rebuild (in the same second, same size)"

# A reply in the few words of the table


def one(said: Iterable[object]) -> object:
    """What one point's requests said, as one value: each different answer, joined by "or"."""
    values = sorted(set(said), key=str)
    return values[0] if len(values) == 1 else " or ".join(map(str, values))


def found(reply: Reply, body: bytes) -> object:
    return FOUND if reply.status == 200 and reply.body == body else reply.status


def length(reply: Reply, size: int) -> str:
    value = reply.header("Content-Length")
    if value is None:
        return "none"
    return ITS_LENGTH if value == str(size) else f"{value}, not {size}"


def quoted(reply: Reply, name: str) -> str:
    return f"`{reply.header(name)}`"


def outcome(host: Host, reply: Reply, path: str, body: bytes | None = None) -> object:
    """The status, or FOUND for a 200 with ``body``; a redirect is followed once: ``"308 to the
    path with a slash, then 200"``."""
    if reply.status == 200 and body is not None:
        return found(reply, body)
    location = reply.header("Location")
    if not 300 <= reply.status < 400 or location is None:
        return reply.status
    target = urljoin(f"http://127.0.0.1{path}", location)
    said = "the path with a slash" if urlsplit(target).path == path + "/" else f"`{location}`"
    then = host.request("GET", urlsplit(target).path)
    return f"{reply.status} to {said}, then {then.status}"


def body_said(reply: Reply) -> str:
    """A body that is not the expected one, in a few words."""
    if not reply.body:
        return "an empty body"
    kind = (reply.header("Content-Type") or "no type").split(";")[0]
    text = reply.body.decode("utf-8", "replace")
    return f"`{kind}` “{text}”" if len(text) <= 60 else f"{len(reply.body)} bytes of `{kind}`"


def etag_form(value: str | None) -> str:
    if value is None:
        return "none"
    if re.fullmatch(r'"[0-9a-f]{16}-[0-9a-f]+"', value):  # nanoseconds: 16 digits until 2262
        return '`"<hex>-<hex>"` (mtime in ns, size)'
    if re.fullmatch(r'"[0-9a-f]{8}-[0-9a-f]+"', value):  # seconds: 8 digits until 2106
        return '`"<hex>-<hex>"` (mtime in s, size)'
    if re.fullmatch(r'"[0-9a-f]{32}"', value):
        return '`"<32 hex digits>"` (of the content)'
    return '`W/"<size>-<hash>"`, weak' if value.startswith('W/"') else f"`{value}`"


# The observations: each takes a running host and says what it answered on one point, or on
# several from the same requests (a value each, in their order); named by the first.

OBSERVE: dict[str, Callable[[Host], dict[str, object]]] = {}
OBSERVED: dict[str, tuple[str, ...]] = {}  # the points of each


def observes(*points: str, **arguments: object) -> Callable[[Callable[..., object]], object]:
    def register(function: Callable[..., Any]) -> Callable[..., object]:
        def observe(host: Host) -> dict[str, object]:
            said = function(host, **arguments)
            return dict(zip(points, said, strict=True)) if points[1:] else {points[0]: said}

        OBSERVE[points[0]], OBSERVED[points[0]] = observe, points
        return function

    return register


@observes(
    "GET a rating",
    "`Content-Type` of a JSON file",
    "`Content-Length` of a file",
    "`ETag`",
    "`Last-Modified`",
    "HEAD: the headers of GET, no body",
    "CORS and `nosniff` on every answer",
    "`Cache-Control` of a file (200, 206, 304)",
    "`Cache-Control` of a redirect, 405 or OPTIONS",
)
def _a_rating(host: Host) -> tuple[object, ...]:
    expected = f'{{"article_url": "{host.base_url}/away/api/articles/7/", "id": 7, '
    expected += '"rating_sum": 29, "rating_count": 6, "rating_value": "4.8"}\n'
    assert host.document(7) == expected.encode()
    got, head = host.request("GET", R7), host.request("HEAD", R7, after_head=HEAD_SECONDS)
    assert (head.status, head.body) == (200, b"")
    names = ("Content-Type", "Content-Length", "ETag", "Last-Modified")
    differ = [f"`{name}`" for name in names if head.header(name) != got.header(name)]
    json_files = (got, host.request("GET", "/away/api/openapi.json"))
    if modified := got.header("Last-Modified"):  # an HTTP date, in GMT
        assert email.utils.parsedate_to_datetime(modified).utcoffset() == datetime.timedelta(0)
    # A file's 200, 206 and 304; a 405, OPTIONS and a redirect; others.
    etag = got.header("ETag") or ""
    asked = [("GET", R7, h) for h in (ORIGIN, {"Range": "bytes=0-9"}, {"If-None-Match": etag})]
    asked += [("POST", R7, {}), ("OPTIONS", R7, {}), ("GET", NO_SLASH, {}), ("HEAD", R7, {})]
    asked += [("GET", path, {}) for path in (rating_path(2), "/", "/robots.txt")]
    asked += [("GET", R7, {"Range": "bytes=500-"})]
    replies = [host.request(method, path, headers) for method, path, headers in asked]
    wanted = [(name, value) for name, value in COMMON_HEADERS if name != "Cache-Control"]
    lacking = [
        a for a, r in zip(asked, replies, strict=True) if any(r.header(n) != v for n, v in wanted)
    ]
    others = replies[3:6] if replies[5].status == 301 else replies[3:5]  # none from netlify dev
    return (
        one(found(host.request("GET", rating_path(i)), host.document(i)) for i in ARTICLES),
        one(quoted(reply, "Content-Type") for reply in json_files),
        length(got, len(host.document(7))),
        etag_form(got.header("ETag")),
        "an HTTP date" if modified else "none",
        "not the same " + ", ".join(differ) if differ else "the same",
        f"not on {lacking}" if lacking else "both",
        one(quoted(reply, "Cache-Control") for reply in replies[:3]),
        one(quoted(reply, "Cache-Control") for reply in others),
    )


@observes("no slash (`7/rating`): GET, HEAD, with a query", "the no-slash redirect's body")
def _no_slash(host: Host) -> tuple[object, object]:
    said, first = [], host.request("GET", NO_SLASH)
    for method, target in (("GET", NO_SLASH), ("HEAD", NO_SLASH), ("GET", NO_SLASH + "?v=2")):
        reply = host.request(method, target)
        location = reply.header("Location") or ""
        if reply.status == 301:
            if target.endswith("?v=2"):
                assert location.endswith("?v=2"), location  # the query is kept
                location = location.removesuffix("?v=2")
            followed = urlsplit(urljoin(f"http://127.0.0.1{target}", location)).path
            assert followed == R7, location  # where a client goes
        body = host.document(7) if method == "GET" else b""
        said.append(FOUND if (reply.status, reply.body) == (200, body) else f"301 to `{location}`")
    return one(said), "no redirect" if first.status != 301 else empty(first)


def empty(reply: Reply) -> str:
    return "empty" if not reply.body else body_said(reply)


@observes("280 requests from 32 threads at once")
def _parallel(host: Host) -> object:
    cases = [(rating_path(i), 200, host.document(i)) for i in ARTICLES]
    cases += [(rating_path(2), 404, NOT_FOUND), ("/abc", 404, NOT_FOUND)]

    def wrong(case: tuple[str, int, bytes]) -> str | None:
        reply = host.request("GET", case[0])
        return None if (reply.status, reply.body) == case[1:] else case[0]

    with concurrent.futures.ThreadPoolExecutor(max_workers=32) as pool:
        wrongs = [path for path in pool.map(wrong, cases * 40) if path is not None]
    return f"{len(wrongs)} wrong: {wrongs[:3]}" if wrongs else "all as expected"


# Not found

GENERIC: Final = "an unknown or malformed id, any other missing path"
MISSING: Final = (rating_path(2), "/nothing.txt", "/.ratings-api/state.gz")
NOT_FOUND_PATHS: Final = {
    GENERIC: (
        *(rating_path(i) for i in (2, MAX_ID + 1, 99999999999999999999, "abc", "07", "-1", "0")),
        *(rating_path(i) for i in ("+7", "7.0", "%207", "0x7")),
        *("/away/api/articles/7/rating//", "/away/api/articles/7/rating/extra"),
        *("/away/api/articles/7/ratings/", "/away/api/articles/7/", "/away/api/articles/7"),
        *("/away/api/articles/", "/away/api/articles", "/away/api/", "/away/api"),
        *("/away/api/nothing", "/AWAY/api/articles/7/rating/index.json", "/nothing"),
        "/nothing.txt",  # a name whose type is not JSON: the 404 still is
        "/.ratings-api/state.gz",  # the publisher's state, in the bucket behind the edges
    ),
    "no slash, no article (`2/rating`, `abc/rating`)": (
        "/away/api/articles/2/rating",
        "/away/api/articles/abc/rating",
    ),
    "an id of 300 digits": (rating_path("1" * 300),),  # longer than a file name may be
    "the document's own path (`7/rating/index.json`)": ("/away/api/articles/7/rating/index.json",),
    "a folder without its slash (`/about`)": ("/about",),
    "a dotfile of yours (`/.hidden`)": ("/.hidden",),
}


@observes(
    "a 404's body",
    "`Content-Type` of a 404",
    "`Cache-Control` of a 404",
    "`Content-Length` of a 404",
    *NOT_FOUND_PATHS,
)
def _not_found(host: Host) -> tuple[object, ...]:
    got = [host.request("GET", path) for path in MISSING]
    heads = [host.request("HEAD", path, after_head=HEAD_SECONDS) for path in MISSING]
    assert [reply.body for reply in heads] == [b""] * len(MISSING)
    both = ("GET", "HEAD")
    asked = [[(m, path) for path in paths for m in both] for paths in NOT_FOUND_PATHS.values()]
    return (
        one(JSON_ERROR if reply.body == NOT_FOUND else body_said(reply) for reply in got),
        one(quoted(reply, "Content-Type") for reply in got),
        one(quoted(reply, "Cache-Control") for reply in got),
        one(length(reply, len(NOT_FOUND)) for reply in got + heads),
        *(one(outcome(host, host.request(m, path), path) for m, path in point) for point in asked),
    )


ENCODED: Final = {
    "an encoded slash (`7%2Frating%2F`)": "/away/api/articles/7%2Frating%2F",
    "an encoded slash and no slash (`7%2Frating`)": "/away/api/articles/7%2Frating",
}


@observes(*ENCODED)
def _encoded_slashes(host: Host) -> list[object]:
    return [
        outcome(host, host.request("GET", path), path, host.document(7))
        for path in ENCODED.values()
    ]


# Methods

NOT_ALLOWED_METHODS: Final = ("POST", "PUT", "PATCH", "DELETE", "PROPFIND")


def other_said(reply: Reply) -> str:
    allow = f", `Allow: {reply.header('Allow')}`" if reply.header("Allow") else ", no `Allow`"
    return f"{reply.status}{allow}, {body_said(reply)}"


NOT_ALLOWED_POINT: Final = "POST, PUT, PATCH, DELETE, PROPFIND, TRACE on a rating"


@observes(NOT_ALLOWED_POINT, paths=(R7,), methods=(*NOT_ALLOWED_METHODS, "TRACE"))
@observes(
    "the same on an unknown id and on `/`", paths=(rating_path(2), "/"), methods=NOT_ALLOWED_METHODS
)
def _not_allowed(host: Host, paths: tuple[str, ...], methods: tuple[str, ...]) -> object:
    asked = [method for method in methods if method in (host.methods or methods)]
    # Where TRACE is documented to go unanswered, it is waited for NO_ANSWER_SECONDS.
    silent = NO_ANSWER in str(host.expect(NOT_ALLOWED_POINT))
    said, unanswered = [], ""
    for method, path in itertools.product(asked, paths):
        body = None if method == "TRACE" else b'{"rating": 5}'  # TRACE carries none
        try:
            timeout = NO_ANSWER_SECONDS if silent else REQUEST_SECONDS
            reply = host.request(method, path, body=body, timeout=timeout)
            error, names = not_allowed(method), ("Allow", "Content-Type", "Content-Length")
            sent = (reply.status, *map(reply.header, names), reply.body)
            ok = sent == (405, ALLOW, ERROR_TYPE, str(len(error)), error)
            said.append(NOT_ALLOWED if ok else other_said(reply))
        except TimeoutError:
            unanswered = f"; {method}: {NO_ANSWER}"
    if not_asked := [method for method in methods if method not in asked]:
        answered = "as the app" if one(said) == NOT_ALLOWED else one(said)
        return f"{', '.join(asked)}: {answered}; {', '.join(not_asked)}: {NOT_RUN}"
    return f"{one(said)}{unanswered}"


@observes("OPTIONS, with or without CORS, on a rating", path=R7)
@observes("OPTIONS on an unknown id", path=rating_path(2))
def _options(host: Host, path: str) -> object:
    preflight = ORIGIN | {"Access-Control-Request-Method": "GET"}
    preflight["Access-Control-Request-Headers"] = "if-none-match"
    said = []
    for reply in (host.request("OPTIONS", path, headers) for headers in (preflight, {})):
        sent = [(name, reply.header(name)) for name, _ in CONTRACT_PREFLIGHT]
        ok = (reply.status, reply.body, sent) == (204, b"", list(CONTRACT_PREFLIGHT))
        said.append(PREFLIGHT if ok else other_said(reply))
    return one(said)


# Conditional and partial requests

LONG_AGO: Final = "Thu, 01 Jan 1998 00:00:00 GMT"


@observes(
    "`If-None-Match` with the `ETag`, GET and HEAD",
    "`If-None-Match: *`, a list, or the weak form of the `ETag`",
    "`If-None-Match` with the `ETag` and an older or invalid `If-Modified-Since`",
    "`If-Modified-Since` the `Last-Modified` or later",
)
def _conditions(host: Host) -> tuple[object, ...]:
    assert host.request("GET", R7, {"If-None-Match": '"0-0"'}).body == host.document(7)
    assert host.request("GET", R7, {"If-Modified-Since": LONG_AGO}).status == 200
    matched = []
    for method in ("GET", "HEAD"):  # netlify dev's ETag on HEAD is not GET's
        etag = host.request(method, R7).header("ETag") or ""
        reply = host.request(method, R7, {"If-None-Match": etag})
        if reply.status != 304:
            matched.append(str(reply.status))
            continue
        assert reply.body == b""
        sent = reply.header("ETag")
        with_etag = "with the `ETag`" if sent == etag else f"with `ETag: {sent}`"
        matched.append(f"304 {'without an `ETag`' if sent is None else with_etag}")
    got = host.request("GET", R7)
    etag, modified = got.header("ETag") or '"none"', got.header("Last-Modified")
    forms: dict[str, set[str]] = {}
    for form, value in (
        ("`*`", "*"),
        ("a list", f'"0-0", {etag}'),
        ("a list", f'{etag}, "0-0"'),
        ("the weak form", f"W/{etag.removeprefix('W/')}"),
    ):
        reply = host.request("GET", R7, {"If-None-Match": value})
        emptied = reply.status == 200 and not reply.body
        assert emptied or reply.body == (b"" if reply.status == 304 else host.document(7))
        said = "200 with an empty body" if emptied else str(reply.status)
        forms.setdefault(form, set()).add(said)
    statuses = set().union(*forms.values())
    both = [{"If-None-Match": etag, "If-Modified-Since": since} for since in (LONG_AGO, "garbage")]
    since = []
    if modified is not None:
        later = email.utils.parsedate_to_datetime(modified) + datetime.timedelta(days=1)
        for value in (modified, email.utils.format_datetime(later, usegmt=True)):
            reply = host.request("GET", R7, {"If-Modified-Since": value})
            assert reply.body == (b"" if reply.status == 304 else host.document(7))
            since.append(reply.status)
    return (
        one(matched),
        int(min(statuses))
        if statuses in ({"304"}, {"200"})
        else "; ".join(f"{form}: {' or '.join(sorted(found))}" for form, found in forms.items()),
        one(host.request("GET", R7, headers).status for headers in both),
        one(since) if since else "no `Last-Modified` to send",
    )


def range_said(host: Host, reply: Reply) -> str:
    """A reply to a Range request of article 7's document, in a few words."""
    whole = host.document(7)
    if reply.status == 200 and reply.body == whole:
        return WHOLE
    if reply.status == 416:
        said = f"416 and `Content-Range: {reply.header('Content-Range')}`"
        return said.replace(f"*/{len(whole)}", "*/<size>")
    span = reply.header("Content-Range") or ""
    found = re.fullmatch(rf"bytes (\d+)-(\d+)/{len(whole)}", span)
    if reply.status != 206 or found is None:
        return f"{reply.status}, `Content-Range: {span}`"
    first, last = int(found[1]), int(found[2])
    assert reply.body == whole[first : last + 1]
    assert reply.header("Content-Length") == str(last - first + 1)
    sizes = {len(whole): WHOLE_206, 10: "206 and those 10 bytes", 1: "206 and that byte"}
    return sizes.get(last - first + 1, f"206 and bytes {first}-{last}")


RANGES: Final = {
    "`Range: bytes=0-9`": ("bytes=0-9",),
    # Of several, the one range left is sent.
    "`Range`: one byte (`bytes=0-0`, `bytes=-1`)": (
        *("bytes=0-0", "bytes=-1", "bytes=9-9", "bytes=0-0,500-600", "bytes=-0,0-0"),
    ),
    "`Range`: several (`bytes=0-1,3-4`)": ("bytes=0-1,3-4", "bytes=0-,0-"),
    "`Range`: none satisfiable (`bytes=-0`, `bytes=500-`) or invalid (`bytes=5-2`)": (
        *("bytes=-0", "bytes=500-", "bytes=500-600", "bytes=5-2", "bytes=abc", "bytes=-"),
        "bytes=-0,500-",
    ),
    "`Range` past 2⁶³ (`bytes=0-99999999999999999999`)": ("bytes=0-99999999999999999999",),
}


@observes(*RANGES, "the 416's body", "`If-Range` with another `ETag` or an older date")
def _ranges(host: Host) -> list[object]:
    replies = {}
    for value in itertools.chain(*RANGES.values()):
        replies[value] = reply = host.request("GET", R7, {"Range": value})
        head = host.request("HEAD", R7, {"Range": value})
        said = [(answer.status, answer.header("Content-Range")) for answer in (reply, head)]
        assert (said[1], head.body) == (said[0], b""), value  # HEAD: GET's answer, no body
    said = [one(range_said(host, replies[v]) for v in values) for values in RANGES.values()]
    unsatisfiable = replies["bytes=500-"]
    said.append(empty(unsatisfiable) if unsatisfiable.status == 416 else "no 416")
    got = host.request("GET", R7)
    for current in filter(None, [got.header("ETag"), got.header("Last-Modified")]):
        # The file's own: the Range is read.
        reply = host.request("GET", R7, {"Range": "bytes=0-9", "If-Range": current})
        assert range_said(host, reply) == said[0], current
    others = ('"deadbeef-1"', LONG_AGO, f"W/{got.header('ETag')}")
    asked = [{"Range": "bytes=0-9", "If-Range": value} for value in others]
    return [*said, one(range_said(host, host.request("GET", R7, h)) for h in asked)]


# Other files


# Each path, its file, and its type; the front page's policy is on the first two alone.
OTHER_FILES: Final = {
    "/": ("index.html", "text/html"),  # the front page the build writes
    "/index.html": ("index.html", None),  # its own point: a redirect on some hosts
    R7: ("away/api/articles/7/rating/index.json", "application/json"),
    "/away/api/openapi.json": ("away/api/openapi.json", "application/json"),
    "/CNAME": ("CNAME", "application/octet-stream"),
    "/robots.txt": ("robots.txt", "text/plain"),
    "/about/": ("about/index.html", "text/html"),
}


@observes(
    "the `charset` of HTML and text files",
    "the front page's `Content-Security-Policy`",
    "the front page `/index.html`",
)
def _other_files(host: Host) -> tuple[object, object, object]:
    said, sent = [], []
    for path, (file, content_type) in OTHER_FILES.items():
        reply = host.request("GET", path)
        sent.append(reply.header("Content-Security-Policy"))
        if content_type is None:
            index = outcome(host, reply, path, (host.site / file).read_bytes())
            continue
        assert (reply.status, reply.body) == (200, (host.site / file).read_bytes()), path
        kind, _, parameter = (reply.header("Content-Type") or "").partition("; ")
        assert kind == content_type, reply.header("Content-Type")
        said += [f"`{parameter}`"] if kind.startswith("text/") else []
    policy = POINTS["the front page's `Content-Security-Policy`"]
    ok = sent == [FRONT_PAGE_CSP] * 2 + [None] * 5
    return one(said), policy if ok else f"sent {dict(zip(OTHER_FILES, sent, strict=True))}", index


# Requests that try to leave the root, sent byte for byte. A WSGI server
# decodes %XX before the app sees the path, so %2f is a slash like any other.
ABOVE: Final = "above the root (`../`, `%2e%2e`, `..%2f`, 1,300 × `../`)"
NUL: Final = "`%00` in the path"
DOTS: Final = "dot segments inside the root (`api/./articles`, `rating/.`)"
TRAVERSAL_EXITS: Final = "`/..%c0%af..%c0%afsecret.txt` (overlong UTF-8)"
OUT: Final = "other paths out (`//etc/passwd`, `/./secret.txt`, `/..\\secret.txt`)"
TRAVERSALS: Final[dict[str, tuple[bytes, ...]]] = {
    ABOVE: (
        *(b"/../secret.txt", b"/../../../../../../../../etc/passwd", b"/%2e%2e/secret.txt"),
        b"/away/api/articles/7/rating/../../../../../../secret.txt",
        b"/%2E%2E/%2E%2E/%2E%2E/%2E%2E/etc/passwd",
        b"/away/api/articles/%2e%2e/%2e%2e/%2e%2e/%2e%2e/secret.txt",
        *(b"/..%2fsecret.txt", b"/away/api/articles/..%2f..%2f..%2f..%2fsecret.txt"),
        *(b"/%2e%2e%2fsecret.txt", b"/" + b"../" * 1300 + b"etc/passwd"),
    ),
    "`/..%5csecret.txt` (an encoded backslash)": (b"/..%5csecret.txt",),
    OUT: (b"/..\\secret.txt", b"//etc/passwd", b"/./secret.txt"),
    "`rating\\index.json` (a backslash for a slash)": (b"/away/api/articles/7/rating\\index.json",),
    NUL: (
        *(b"/%00", b"/away/api/articles/7/rating/index.json%00", b"/openapi.json%00.html"),
        b"/away/api/articles/7%00/rating/",
    ),
    DOTS: (b"/away/api/./articles/7/rating/", b"/away/api/articles/7/rating/."),
    "an empty segment (`/away//api/…`)": (b"/away//api/articles/7/rating/",),
    "an absolute-form target (`http://127.0.0.1/../secret.txt`)": (
        b"http://127.0.0.1/../secret.txt",
    ),
    "a path of 2,000 or 3,000 bytes": (
        b"/" + b"a" * 2000,
        b"/away/api/articles/" + b"1" * 3000 + b"/rating/",
    ),
    # Where the server, not the app, may answer first.
    "a leading `//` (`//away/api/articles/7/rating/`)": (b"//away/api/articles/7/rating/",),
    "a request line over 4094 bytes": (b"/" + b"a" * 5000,),
    "a NUL byte in the request line": (b"/away/api/articles/7/rating/\x00", b"/../secret.txt\x00"),
    "a non-ASCII byte in the request line": (b"/away/api/articles/7/rating/\xff",),
    "another control byte in the request line (`\\x01`, `\\x7f`)": (
        b"/away/api/articles/7/rating/\x01",
    ),
    # netlify dev exits on these two: the suite starts it again.
    "a malformed `%` escape (`/%3G`, `/%`)": (b"/robots.txt%3G",),
    TRAVERSAL_EXITS: (b"/..%c0%af..%c0%afsecret.txt",),
}


def _traversals(host: Host, point: str, targets: tuple[bytes, ...]) -> object:
    said: list[object] = []
    for target in targets:
        if host.expect(point) == STOPS:
            with pytest.raises(ConnectionResetError):  # http.client.RemoteDisconnected
                host.request("GET", target)
            host.process.wait(STOP_SECONDS)  # started again at its next request
            said.append(STOPS)
            continue
        reply = host.request("GET", target)
        answer = str(reply.headers).encode() + reply.body
        assert SECRET not in answer
        assert b"root:" not in answer
        said.append(found(reply, host.document(7)))  # the document, inside the root, at most
    return one(said)


for _point, _targets in TRAVERSALS.items():
    observes(_point, point=_point, targets=_targets)(_traversals)


# Symlinks in the site: the path asked for; what it would reach is read through the link.
SYMLINK_PATHS: Final = {
    "a symlink to a folder outside the root (`site/system -> /etc`)": "/system/hostname",
    "a symlink to a file outside the root (`-> ../secret.txt`)": "/secret-link.txt",
    "a symlink to a file inside the root (`-> robots.txt`)": "/robots-link.txt",
    "a symlink to a folder inside the root (`-> away`)": "/mirror/api/openapi.json",
    "a symlink loop (`loop -> loop`)": "/loop",
}


def _symlink(host: Host, path: str) -> object:
    try:
        reached: bytes | None = (host.site / path[1:]).read_bytes()
    except OSError:  # the loop reaches nothing
        reached = None
    said: list[object] = []
    for method in ("GET", "HEAD"):
        reply = host.request(method, path)
        if reply.status == 404:
            assert reply.body == (NOT_FOUND if method == "GET" else b"")
        elif reply.status != 200 and reached is not None:
            assert reached not in reply.body
        ok = reply.status == 200 and (method == "HEAD" or reached in (None, reply.body))
        said.append(FOUND if ok else reply.status)
    return one(said)


for _point, _path in SYMLINK_PATHS.items():
    observes(_point, path=_path)(_symlink)


REBUILT: Final = "\nratings.yaml changed: built site: "


@observes(REBUILD)
def _rebuilt_in_the_same_second(server: Host) -> object:
    """Within the same second and at the same size, the hardest case for a validator.
    The site stays rebuilt: the points after this one read their documents from it."""
    old = server.request("GET", R7)
    document = server.site / "away/api/articles/7/rating/index.json"
    before = os.stat(document).st_mtime_ns
    # Changed as the host's users do; --serve rebuilds it itself.
    serve = server.name == "generate --serve"
    rebuilds = server.log.read_text().count(REBUILT) if serve else 0
    source = server.site.parent / "ratings.yaml"
    source.write_text(RATINGS.replace("7: [5, 4, 5, 5, 5, 5]", "7: [5, 4, 5, 5, 5, 4]"), "utf-8")
    if serve:
        wait_until(
            lambda: server.log.read_text().count(REBUILT) > rebuilds, server.process, server.log
        )
    else:
        build(str(source), str(server.site), base_url=server.base_url, environ={})
        server.publish()
    # The new document is as long as the old, and written in the same second.
    second = before - before % 10**9
    os.utime(document, ns=(second + (before + 1) % 10**9,) * 2)
    reply = server.request("GET", R7)
    new = old.body.replace(b'"rating_sum": 29', b'"rating_sum": 28')
    assert reply.body == new.replace(b'"4.8"', b'"4.7"')
    stale = server.request("GET", R7, {"If-None-Match": old.header("ETag") or ""})
    if reply.header("ETag") == old.header("ETag"):
        return f"the new document, with the old `ETag`: a client's copy gets {stale.status}"
    assert (stale.status, stale.body) == (200, reply.body)
    later = f", after up to {server.stale_seconds:g} s (its cache)" if server.stale_seconds else ""
    return "the new document, with a new `ETag`" + later


assert sorted(itertools.chain(*OBSERVED.values())) == sorted(POINTS), "each point, once"


# The hosts: the app in this process (the quick tier), each real one and CloudFront's function.
STARTS: Final = {"the app": start_app, **HOSTS, "CloudFront": start_cloudfront}
REAL_HOSTS: Final = [pytest.param(name, marks=pytest.mark.real_world) for name in HOSTS]


@pytest.fixture(scope="module", params=["the app", *REAL_HOSTS])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Host]:
    """Each host (tests/hosts.py), running, one at a time, started once for this module."""
    if request.param != "the app":
        install_host_tools()  # once a session
    host = STARTS[request.param](tmp_path_factory.mktemp(request.param.replace(" ", "_")))
    try:
        yield host
    finally:
        host.stop()


# Last, the observations after which a host is not the same: a rebuild, and the requests on
# which netlify dev exits (started again for the next one, not after the last).
LAST: Final = (REBUILD, "a malformed `%` escape (`/%3G`, `/%`)", TRAVERSAL_EXITS)
ORDER: Final = [name for name in OBSERVE if name not in LAST] + list(LAST)


@pytest.mark.parametrize("server", REAL_HOSTS, indirect=True)
def test_the_host_listens_on_loopback_only(server: Host) -> None:
    """Every listening socket of the host's processes is on 127.0.0.1 (or ::1)."""
    assert server.process is not None
    addresses = listening(process_tree(server.process.pid))
    assert (LOOPBACK[0], server.port) in addresses
    assert {address for address, _ in addresses} <= set(LOOPBACK), addresses


# What only the nginx edge in front of a bucket does: its cache, counted at the store. Before
# the points, on the edge they use, so that its cache is fresh.
@pytest.mark.real_world
@pytest.mark.parametrize("server", ["nginx → S3"], indirect=True)
def test_a_hot_article_reaches_the_store_once_per_cache_lifetime(server: Host) -> None:
    """With or without a query; the check behind a redirect fills the very entry its document
    is read from; a 404 is cached too. The check behind `7/rating`'s redirect fills no entry
    that `GET /7/exists` could read, and a 404 cached for `GET /12/exists` does not take
    `12/rating`'s redirect offline."""
    before = server.reads()
    first = server.request("GET", R7)
    assert (first.status, first.header("X-Cache-Status")) == (200, "MISS")
    assert server.reads() == before + 1
    started = time.monotonic()
    # A query is not a new copy.
    asked = [R7, f"{R7}?v=1"] * 10
    statuses = [server.request("GET", path).header("X-Cache-Status") for path in asked]
    assert time.monotonic() - started < NGINX_EDGE_CACHE_SECONDS, "too slow to tell"
    assert statuses == ["HIT"] * 20
    assert server.reads() == before + 1  # none of the 20 reached the store
    time.sleep(NGINX_EDGE_STALE_SECONDS + 0.1)  # every copy expired, article 31's too
    # Expired: asked again with If-None-Match, and the store's 304 renews the copy.
    again = server.request("GET", R7)
    assert (again.status, again.body) == (200, first.body)
    assert again.header("X-Cache-Status") == "REVALIDATED"
    assert server.reads() == before + 2
    # One key per object: the redirect's check reads the store, its document is then a HIT.
    assert server.request("GET", "/away/api/articles/31/rating").status == 301
    reply = server.request("GET", "/away/api/articles/31/rating/")
    assert (reply.status, reply.header("X-Cache-Status")) == (200, "HIT")
    assert reply.body == server.document(31)
    assert server.reads() == before + 3
    # A 404 is cached too.
    replies = [server.request("GET", "/away/api/articles/2/rating/") for _ in range(3)]
    assert [(reply.status, reply.body) for reply in replies] == [(404, NOT_FOUND)] * 3
    assert server.reads() == before + 4
    # No path reads or poisons the cache entry of the existence check.
    assert server.request("GET", "/away/api/articles/7/rating").status == 301
    for path in ("/12/exists", "/away/api/articles/12/rating/index.json", "/1000000/exists"):
        assert server.request("GET", path).status == 404
    for method in ("GET", "HEAD"):
        reply = server.request(method, "/7/exists")
        assert (reply.status, reply.header("Content-Type")) == (404, ERROR_TYPE)
        assert reply.body == (NOT_FOUND if method == "GET" else b"")
        for article in (12, 1000000):
            reply = server.request(method, f"/away/api/articles/{article}/rating?v=1")
            assert (reply.status, reply.header("Location")) == (301, "rating/?v=1")


# What only the nginx edge does, on a store that may not be listed


class Forbidding(http.server.BaseHTTPRequestHandler):
    """A store that may not be listed: every missing key is a 403 with an XML body, as S3's."""

    error_content_type = "application/xml"
    error_message_format = "<?xml version='1.0'?><Error><Code>AccessDenied</Code></Error>"

    def do_GET(self) -> None:
        self.send_error(403)

    do_HEAD = do_GET  # noqa: N815  (http.server's names)


@pytest.mark.real_world
def test_a_store_that_answers_403_in_xml_gives_the_json_404(tmp_path: Path) -> None:
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), Forbidding) as store:
        threading.Thread(target=store.serve_forever, daemon=True).start()
        install_host_tools()
        edge = start_edge_nginx(tmp_path, store.server_address[1])
        try:
            paths = (R7, NO_SLASH, "/", "/robots.txt", "/about/")
            replies = [edge.request(method, path) for path in paths for method in ("GET", "HEAD")]
        finally:
            edge.stop()
            store.shutdown()
    sent = [
        (r.status, r.header("Content-Type"), r.header("Access-Control-Allow-Origin"), r.body)
        for r in replies
    ]
    assert sent == [(404, ERROR_TYPE, "*", NOT_FOUND), (404, ERROR_TYPE, "*", b"")] * len(paths)


@pytest.mark.parametrize("observation", ORDER)
def test_each_host_holds_each_point_as_the_app_or_as_documented(
    server: Host, observation: str
) -> None:
    observed = OBSERVE[observation](server)
    assert observed == {point: server.expect(point) for point in observed}


def listening(pids: set[int]) -> set[tuple[str, int]]:
    """The TCP addresses that sockets held by ``pids`` listen on: each address as /proc writes it
    (LOOPBACK), and its port."""
    inodes = set()
    for pid in pids:
        with contextlib.suppress(OSError):  # a process gone meanwhile
            links = [os.readlink(fd) for fd in Path(f"/proc/{pid}/fd").iterdir()]
            inodes |= {link[8:-1] for link in links if link.startswith("socket:[")}
    tables = [Path(f"/proc/net/{name}").read_text().splitlines()[1:] for name in ("tcp", "tcp6")]
    rows = [line.split() for table in tables for line in table]
    # 0A: LISTEN
    found = [row[1].split(":") for row in rows if row[3] == "0A" and row[9] in inodes]
    return {(address, int(port, 16)) for address, port in found}


CLOUDFRONT_NOT_RUN: Final = {p for p, d in DIFFERENCES["CloudFront"].items() if d.value == NOT_RUN}


@pytest.mark.real_world
@pytest.mark.parametrize("server", ["CloudFront"], indirect=True)
@pytest.mark.parametrize(
    "observation", [name for name in ORDER if set(OBSERVED[name]) - CLOUDFRONT_NOT_RUN]
)
def test_cloudfront_holds_each_point_it_decides_as_the_app_or_as_documented(
    server: Host, observation: str
) -> None:
    observed = {
        p: v for p, v in OBSERVE[observation](server).items() if p not in CLOUDFRONT_NOT_RUN
    }
    assert observed == {point: server.expect(point) for point in observed}


def test_the_http_page_states_the_contract_s_values() -> None:
    """docs/http-api.md's reference says each header and body as ratings_api/contract.py holds it."""
    page = (REPO / "docs" / "http-api.md").read_text(encoding="utf-8")
    stated = [f"`{name}: {value}`" for name, value in (*COMMON_HEADERS, *CONTRACT_PREFLIGHT)]
    stated += [f"`Content-Type: {CONTENT_TYPES['.json']}`"]
    stated += [
        f"`{body.decode().strip()}` and a newline" for body in (NOT_FOUND, not_allowed("POST"))
    ]
    assert [text for text in stated if text not in page] == []
