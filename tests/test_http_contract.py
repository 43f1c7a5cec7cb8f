"""The HTTP contract of the served site, checked over real HTTP on every host.

Every check in CHECKS runs against every host in ``tests.hosts.HOSTS``: the
WhiteNoise app under ``python generate.py --serve`` and gunicorn, nginx with
deploy/nginx.conf, and the local servers of Netlify and Cloudflare Pages,
each started on 127.0.0.1 and stopped afterwards. A check asserts what the
contract fixes for every host, and observes each line on which a host may
differ as a few words (``Host.holds``): the app's answer, or the host's
documented difference. Nothing is skipped.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import datetime
import email.utils
import functools
import ipaddress
import os
import re
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from http import HTTPStatus
from pathlib import Path
from typing import Final
from urllib.parse import urljoin, urlsplit

import pytest
from whitenoise.responders import Response, StaticFile

from ratings_api.build import build
from ratings_api.describe import FRONT_PAGE_CSP
from ratings_api.errors import InputError
from ratings_api.server import _StaticFile, create_app
from tests.contract import (
    ALLOW,
    ARTICLES,
    CACHE_CONTROL,
    FOUND,
    ITS_LENGTH,
    JSON_ERROR,
    NO_ANSWER,
    NO_ANSWER_SECONDS,
    NOT_ALLOWED,
    NOT_FOUND,
    NOT_SATISFIABLE,
    POINTS,
    PREFLIGHT,
    RATINGS,
    READY_SECONDS,
    REPO,
    SECRET,
    SERVER_ERROR,
    STOP_SECONDS,
    STOPS,
    USER_FILES,
    WHOLE,
    WHOLE_206,
    Host,
    Reply,
    after_head,
    contract_table,
    make_project,
    process_tree,
    raw_request,
    reasons_list,
    request,
    start,
    stop,
    wait_for,
)
from tests.hosts import DIFFERENCES, SERVING, refused_serve, serve_command

# The hosts are started by the ``server`` fixture of tests/conftest.py, once a
# session for this module and tests/test_hosts_agree.py together.


def rating_path(article_id: int | str) -> str:
    return f"/away/api/articles/{article_id}/rating/"


# Observations: a reply in the few words the README's table uses.


def length(reply: Reply, size: int) -> str:
    value = reply.header("Content-Length")
    if value is None:
        return "none"
    return ITS_LENGTH if value == str(size) else f"{value}, not {size}"


def etag_form(value: str | None) -> str:
    if value is None:
        return "none"
    if re.fullmatch(r'"[0-9a-f]{16}-[0-9a-f]+"', value):  # nanoseconds: 16 digits until 2262
        return POINTS["`ETag`"]  # type: ignore[return-value]
    if re.fullmatch(r'"[0-9a-f]{8}-[0-9a-f]+"', value):  # seconds: 8 digits until 2106
        return '`"<hex>-<hex>"` (mtime in s, size)'
    if re.fullmatch(r'"[0-9a-f]{32}"', value):
        return '`"<32 hex digits>"` (of the content)'
    if value.startswith('W/"'):
        return '`W/"<size>-<hash>"`, weak'
    return f"`{value}`"


def last_modified(reply: Reply) -> str:
    value = reply.header("Last-Modified")
    if value is None:
        return "none"
    date = email.utils.parsedate_to_datetime(value)  # ValueError unless a date
    assert date.utcoffset() == datetime.timedelta(0), value  # HTTP dates are in GMT
    return "an HTTP date"


def outcome(host: Host, reply: Reply, path: str) -> object:
    """The status; a redirect is followed once: ``"308 to the path with a slash, then 200"``."""
    location = reply.header("Location")
    if not 300 <= reply.status < 400 or location is None:
        return reply.status
    target = urljoin(f"http://127.0.0.1{path}", location)
    said = "the path with a slash" if urlsplit(target).path == path + "/" else f"`{location}`"
    then = request(host.port, "GET", urlsplit(target).path)
    return f"{reply.status} to {said}, then {then.status}"


def body_said(reply: Reply) -> str:
    """A body that is not the expected one, in a few words."""
    if not reply.body:
        return "an empty body"
    kind = (reply.header("Content-Type") or "no type").split(";")[0]
    text = reply.body.decode("utf-8", "replace")
    return f"`{kind}` “{text}”" if len(text) <= 60 else f"{len(reply.body)} bytes of `{kind}`"


def assert_common_headers(host: Host, reply: Reply, kind: str) -> None:
    """CORS and nosniff everywhere, and the Cache-Control of this ``kind`` of answer."""
    cors = reply.header("Access-Control-Allow-Origin") == "*"
    nosniff = reply.header("X-Content-Type-Options") == "nosniff"
    host.holds(
        "CORS and `nosniff` on every answer",
        "both"
        if cors and nosniff
        else (
            f"Access-Control-Allow-Origin: {reply.header('Access-Control-Allow-Origin')}, "
            f"X-Content-Type-Options: {reply.header('X-Content-Type-Options')}"
        ),
    )
    host.holds(f"`Cache-Control` of {kind}", f"`{reply.header('Cache-Control')}`")


A_FILE: Final = "a file (200, 206, 304)"
A_404: Final = "a 404"
OTHER: Final = "a redirect, 405 or OPTIONS"


# The checks: each takes a running host and asserts one line of the contract.

CHECKS: dict[str, Callable[[Host], None]] = {}


def check(name: str, **arguments: object) -> Callable[[Callable[..., None]], Callable[..., None]]:
    def register(function: Callable[..., None]) -> Callable[..., None]:
        assert name not in CHECKS, name
        CHECKS[name] = functools.partial(function, **arguments)
        return function

    return register


def found(reply: Reply, body: bytes) -> object:
    return FOUND if reply.status == 200 and reply.body == body else reply.status


def check_document(host: Host, article_id: int) -> None:
    reply = request(host.port, "GET", rating_path(article_id))
    body = host.document(article_id)
    host.holds("GET a rating", found(reply, body))
    host.holds("`Content-Type` of a JSON file", f"`{reply.header('Content-Type')}`")
    host.holds("`Content-Length` of a file", length(reply, len(body)))
    host.holds("`ETag`", etag_form(reply.header("ETag")))
    host.holds("`Last-Modified`", last_modified(reply))
    assert_common_headers(host, reply, A_FILE)


for _id in ARTICLES:
    check(f"GET the rating of article {_id}", article_id=_id)(check_document)


@check("GET: the document of article 7, byte for byte")
def check_document_bytes(host: Host) -> None:
    reply = request(host.port, "GET", rating_path(7))
    assert (
        reply.body
        == (
            f'{{"article_url": "{host.base_url}/away/api/articles/7/", "id": 7, '
            '"rating_sum": 29, "rating_count": 6, "rating_value": "4.8"}\n'
        ).encode()
    )


@check("HEAD: the headers of GET, no body")
def check_head(host: Host) -> None:
    got = request(host.port, "GET", rating_path(7))
    reply = request(host.port, "HEAD", rating_path(7))
    assert reply.status == 200
    assert after_head(host.port, rating_path(7)) == b""
    names = ("Content-Type", "Content-Length", "ETag", "Last-Modified")
    differ = [name for name in names if reply.header(name) != got.header(name)]
    host.holds(
        "HEAD: the headers of GET, no body",
        "the same" if not differ else "not the same " + ", ".join(f"`{n}`" for n in differ),
    )
    assert_common_headers(host, reply, A_FILE)


NO_SLASH: Final = "no slash (`7/rating`): GET, HEAD, with a query"


def redirect_said(reply: Reply, body: bytes) -> str:
    if reply.status == 200 and reply.body == body:
        return FOUND
    return f"{reply.status} to `{reply.header('Location')}`"


@check("no slash: a redirect to the slash form, with CORS headers")
def check_no_slash(host: Host) -> None:
    path = "/away/api/articles/7/rating"
    reply = request(host.port, "GET", path)
    host.holds(NO_SLASH, redirect_said(reply, host.document(7)))
    if reply.status != 301:
        host.holds("the no-slash redirect's body", "no redirect")
        return
    host.holds("the no-slash redirect's body", "empty" if not reply.body else body_said(reply))
    assert_common_headers(host, reply, OTHER)  # without CORS a browser's fetch stops here
    followed = urlsplit(
        urljoin(f"http://127.0.0.1:{host.port}{path}", reply.header("Location") or "")
    )
    assert followed.path == rating_path(7)
    again = request(host.port, "GET", followed.path)
    assert again.status == 200
    assert again.body == host.document(7)


@check("no slash, HEAD and with a query: as GET")
def check_no_slash_forms(host: Host) -> None:
    path = "/away/api/articles/7/rating"
    for method, target in (("HEAD", path), ("GET", path + "?v=2")):
        reply = request(host.port, method, target)
        document = host.document(7) if method == "GET" else b""
        observed = redirect_said(reply, document)
        if reply.status == 301:
            assert_common_headers(host, reply, OTHER)
            if target.endswith("?v=2"):
                location = reply.header("Location") or ""
                assert location.endswith("?v=2"), location  # the query is kept
                observed = f"301 to `{location.removesuffix('?v=2')}`"
        host.holds(NO_SLASH, observed)


GENERIC_404: Final = "an unknown or malformed id, any other missing path"
NOT_FOUND_PATHS: Final = {
    rating_path(2): GENERIC_404,  # an id with no article
    rating_path(99999999999999999999): GENERIC_404,
    rating_path("1" * 300): "an id of 300 digits",  # longer than a file name may be
    rating_path("abc"): GENERIC_404,
    rating_path("07"): GENERIC_404,
    rating_path("-1"): GENERIC_404,
    rating_path("0"): GENERIC_404,
    rating_path("+7"): GENERIC_404,
    rating_path("7.0"): GENERIC_404,
    rating_path("%207"): GENERIC_404,
    rating_path("0x7"): GENERIC_404,
    "/away/api/articles/2/rating": "no slash, no article (`2/rating`, `abc/rating`)",
    "/away/api/articles/abc/rating": "no slash, no article (`2/rating`, `abc/rating`)",
    "/away/api/articles/7/rating/index.json": "the document's own path (`7/rating/index.json`)",
    "/away/api/articles/7/rating//": GENERIC_404,
    "/away/api/articles/7/rating/extra": GENERIC_404,
    "/away/api/articles/7/ratings/": GENERIC_404,
    "/away/api/articles/7/": GENERIC_404,
    "/away/api/articles/7": GENERIC_404,
    "/away/api/articles/": GENERIC_404,
    "/away/api/articles": GENERIC_404,
    "/away/api/": GENERIC_404,
    "/away/api": GENERIC_404,
    "/away/api/nothing": GENERIC_404,
    "/AWAY/api/articles/7/rating/index.json": GENERIC_404,
    "/nothing": GENERIC_404,
    "/nothing.txt": GENERIC_404,  # a name whose type is not JSON: the 404 still is
    "/about": "a folder without its slash (`/about`)",
    "/.hidden": "a dotfile of yours (`/.hidden`)",
    # The publisher's state: an object in the bucket behind the edges, missing elsewhere.
    "/.ratings-api/state.gz": GENERIC_404,
}


def check_not_found(host: Host, path: str, method: str, point: str) -> None:
    reply = request(host.port, method, path)
    host.holds(point, outcome(host, reply, path))
    if reply.status != 404:
        return
    if method == "GET":
        host.holds("a 404's body", JSON_ERROR if reply.body == NOT_FOUND else body_said(reply))
    else:
        assert after_head(host.port, path) == b""
    host.holds("`Content-Type` of a 404", f"`{reply.header('Content-Type')}`")
    host.holds("`Content-Length` of a 404", length(reply, len(NOT_FOUND)))
    assert_common_headers(host, reply, A_404)


for _path, _point in NOT_FOUND_PATHS.items():
    for _method in ("GET", "HEAD"):
        check(f"404 {_method} {_path}", path=_path, method=_method, point=_point)(check_not_found)


def not_allowed_said(reply: Reply, method: str) -> str:
    json_error = f'{{"detail": "Method \\"{method}\\" not allowed."}}\n'.encode()
    if (
        reply.status == 405
        and reply.header("Allow") == ALLOW
        and reply.body == json_error
        and reply.header("Content-Type") == "application/json"
        and reply.header("Content-Length") == str(len(json_error))
    ):
        return NOT_ALLOWED
    allow = f", `Allow: {reply.header('Allow')}`" if reply.header("Allow") else ", no `Allow`"
    return f"{reply.status}{allow}, {body_said(reply)}"


def check_not_allowed(host: Host, method: str, path: str) -> None:
    body = None if method == "TRACE" else b'{"rating": 5}'  # TRACE may not carry one
    if method == "TRACE" and host.expect("TRACE") == NO_ANSWER:
        with pytest.raises(TimeoutError):
            request(host.port, method, path, body=body, timeout=NO_ANSWER_SECONDS)
        host.holds("TRACE", NO_ANSWER)
        return
    reply = request(host.port, method, path, body=body)
    if method == "TRACE":
        host.holds("TRACE", "an answer")
    point = (
        "POST, PUT, PATCH, DELETE, PROPFIND, TRACE on a rating"
        if path == rating_path(7)
        else "the same on an unknown id and on `/`"
    )
    host.holds(point, not_allowed_said(reply, method))
    assert_common_headers(host, reply, OTHER)


for _method in ("POST", "PUT", "PATCH", "DELETE", "TRACE", "PROPFIND"):
    for _path in (rating_path(7), rating_path(2), "/"):
        check(f"405 {_method} {_path}", method=_method, path=_path)(check_not_allowed)


def options_said(reply: Reply) -> str:
    if (
        reply.status == 204
        and reply.body == b""
        and reply.header("Allow") == ALLOW
        and reply.header("Access-Control-Allow-Methods") == ALLOW
        and reply.header("Access-Control-Allow-Headers") == "*"
        and reply.header("Access-Control-Max-Age") == "86400"
    ):
        return PREFLIGHT
    allow = f", `Allow: {reply.header('Allow')}`" if reply.header("Allow") else ", no `Allow`"
    return f"{reply.status}{allow}, {body_said(reply)}"


def check_options(host: Host, path: str, point: str) -> None:
    preflight = request(
        host.port,
        "OPTIONS",
        path,
        {
            "Origin": "https://news.example.org",
            "Access-Control-Request-Method": "GET",
            "Access-Control-Request-Headers": "if-none-match",
        },
    )
    host.holds(point, options_said(preflight))
    assert_common_headers(host, preflight, OTHER)
    plain = request(host.port, "OPTIONS", path)
    assert options_said(plain) == options_said(preflight)


check(
    "OPTIONS on a rating", path=rating_path(7), point="OPTIONS, with or without CORS, on a rating"
)(check_options)
check("OPTIONS on an unknown id", path=rating_path(2), point="OPTIONS on an unknown id")(
    check_options
)


# Symlinks in the site: the path asked for, what it would reach through the
# link, and the point it answers.
HOSTNAME: Final = Path("/etc/hostname").read_bytes()
SYMLINK_PATHS: Final = {
    "/system/hostname": (
        HOSTNAME,
        "a symlink to a folder outside the root (`site/system -> /etc`)",
    ),
    "/secret-link.txt": (SECRET, "a symlink to a file outside the root (`-> ../secret.txt`)"),
    "/robots-link.txt": (
        USER_FILES["robots.txt"],
        "a symlink to a file inside the root (`-> robots.txt`)",
    ),
    "/mirror/api/openapi.json": (
        None,  # the site's own: read from the host's folder
        "a symlink to a folder inside the root (`-> away`)",
    ),
    "/loop": (None, "a symlink loop (`loop -> loop`)"),
}


def check_symlink(host: Host, path: str, method: str) -> None:
    reached, point = SYMLINK_PATHS[path]
    if path.startswith("/mirror/"):
        reached = (host.site / "away/api/openapi.json").read_bytes()
    reply = request(host.port, method, path)
    if reply.status == 200:
        host.holds(point, FOUND if method == "HEAD" or reply.body == reached else body_said(reply))
    else:
        host.holds(point, reply.status)
    if reply.status == 404:
        assert reply.body == (NOT_FOUND if method == "GET" else b"")
        assert reply.header("Content-Type") == "application/json"
        assert reply.header("Content-Length") == str(len(NOT_FOUND))
        assert_common_headers(host, reply, A_404)
    if reached is not None and reply.status != 200:
        assert reached not in reply.body


for _path in SYMLINK_PATHS:
    for _method in ("GET", "HEAD"):
        check(f"symlink {_method} {_path}", path=_path, method=_method)(check_symlink)


@check("a cross-origin GET: readable from any origin")
def check_cross_origin_get(host: Host) -> None:
    reply = request(host.port, "GET", rating_path(7), {"Origin": "https://news.example.org"})
    assert reply.status == 200
    assert reply.header("Access-Control-Allow-Origin") == "*"


@check("If-None-Match with the ETag: 304")
def check_if_none_match(host: Host) -> None:
    said = []
    for method in ("GET", "HEAD"):
        etag = request(host.port, method, rating_path(7)).header("ETag") or ""
        reply = request(host.port, method, rating_path(7), {"If-None-Match": etag})
        if reply.status == 304:
            assert reply.body == b""
            assert_common_headers(host, reply, A_FILE)
            with_etag = (
                "with the `ETag`"
                if reply.header("ETag") == etag
                else (
                    f"with `ETag: {reply.header('ETag')}`"
                    if reply.header("ETag")
                    else "without an `ETag`"
                )
            )
            said.append(f"304 {with_etag}")
        else:
            said.append(str(reply.status))
    host.holds(
        "`If-None-Match` with the `ETag`, GET and HEAD",
        said[0] if said[0] == said[1] else f"GET: {said[0]}; HEAD: {said[1]}",
    )


@check("If-None-Match with another ETag: 200")
def check_if_none_match_other(host: Host) -> None:
    reply = request(host.port, "GET", rating_path(7), {"If-None-Match": '"0-0"'})
    assert reply.status == 200
    assert reply.body == host.document(7)


@check("If-Modified-Since the Last-Modified: 304")
def check_if_modified_since(host: Host) -> None:
    modified = request(host.port, "GET", rating_path(7)).header("Last-Modified")
    if modified is None:
        host.holds("`If-Modified-Since` the `Last-Modified`", "no `Last-Modified` to send")
        return
    reply = request(host.port, "GET", rating_path(7), {"If-Modified-Since": modified})
    host.holds("`If-Modified-Since` the `Last-Modified`", reply.status)
    assert reply.body == (b"" if reply.status == 304 else host.document(7))
    assert_common_headers(host, reply, A_FILE)


@check("If-Modified-Since long ago: 200")
def check_if_modified_since_old(host: Host) -> None:
    since = "Thu, 01 Jan 1998 00:00:00 GMT"
    reply = request(host.port, "GET", rating_path(7), {"If-Modified-Since": since})
    assert reply.status == 200
    assert reply.body == host.document(7)


@check("Range: 206 with the bytes asked for")
def check_range(host: Host) -> None:
    whole = host.document(7)
    reply = request(host.port, "GET", rating_path(7), {"Range": "bytes=0-9"})
    if reply.status == 206:
        assert reply.body == whole[:10]
        assert reply.header("Content-Range") == f"bytes 0-9/{len(whole)}"
        host.holds("`Range: bytes=0-9`", "206 and those 10 bytes")
    else:
        host.holds(
            "`Range: bytes=0-9`",
            "200 and the whole document"
            if (reply.status, reply.body) == (200, whole)
            else reply.status,
        )
    assert_common_headers(host, reply, A_FILE)


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
    if (first, last) == (0, len(whole) - 1):
        return WHOLE_206
    return "206 and that byte" if first == last else f"206 and bytes {first}-{last}"


RANGES: Final = {
    "`Range`: one byte (`bytes=0-0`, `bytes=-1`)": ("bytes=0-0", "bytes=-1", "bytes=9-9"),
    "`Range`: several (`bytes=0-1,3-4`)": ("bytes=0-1,3-4", "bytes=0-,0-"),
    "`Range`: none satisfiable (`bytes=-0`, `bytes=500-`) or invalid (`bytes=5-2`)": (
        "bytes=-0",
        "bytes=500-",
        "bytes=500-600",
        "bytes=5-2",
        "bytes=abc",
        "bytes=-",
        "bytes=-0,500-",
    ),
    "`Range` past 2⁶³ (`bytes=0-99999999999999999999`)": ("bytes=0-99999999999999999999",),
}


@check("Range: one answer to every form")
def check_range_forms(host: Host) -> None:
    for point, values in RANGES.items():
        said = set()
        for value in values:
            reply = request(host.port, "GET", rating_path(7), {"Range": value})
            said.add(range_said(host, reply))
            assert_common_headers(host, reply, A_FILE)
            if reply.status == 416:
                host.holds("the 416's body", "empty" if not reply.body else body_said(reply))
            head = request(host.port, "HEAD", rating_path(7), {"Range": value})
            assert (head.status, head.header("Content-Range"), head.body) == (
                reply.status,
                reply.header("Content-Range"),
                b"",
            )
        host.holds(point, " or ".join(sorted(said)))
    # One range left out of several: the other is sent.
    for value in ("bytes=0-0,500-600", "bytes=-0,0-0"):
        reply = request(host.port, "GET", rating_path(7), {"Range": value})
        host.holds("`Range`: one byte (`bytes=0-0`, `bytes=-1`)", range_said(host, reply))
    if not any(host.expect(point) == NOT_SATISFIABLE for point in RANGES):
        host.holds("the 416's body", host.expect("the 416's body"))  # never asked


@check("If-None-Match: *, a list, the weak form: 304")
def check_if_none_match_forms(host: Host) -> None:
    etag = request(host.port, "GET", rating_path(7)).header("ETag") or '"none"'
    strong = etag.removeprefix("W/")
    said: dict[str, set[str]] = {}
    for form, value in (
        ("`*`", "*"),
        ("a list", f'"0-0", {etag}'),
        ("a list", f'{etag}, "0-0"'),
        ("the weak form", f"W/{strong}"),
    ):
        reply = request(host.port, "GET", rating_path(7), {"If-None-Match": value})
        if reply.status == 200 and not reply.body:
            said.setdefault(form, set()).add("200 with an empty body")
        else:
            assert reply.body == (b"" if reply.status == 304 else host.document(7))
            said.setdefault(form, set()).add(str(reply.status))
        head = request(host.port, "HEAD", rating_path(7), {"If-None-Match": value})
        assert head.body == b""
    statuses = {status for found in said.values() for status in found}
    host.holds(
        "`If-None-Match: *`, a list, or the weak form of the `ETag`",
        int(statuses.pop())
        if statuses in ({"304"}, {"200"})
        else "; ".join(f"{form}: {' or '.join(sorted(found))}" for form, found in said.items()),
    )


@check("If-None-Match with the ETag and another If-Modified-Since: 304")
def check_if_none_match_first(host: Host) -> None:
    etag = request(host.port, "GET", rating_path(7)).header("ETag") or '"none"'
    said = set()
    for since in ("Thu, 01 Jan 1998 00:00:00 GMT", "garbage"):
        reply = request(
            host.port, "GET", rating_path(7), {"If-None-Match": etag, "If-Modified-Since": since}
        )
        said.add(reply.status)
    host.holds(
        "`If-None-Match` with the `ETag` and an older or invalid `If-Modified-Since`",
        said.pop() if len(said) == 1 else " or ".join(map(str, sorted(said))),
    )


@check("If-Modified-Since a later date: 304")
def check_if_modified_since_later(host: Host) -> None:
    modified = request(host.port, "GET", rating_path(7)).header("Last-Modified")
    if modified is None:
        host.holds("`If-Modified-Since` a later date", "no `Last-Modified` to send")
        return
    later = email.utils.format_datetime(
        email.utils.parsedate_to_datetime(modified) + datetime.timedelta(days=1), usegmt=True
    )
    reply = request(host.port, "GET", rating_path(7), {"If-Modified-Since": later})
    host.holds("`If-Modified-Since` a later date", reply.status)


def check_other_file(host: Host, path: str, file: str, content_type: str) -> None:
    reply = request(host.port, "GET", path)
    body = (host.site / file).read_bytes()
    if path == "/index.html":
        host.holds(
            "the front page `/index.html`",
            found(reply, body) if reply.status == 200 else outcome(host, reply, path),
        )
        if reply.status != 200:
            return
    assert reply.status == 200
    assert reply.body == body
    got = reply.header("Content-Type") or ""
    if content_type.startswith("text/"):
        assert got.startswith(f"{content_type}; "), got
        host.holds("the `charset` of HTML and text files", f"`{got.split('; ', 1)[1]}`")
    elif content_type == "application/json":
        host.holds("`Content-Type` of a JSON file", f"`{got}`")
    else:
        assert got == content_type
    assert_common_headers(host, reply, A_FILE)


for _path, _name, _type in (
    ("/", "index.html", "text/html"),  # the front page the build writes
    ("/index.html", "index.html", "text/html"),
    ("/away/api/openapi.json", "away/api/openapi.json", "application/json"),
    ("/CNAME", "CNAME", "application/octet-stream"),
    ("/robots.txt", "robots.txt", "text/plain"),
    ("/about/", "about/index.html", "text/html"),
):
    check(f"another file: {_path}", path=_path, file=_name, content_type=_type)(check_other_file)


@check("the front page carries its Content-Security-Policy, and only it")
def check_front_page_policy(host: Host) -> None:
    missing = [
        path
        for path in ("/", "/index.html")
        if request(host.port, "GET", path).header("Content-Security-Policy") != FRONT_PAGE_CSP
    ]
    elsewhere = [
        path
        for path in (rating_path(7), "/away/api/openapi.json", "/robots.txt", "/about/")
        if request(host.port, "GET", path).header("Content-Security-Policy") is not None
    ]
    host.holds(
        "the front page's `Content-Security-Policy`",
        POINTS["the front page's `Content-Security-Policy`"]
        if not missing and not elsewhere
        else f"not on {missing}; also on {elsewhere}",
    )


# Requests that try to leave the root, sent byte for byte. A WSGI server
# decodes %XX before the app sees the path, so %2f is a slash like any other.
ABOVE: Final = "above the root (`../`, `%2e%2e`, `..%2f`, 1,300 × `../`)"
NUL: Final = "`%00` in the path"
DOTS: Final = "dot segments inside the root (`api/./articles`, `rating/.`)"
LONG: Final = "a path of 2,000 or 3,000 bytes"
OUT: Final = "other paths out (`//etc/passwd`, `/./secret.txt`, `/..\\secret.txt`)"
CONTROL: Final = "another control byte in the request line (`\\x01`, `\\x7f`)"
TRAVERSALS: Final = {
    b"/../secret.txt": ABOVE,
    b"/../../../../../../../../etc/passwd": ABOVE,
    b"/away/api/articles/7/rating/../../../../../../secret.txt": ABOVE,
    b"/%2e%2e/secret.txt": ABOVE,
    b"/%2E%2E/%2E%2E/%2E%2E/%2E%2E/etc/passwd": ABOVE,
    b"/away/api/articles/%2e%2e/%2e%2e/%2e%2e/%2e%2e/secret.txt": ABOVE,
    b"/..%2fsecret.txt": ABOVE,
    b"/away/api/articles/..%2f..%2f..%2f..%2fsecret.txt": ABOVE,
    b"/%2e%2e%2fsecret.txt": ABOVE,
    b"/" + b"../" * 1300 + b"etc/passwd": ABOVE,
    b"/..%5csecret.txt": "`/..%5csecret.txt` (an encoded backslash)",
    b"/..\\secret.txt": OUT,
    b"/away/api/articles/7/rating\\index.json": "`rating\\index.json` (a backslash for a slash)",
    b"/%00": NUL,
    b"/away/api/articles/7/rating/index.json%00": NUL,
    b"/openapi.json%00.html": NUL,
    b"/away/api/articles/7%00/rating/": NUL,
    b"//etc/passwd": OUT,
    b"/./secret.txt": OUT,
    b"/away/api/./articles/7/rating/": DOTS,
    b"/away//api/articles/7/rating/": "an empty segment (`/away//api/…`)",
    b"/away/api/articles/7/rating/.": DOTS,
    b"http://127.0.0.1/../secret.txt": "an absolute-form target (`http://127.0.0.1/../secret.txt`)",
    b"/" + b"a" * 2000: LONG,
    b"/away/api/articles/" + b"1" * 3000 + b"/rating/": LONG,
    # Where the server, not the app, may answer first.
    b"//away/api/articles/7/rating/": "a leading `//` (`//away/api/articles/7/rating/`)",
    b"/" + b"a" * 5000: "a request line over 4094 bytes",
    b"/away/api/articles/7/rating/\x00": "a NUL byte in the request line",
    b"/../secret.txt\x00": "a NUL byte in the request line",
    b"/away/api/articles/7/rating/\xff": "a non-ASCII byte in the request line",
    b"/away/api/articles/7/rating/\x01": CONTROL,
    b"/robots.txt%3G": "a malformed `%` escape (`/%3G`, `/%`)",
    # netlify dev exits on this one: it comes last, and the host is started again.
    b"/..%c0%af..%c0%afsecret.txt": "`/..%c0%af..%c0%afsecret.txt` (overlong UTF-8)",
}


def check_traversal(host: Host, target: bytes, point: str) -> None:
    if host.expect(point) == STOPS:
        with pytest.raises(ConnectionResetError):  # http.client.RemoteDisconnected
            raw_request(host.port, target)
        host.process.wait(STOP_SECONDS)
        host.holds(point, STOPS)
        host.revive()
        return
    reply = raw_request(host.port, target)
    # The documents the traversals may legitimately reach inside the root.
    inside = {host.document(7): FOUND}
    host.holds(point, inside.get(reply.body, reply.status) if reply.status == 200 else reply.status)
    answer = bytes(reply.headers) + reply.body
    assert SECRET not in answer
    assert b"root:" not in answer


for _target, _point in TRAVERSALS.items():
    _label = repr(_target) if len(_target) <= 60 else f"{_target[:40]!r}… ({len(_target)} bytes)"
    check(f"traversal {_label}", target=_target, point=_point)(check_traversal)


@check("an encoded slash is a slash")
def check_encoded_slash(host: Host) -> None:
    reply = request(host.port, "GET", "/away/api/articles/7%2Frating%2F")
    host.holds("an encoded slash (`7%2Frating%2F`)", found(reply, host.document(7)))


@check("many parallel requests, all correct")
def check_parallel(host: Host) -> None:
    cases = [(rating_path(i), 200) for i in ARTICLES] + [(rating_path(2), 404), ("/abc", 404)]
    work = cases * 40

    def fetch(case: tuple[str, int]) -> tuple[str, int, bytes]:
        reply = request(host.port, "GET", case[0])
        return case[0], reply.status, reply.body

    with concurrent.futures.ThreadPoolExecutor(max_workers=32) as pool:
        results = list(pool.map(fetch, work))
    assert len(results) == len(work) == 280
    wrong = []
    for (path, status), (_, got_status, body) in zip(work, results, strict=True):
        expected = NOT_FOUND if status == 404 else host.document(int(path.split("/")[4]))
        if (got_status, body) != (status, expected):
            wrong.append(f"{path}: {got_status}")
    host.holds(
        "280 requests from 32 threads at once",
        "all as expected" if not wrong else f"{len(wrong)} wrong: {wrong[:3]}",
    )


assert len(CHECKS) > 100, "the contract lost its checks"


@pytest.mark.parametrize("name", list(CHECKS))
def test_contract(server: Host, name: str) -> None:
    CHECKS[name](server)


def test_differences_are_known_points_with_a_reason(server: Host) -> None:
    assert set(server.differences) <= set(POINTS)
    for point, difference in server.differences.items():
        assert difference.value != POINTS[point], f"{point}: no difference"
        assert difference.why


def test_the_host_listens_on_loopback_only(server: Host) -> None:
    """Every listening socket of the host's processes is on 127.0.0.1 (or ::1)."""
    addresses = listening_addresses(process_tree(server.process.pid))
    assert f"127.0.0.1:{server.port}" in addresses
    assert {address.rsplit(":", 1)[0] for address in addresses} <= {"127.0.0.1", "[::1]"}, addresses


def listening_addresses(pids: set[int]) -> set[str]:
    """The TCP addresses that sockets held by ``pids`` listen on, as ``host:port``."""
    inodes = set()
    for pid in pids:
        try:
            links = [os.readlink(fd) for fd in Path(f"/proc/{pid}/fd").iterdir()]
        except OSError:
            continue
        inodes |= {link[8:-1] for link in links if link.startswith("socket:[")}
    addresses = set()
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] != "0A" or fields[9] not in inodes:  # 0A: LISTEN
                continue
            host, port = fields[1].split(":")
            packed = bytes.fromhex(host)
            # /proc writes each 32-bit word in the machine's (little-endian) order.
            raw = b"".join(packed[i : i + 4][::-1] for i in range(0, width // 2, 4))
            address = ipaddress.ip_address(raw)
            shown = str(address) if address.version == 4 else f"[{address}]"
            addresses.add(f"{shown}:{int(port, 16)}")
    return addresses


def test_a_rebuild_is_seen_at_the_next_request(server: Host) -> None:
    """Within the same second and at the same size, the hardest case for a validator."""
    old = request(server.port, "GET", rating_path(7))
    document = server.site / "away/api/articles/7/rating/index.json"
    before = os.stat(document).st_mtime_ns
    changed = RATINGS.replace("7: [5, 4, 5, 5, 5, 5]", "7: [5, 4, 5, 5, 5, 4]")
    rebuild(server, changed)
    try:
        # The new document is as long as the old, and written in the same second.
        second = before - before % 10**9
        os.utime(document, ns=(second + (before + 1) % 10**9,) * 2)
        reply = request(server.port, "GET", rating_path(7))
        assert (
            reply.body
            == (
                f'{{"article_url": "{server.base_url}/away/api/articles/7/", "id": 7, '
                '"rating_sum": 28, "rating_count": 6, "rating_value": "4.7"}\n'
            ).encode()
        )
        assert len(reply.body) == len(old.body)
        stale = request(
            server.port, "GET", rating_path(7), {"If-None-Match": old.header("ETag") or ""}
        )
        if reply.header("ETag") != old.header("ETag"):
            assert (stale.status, stale.body) == (200, reply.body)
            said = "the new document, with a new `ETag`"
            if server.stale_seconds:
                said += f", after up to {server.stale_seconds:g} s (its cache)"
        else:
            said = f"the new document, with the old `ETag`: a client's copy gets {stale.status}"
        server.holds("a rebuild (in the same second, same size)", said)
    finally:
        rebuild(server, RATINGS)
    assert request(server.port, "GET", rating_path(7)).body == old.body


REBUILT: Final = "\nratings.yaml changed: built site: "


def wait_until(condition: Callable[[], bool], host: Host) -> None:
    deadline = time.monotonic() + READY_SECONDS
    while not condition():
        assert host.process.poll() is None, host.log.read_text()
        assert time.monotonic() < deadline, host.log.read_text()
        time.sleep(0.02)


def rebuild(host: Host, ratings: str) -> None:
    """Change the ratings as the host's users do, and wait until the site is rebuilt."""
    source = host.site.parent / "ratings.yaml"
    if host.name == "generate --serve":
        done = host.log.read_text().count(REBUILT)
        source.write_text(ratings, encoding="utf-8")
        wait_until(lambda: host.log.read_text().count(REBUILT) > done, host)
    else:
        source.write_text(ratings, encoding="utf-8")
        build(str(source), str(host.site), base_url=host.base_url, environ={})
        if host.publish is not None:
            host.publish()


def test_the_tests_readme_table_is_the_measured_contract() -> None:
    """tests/README.md's host × contract table and its reasons are this suite's data."""
    page = (REPO / "tests" / "README.md").read_text(encoding="utf-8")
    assert contract_table(DIFFERENCES) in page
    assert reasons_list(DIFFERENCES) in page


# What only `python generate.py --serve` does


@pytest.fixture
def serve_project(tmp_path: Path) -> Path:
    make_project(tmp_path)
    return tmp_path


def test_serve_prints_the_build_and_a_sample_url(serve_project: Path) -> None:
    log = serve_project / "serve.log"
    process = start(serve_command(), serve_project, log)
    try:
        port = int(wait_for(SERVING, log, process)[1])
        lines = log.read_text().splitlines()
        document = request(port, "GET", rating_path(7)).body
    finally:
        stop(process)
    # The build's own summary line first, in the build's own words.
    assert lines[0].startswith("built site: 5 articles")
    assert lines[1] == (
        f"Serving site/ at http://127.0.0.1:{port}/ — "
        f"try http://127.0.0.1:{port}/away/api/articles/1/rating/"
    )
    # No base URL anywhere: the served address is the base URL.
    assert document.startswith(
        f'{{"article_url": "http://127.0.0.1:{port}/away/api/articles/7/", "id": 7,'.encode()
    )


def test_serve_quiet_prints_its_address_and_errors_only(serve_project: Path) -> None:
    log = serve_project / "serve.log"
    process = start(serve_command("--quiet"), serve_project, log)
    try:
        port = int(wait_for(SERVING, log, process)[1])
        assert request(port, "GET", rating_path(7)).status == 200
        source = serve_project / "ratings.yaml"
        source.write_text(RATINGS.replace("7: [5, 4", "7: [1, 4"), encoding="utf-8")
        wait_until_served(port, b'"rating_sum": 25, "rating_count": 6', process)
        source.write_text(RATINGS.replace("[5, 4, 5", "[5, 4, 50"), encoding="utf-8")
        wait_for(r"^still serving the last good build$", log, process)
    finally:
        stop(process)
    assert log.read_text().splitlines() == [
        (
            f"Serving site/ at http://127.0.0.1:{port}/ — "
            f"try http://127.0.0.1:{port}/away/api/articles/1/rating/"
        ),
        "ratings.yaml:4:13: article 7: rating 50 is outside the scale 1..5",
        "still serving the last good build",
    ]


def wait_until_served(port: int, part: bytes, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + READY_SECONDS
    while part not in request(port, "GET", rating_path(7)).body:
        assert process.poll() is None
        assert time.monotonic() < deadline, f"never served {part!r}"
        time.sleep(0.02)


def test_serve_stops_on_ctrl_c_with_exit_0(serve_project: Path) -> None:
    log = serve_project / "serve.log"
    process = start(serve_command(), serve_project, log)
    try:
        port = int(wait_for(SERVING, log, process)[1])
        assert request(port, "GET", rating_path(7)).status == 200
        process.send_signal(signal.SIGINT)
        assert process.wait(STOP_SECONDS) == 0
    finally:
        stop(process)
    assert "Traceback" not in log.read_text()


def test_serve_refuses_a_bad_input_with_exit_2(serve_project: Path) -> None:
    (serve_project / "ratings.yaml").write_text("articles:\n  7: [5, 9]\nscale: [1, 5]\n")
    done = refused_serve(serve_project)
    assert done.returncode == 2
    assert done.stderr == "ratings.yaml:2:10: article 7: rating 9 is outside the scale 1..5\n"
    assert done.stdout == ""


def test_serve_refuses_a_port_in_use_with_exit_2(serve_project: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = refused_serve(serve_project, str(port))
    assert done.returncode == 2
    assert done.stderr == f"cannot serve at 127.0.0.1:{port}: Address already in use\n"
    assert done.stdout == ""


def test_serve_keeps_the_last_good_site_when_a_rebuild_fails(serve_project: Path) -> None:
    log = serve_project / "serve.log"
    process = start(serve_command(), serve_project, log)
    try:
        port = int(wait_for(SERVING, log, process)[1])
        good = request(port, "GET", rating_path(7)).body
        (serve_project / "ratings.yaml").write_text(RATINGS.replace("[5, 4, 5", "[5, 4, 50"))
        wait_for(r"^still serving the last good build$", log, process)
        assert (
            "ratings.yaml:4:13: article 7: rating 50 is outside the scale 1..5\n" in log.read_text()
        )
        assert request(port, "GET", rating_path(7)).body == good
        (serve_project / "ratings.yaml").write_text(RATINGS.replace("7: [5, 4", "7: [1, 4"))
        wait_for(r"^ratings.yaml changed: built site: 5 articles\b", log, process)
        assert (
            b'"rating_sum": 25, "rating_count": 6, "rating_value": "4.2"'
            in request(port, "GET", rating_path(7)).body
        )
    finally:
        stop(process)


# What only the WSGI app does


def test_create_app_needs_a_built_site(tmp_path: Path) -> None:
    with pytest.raises(InputError) as caught:
        create_app(str(tmp_path / "nowhere"))
    assert str(caught.value) == (
        f"{tmp_path / 'nowhere'}: no such folder: build the site first (python generate.py)"
    )


# 2023-11-14 22:13:20 UTC and 123456789 ns: seconds and nanoseconds tell the ETags apart.
MTIME_NS: Final = 1_700_000_000_123_456_789


@contextlib.contextmanager
def utc() -> Iterator[None]:
    """The process's local time zone is UTC meanwhile."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = "UTC"
    time.tzset()
    try:
        yield
    finally:
        if before is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = before
        time.tzset()


def test_the_fast_static_file_answers_as_whitenoise_s(tmp_path: Path) -> None:
    """_StaticFile answers as stock StaticFile, made on its own, but for the documented ETag.

    Stock WhiteNoise computes its ETag from the mtime in whole seconds (read
    back through time.mktime, in local time: the test runs in UTC); ours counts
    nanoseconds, so that two rebuilds in one second differ. Everything else,
    Last-Modified included, is the same, and every answer is, the ETag aside.
    """
    path = tmp_path / "index.json"
    path.write_bytes(b'{"id": 7}\n')
    os.utime(path, ns=(MTIME_NS, MTIME_NS))
    status = os.stat(path)
    ours = _StaticFile(str(path), "application/json", status)
    with utc():
        theirs = StaticFile(
            str(path), [("Content-Type", "application/json")], stat_cache={str(path): status}
        )
    # Where they agree, and where they differ by design (ratings_api/server.py).
    assert ours.last_modified == theirs.last_modified
    assert theirs.etag == '"6553f100-a"'  # 1700000000 s, 10 bytes
    assert ours.etag == f'"{MTIME_NS:x}-a"'
    modified = dict(theirs.alternatives[0][2])["Last-Modified"]
    assert modified == "Tue, 14 Nov 2023 22:13:20 GMT"
    for request_headers, their_headers in (
        ({}, {}),
        ({"HTTP_IF_NONE_MATCH": ours.etag}, {"HTTP_IF_NONE_MATCH": theirs.etag}),
        ({"HTTP_IF_NONE_MATCH": '"0-0"'}, {"HTTP_IF_NONE_MATCH": '"0-0"'}),
        ({"HTTP_IF_MODIFIED_SINCE": modified}, {"HTTP_IF_MODIFIED_SINCE": modified}),
        ({"HTTP_RANGE": "bytes=2-5"}, {"HTTP_RANGE": "bytes=2-5"}),
        ({"HTTP_RANGE": "bytes=50-60"}, {"HTTP_RANGE": "bytes=50-60"}),
        ({"HTTP_RANGE": "lines=1-2"}, {"HTTP_RANGE": "lines=1-2"}),
        ({"HTTP_ACCEPT_ENCODING": "gzip, br"}, {"HTTP_ACCEPT_ENCODING": "gzip, br"}),
    ):
        for method in ("GET", "HEAD"):
            with open(path, "rb") as file:
                response = ours.respond(file, method, request_headers)
                assert file.closed == (response.file is None)  # what is not sent is closed
                got = summary(response, etag=ours.etag)
            assert got == summary(theirs.get_response(method, their_headers), etag=theirs.etag)
    # The difference as a client meets it: WhiteNoise's ETag is not ours, so a
    # copy validated by stock WhiteNoise is sent again in full, never wrongly kept.
    with open(path, "rb") as file:
        response = ours.respond(file, "GET", {"HTTP_IF_NONE_MATCH": theirs.etag})
        assert summary(response, etag=ours.etag)[0] == HTTPStatus.OK


def summary(response: Response, etag: str) -> tuple[object, ...]:
    """Status, headers and body; the object's own ``etag`` named, not spelled out."""
    body = None
    if response.file is not None:
        with response.file:
            body = response.file.read()
    headers = [(name, "<its ETag>" if value == etag else value) for name, value in response.headers]
    return response.status, sorted(headers), body


def test_an_unservable_file_is_the_json_404_and_a_lost_site_a_json_500(
    serve_project: Path,
) -> None:
    """No traceback on an error path: each answer follows the contract, with one log line."""
    site = serve_project / "site"
    log = serve_project / "serve.log"
    process = start(serve_command(), serve_project, log)
    try:
        port = int(wait_for(SERVING, log, process)[1])
        os.mkfifo(site / "fifo")
        with socket.socket(socket.AF_UNIX) as listening:
            listening.bind(str(site / "socket"))
            for path in ("/fifo", "/socket"):
                reply = request(port, "GET", path)
                assert (reply.status, reply.body) == (404, NOT_FOUND), path
        os.rename(site, serve_project / "elsewhere")  # the site's folder gone from under it
        for method in ("GET", "HEAD"):
            reply = request(port, method, rating_path(7))
            assert reply.status == 500
            assert reply.body == (SERVER_ERROR if method == "GET" else b"")
            assert reply.header("Content-Type") == "application/json"
            assert reply.header("Content-Length") == str(len(SERVER_ERROR))
            assert reply.header("Access-Control-Allow-Origin") == "*"
            assert reply.header("X-Content-Type-Options") == "nosniff"
            assert reply.header("Cache-Control") == CACHE_CONTROL
        os.rename(serve_project / "elsewhere", site)
        assert request(port, "GET", rating_path(7)).status == 200
    finally:
        stop(process)
    text = log.read_text()
    assert "Traceback" not in text
    lost = f"{serve_project / 'site'}: cannot open the site's folder: No such file or directory"
    assert text.count(f"GET {rating_path(7)}: 500: {lost}\n") == 1
    assert text.count(f"HEAD {rating_path(7)}: 500: {lost}\n") == 1
