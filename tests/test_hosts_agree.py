"""The app is the oracle: every host answers generated requests as the app does.

Hypothesis generates requests (paths with percent-encodings, dots, slashes,
doubled slashes, non-ASCII and control bytes, ids at and past the limits;
``Range``, ``If-None-Match``, ``If-Modified-Since``; the methods) and sends
each, byte for byte, to a host of the contract suite and to the WhiteNoise app
serving the same folder (called in this process, as a WSGI server calls it).
The host must give the app's status, body and contract headers, or differ
only where docs/hosts.md's table (``Host.differences``) says it does, on a
line the request touches (``touched``). The CloudFront function is held to
the app in node, on batches of the same requests.

Bounded: a fixed seed (``derandomize``), EXAMPLES requests a host, and the
hosts are the contract suite's own, started once a session (tests/conftest.py).
"""

from __future__ import annotations

import datetime
import email.utils
import http.client
import io
import re
import socket
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from email.message import Message
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final
from wsgiref.util import setup_testing_defaults

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ratings_api.server import create_app, route
from tests.contract import ARTICLES, NOT_FOUND, REQUEST_SECONDS, STOPS, Host
from tests.test_cloudfront import headers as cloudfront_headers
from tests.test_cloudfront import node, viewer_request

if TYPE_CHECKING:
    from wsgiref.types import WSGIApplication

EXAMPLES: Final = 60  # requests a host; each costs two to four requests
CLOUDFRONT_BATCHES: Final = 3
CLOUDFRONT_BATCH: Final = 150
# The headers of the contract, compared with the app's (names in lower case).
CONTRACT_HEADERS: Final = (
    "content-type",
    "content-range",
    "location",
    "allow",
    "access-control-allow-origin",
    "x-content-type-options",
    "cache-control",
    "content-security-policy",
)

# The requests

TEMPLATES: Final = (
    "/away/api/articles/{id}/rating/",
    "/away/api/articles/{id}/rating",
    "/away/api/articles/{id}/rating/index.json",
    "/",
    "/index.html",
    "/about/",
    "/about",
    "/robots.txt",
    "/CNAME",
    "/.hidden",
    "/away/api/openapi.json",
    "/nothing",
)
IDS: Final = (
    *(str(article) for article in ARTICLES),
    "2",
    "0",
    "07",
    "+7",
    "9" * 19,  # the longest id an article may have
    "1" + "0" * 19,  # one digit more
    "1" * 300,
)
# Pieces put into a path: separators, dots, encodings and bytes servers read differently.
PIECES: Final = (
    "/",
    "//",
    "/./",
    "/../",
    "/..",
    ".",
    "%2f",
    "%2F",
    "%2e",
    "%2E%2E",
    "%5c",
    "\\",
    "%00",
    "\x00",
    "%01",
    "\x01",
    "\x7f",
    "%7f",
    "%20",
    "%3F",
    "%23",
    "%3B",
    "%25",
    "%C3%A9",
    "é",
    "\xff",
    "7",
    "9" * 19,
    "a" * 2100,
)
INVALID_UTF8: Final = ("%ff", "%c0%af")  # netlify dev exits on these: its own table line
METHODS: Final = ("GET", "GET", "GET", "HEAD", "HEAD", "OPTIONS", "POST", "PUT", "DELETE")
NUMBERS: Final = st.sampled_from((0, 1, 9, 130, 136, 137, 138, 500, 10**20)) | st.integers(0, 200)
RANGE_SPEC: Final = st.one_of(
    st.builds(lambda a, b: f"{a}-{b}", NUMBERS, NUMBERS),
    st.builds(lambda a: f"{a}-", NUMBERS),
    st.builds(lambda n: f"-{n}", NUMBERS),
    st.sampled_from(("-", "abc", "")),
)
RANGES: Final = st.builds(
    lambda unit, specs, joint: f"{unit}={joint.join(specs)}",
    st.sampled_from(("bytes", "bytes", "bytes", "BYTES", "lines")),
    st.lists(RANGE_SPEC, min_size=1, max_size=3),
    st.sampled_from((",", ", ")),
)
# Validators as the host itself sent them (OWN), or other values.
OWN: Final = "<its own>"
TAGS: Final = st.sampled_from((OWN, f"W/{OWN}", "*", '"0-0"', f'"0-0", {OWN}', "garbage"))
DATES: Final = st.sampled_from((OWN, "a day later", "Thu, 01 Jan 1998 00:00:00 GMT", "garbage"))


@dataclass(frozen=True)
class Asked:
    """A generated request: sent byte for byte."""

    method: str
    target: bytes
    headers: Mapping[str, str] = field(default_factory=dict)


def target(template: str, article: str, pieces: list[tuple[int, str]], query: bool) -> bytes:
    path = template.format(id=article)
    for at, piece in pieces:
        cut = at % (len(path) + 1)
        path = path[:cut] + piece + path[cut:]
    if not path.startswith("/"):
        path = "/" + path
    return path.encode("utf-8", "surrogateescape").replace(b"\xc3\xbf", b"\xff") + (
        b"?v=1" if query else b""
    )


def requests(pieces: tuple[str, ...]) -> st.SearchStrategy[Asked]:
    paths = st.builds(
        target,
        st.sampled_from(TEMPLATES),
        st.sampled_from(IDS),
        st.lists(st.tuples(st.integers(0, 60), st.sampled_from(pieces)), max_size=2),
        st.booleans(),
    )
    headers = st.fixed_dictionaries(
        {},
        optional={"Range": RANGES, "If-None-Match": TAGS, "If-Modified-Since": DATES},
    )
    return st.builds(Asked, st.sampled_from(METHODS), paths, headers)


# The answers


@dataclass(frozen=True)
class Answer:
    status: int
    headers: Mapping[str, str]  # the contract's, in lower case
    body: bytes

    def differences(self, other: Answer) -> list[str]:
        """What differs: "status", "body" or a header's name."""
        said = ["status"] if self.status != other.status else []
        said += ["body"] if self.body != other.body else []
        return said + [
            name for name in CONTRACT_HEADERS if self.headers.get(name) != other.headers.get(name)
        ]


def contract_headers(message: Message | Iterable[tuple[str, str]]) -> dict[str, str]:
    pairs = message.items() if isinstance(message, Message) else message
    return {name.lower(): value for name, value in pairs if name.lower() in CONTRACT_HEADERS}


def send(port: int, asked: Asked) -> Answer:
    """The host's answer to ``asked``, sent byte for byte on a new connection."""
    lines = [asked.method.encode() + b" " + asked.target + b" HTTP/1.1", b"Host: 127.0.0.1"]
    lines += [f"{name}: {value}".encode() for name, value in asked.headers.items()]
    lines += [b"Content-Length: 0"] if asked.method in ("POST", "PUT") else []
    with socket.create_connection(("127.0.0.1", port), timeout=REQUEST_SECONDS) as connection:
        connection.sendall(b"\r\n".join([*lines, b"Connection: close", b"", b""]))
        response = http.client.HTTPResponse(connection, method=asked.method)
        try:
            response.begin()
            return Answer(response.status, contract_headers(response.headers), response.read())
        finally:
            response.close()


def oracle(site: Path, asked: Asked) -> Answer:
    """The WhiteNoise app's answer, with the contract's headers."""
    status, headers, body = call_app(site, asked)
    return Answer(status, contract_headers(headers.items()), body)


def call_app(site: Path, asked: Asked) -> tuple[int, dict[str, str], bytes]:
    """Call the app on ``site`` as a WSGI server does (PEP 3333): status, headers, body."""
    path, _, query = asked.target.partition(b"?")
    environ = {
        "REQUEST_METHOD": asked.method,
        "PATH_INFO": urllib.parse.unquote_to_bytes(path).decode("latin-1"),
        "QUERY_STRING": query.decode("latin-1"),
        "wsgi.errors": io.StringIO(),
        **{
            f"HTTP_{name.upper().replace('-', '_')}": value for name, value in asked.headers.items()
        },
    }
    setup_testing_defaults(environ)
    said: list[tuple[str, list[tuple[str, str]]]] = []

    def start_response(status: str, headers: list[tuple[str, str]], *_: object) -> None:
        said.append((status, headers))

    app = APPS.get(site)
    if app is None:
        app = APPS[site] = create_app(str(site))
    chunks = app(environ, start_response)  # type: ignore[arg-type]
    body = b"".join(chunks)
    close = getattr(chunks, "close", None)
    if close is not None:
        close()
    status, headers = said[0]
    return int(status.split()[0]), {name.lower(): value for name, value in headers}, body


APPS: dict[Path, WSGIApplication] = {}


def with_validators(asked: Asked, etag: str | None, modified: str | None) -> Asked:
    """``asked`` with OWN replaced by the validators this side sent."""
    values = dict(asked.headers)
    if "If-None-Match" in values:
        values["If-None-Match"] = values["If-None-Match"].replace(OWN, etag or '"none"')
    if "If-Modified-Since" in values:
        date = modified or "Thu, 01 Jan 1998 00:00:00 GMT"
        later = email.utils.parsedate_to_datetime(date) + datetime.timedelta(days=1)
        values["If-Modified-Since"] = (
            values["If-Modified-Since"]
            .replace(OWN, date)
            .replace("a day later", email.utils.format_datetime(later, usegmt=True))
        )
    return Asked(asked.method, asked.target, values)


# Which lines of the table a request touches


MALFORMED_ESCAPE: Final = re.compile(rb"%(?![0-9A-Fa-f]{2})")


def valid_utf8(raw: bytes) -> bool:
    try:
        urllib.parse.unquote_to_bytes(raw).decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def decoded(asked: Asked) -> str:
    path = asked.target.partition(b"?")[0]
    return urllib.parse.unquote_to_bytes(path).decode("utf-8", "replace")


def climbs(path: str) -> bool:
    depth = 0
    for name in path.split("/")[1:]:
        depth += -1 if name == ".." else 0 if name in ("", ".") else 1
        if depth < 0:
            return True
    return False


STATUS: Final = re.compile(r"\b[1-5][0-9][0-9]\b")


def fits(documented: object, status: int) -> bool:
    """Whether a documented answer can be a response with ``status``: the statuses it names."""
    if isinstance(documented, int):
        return documented == status
    named = {int(found) for found in STATUS.findall(str(documented))}
    return not named or status in named


def touched(asked: Asked, field: str, status: int) -> set[str]:
    """The table's lines a difference in ``field`` of the answer to ``asked`` may come under."""
    raw = asked.target.partition(b"?")[0]
    path = decoded(asked)
    lower = raw.lower()
    lines = set()
    if asked.method not in ("GET", "HEAD", "OPTIONS"):
        lines |= {
            "POST, PUT, PATCH, DELETE, PROPFIND, TRACE on a rating",
            "the same on an unknown id and on `/`",
        }
    if asked.method == "OPTIONS":
        lines |= {"OPTIONS, with or without CORS, on a rating", "OPTIONS on an unknown id"}
    if asked.method == "HEAD":
        lines.add("HEAD: the headers of GET, no body")
    if "Range" in asked.headers:
        lines |= {
            "`Range: bytes=0-9`",
            "`Range`: one byte (`bytes=0-0`, `bytes=-1`)",
            "`Range`: several (`bytes=0-1,3-4`)",
            "`Range`: none satisfiable (`bytes=-0`, `bytes=500-`) or invalid (`bytes=5-2`)",
            "the 416's body",
            "`Range` past 2⁶³ (`bytes=0-99999999999999999999`)",
        }
    if "If-None-Match" in asked.headers:
        lines |= {
            "`If-None-Match` with the `ETag`, GET and HEAD",
            "`If-None-Match: *`, a list, or the weak form of the `ETag`",
        }
    if "If-Modified-Since" in asked.headers:
        lines |= {"`If-Modified-Since` the `Last-Modified`", "`If-Modified-Since` a later date"}
    if "If-Modified-Since" in asked.headers and "If-None-Match" in asked.headers:
        lines.add("`If-None-Match` with the `ETag` and an older or invalid `If-Modified-Since`")
    if climbs(path):
        lines.add("above the root (`../`, `%2e%2e`, `..%2f`, 1,300 × `../`)")
    if "/./" in path + "/" or "/../" in path + "/":
        lines.add("dot segments inside the root (`api/./articles`, `rating/.`)")
    if "//" in path:
        lines |= {
            "an empty segment (`/away//api/…`)",
            "a leading `//` (`//away/api/articles/7/rating/`)",
        }
    if b"%2f" in lower:
        lines.add("an encoded slash (`7%2Frating%2F`)")
    if "\\" in path:
        lines |= {
            "`/..%5csecret.txt` (an encoded backslash)",
            "`rating\\index.json` (a backslash for a slash)",
        }
    if b"%00" in raw:
        lines.add("`%00` in the path")
    if 0 in raw:
        lines.add("a NUL byte in the request line")
    if any(0 < byte < 0x20 or byte == 0x7F for byte in raw):
        lines.add("another control byte in the request line (`\\x01`, `\\x7f`)")
    if MALFORMED_ESCAPE.search(raw):
        lines.add("a malformed `%` escape (`/%3G`, `/%`)")
    if not valid_utf8(raw):
        lines.add("`/..%c0%af..%c0%afsecret.txt` (overlong UTF-8)")
    if any(byte > 0x7F for byte in raw):
        lines.add("a non-ASCII byte in the request line")
    if len(raw) > 1024:
        lines |= {"a path of 2,000 or 3,000 bytes", "a request line over 4094 bytes"}
    if "1" * 300 in path:
        lines.add("an id of 300 digits")
    if path.rstrip("/").endswith("/rating"):
        lines |= {
            "no slash (`7/rating`): GET, HEAD, with a query",
            "the no-slash redirect's body",
            "no slash, no article (`2/rating`, `abc/rating`)",
        }
    if path.endswith("/index.json"):
        lines.add("the document's own path (`7/rating/index.json`)")
    if path.endswith(("/about", "/about/.")):
        lines.add("a folder without its slash (`/about`)")
    if "/." in path:
        lines.add("a dotfile of yours (`/.hidden`)")
    if path.endswith(("/index.html", "/")):
        lines.add("the front page `/index.html`")
    if field in ("content-type", "body") and status == 404:
        lines |= {"`Content-Type` of a 404", "a 404's body"}
    if field == "content-type":
        lines |= {"`Content-Type` of a JSON file", "the `charset` of HTML and text files"}
    if field == "cache-control":
        lines |= {
            "`Cache-Control` of a file (200, 206, 304)",
            "`Cache-Control` of a 404",
            "`Cache-Control` of a redirect, 405 or OPTIONS",
        }
    if field == "content-security-policy":
        lines.add("the front page's `Content-Security-Policy`")
    return lines


def host_tags(port: int, asked: Asked) -> tuple[str | None, str | None]:
    """The host's own ETag and Last-Modified for the target, from a plain GET."""
    path = asked.target.partition(b"?")[0]
    with socket.create_connection(("127.0.0.1", port), timeout=REQUEST_SECONDS) as connection:
        connection.sendall(
            b"GET " + path + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        )
        response = http.client.HTTPResponse(connection, method="GET")
        try:
            response.begin()
            response.read()
            return response.headers.get("ETag"), response.headers.get("Last-Modified")
        finally:
            response.close()


def agree(host: Host, asked: Asked) -> None:
    """Assert that ``host`` answers ``asked`` as the app does, or as the table says."""
    app_asked, host_asked = asked, asked
    if "If-None-Match" in asked.headers or "If-Modified-Since" in asked.headers:
        app_asked = with_validators(asked, *app_tags(host.site, asked))
        host_asked = with_validators(asked, *host_tags(host.port, asked))
    expected = oracle(host.site, app_asked)
    got = send(host.port, host_asked)
    unexplained = [
        field
        for field in expected.differences(got)
        if not any(
            field != "status" or fits(host.expect(line), got.status)
            for line in touched(asked, field, expected.status) & set(host.differences)
        )
    ]
    assert not unexplained, (
        f"{host.name}: {asked.method} {asked.target!r} {dict(asked.headers)}: "
        f"{unexplained} differ, on no line the table lists for this host\n"
        f"  the app: {expected.status} {expected.headers} {expected.body[:200]!r}\n"
        f"  {host.name}: {got.status} {got.headers} {got.body[:200]!r}"
    )


def app_tags(site: Path, asked: Asked) -> tuple[str | None, str | None]:
    """The app's own ETag and Last-Modified for the target, from a plain GET."""
    headers = call_app(site, Asked("GET", asked.target.partition(b"?")[0]))[1]
    return headers.get("etag"), headers.get("last-modified")


def pieces_for(host: Host) -> tuple[str, ...]:
    """Invalid UTF-8 only for a host that does not exit on it (that is the table's own line)."""
    if host.expect("`/..%c0%af..%c0%afsecret.txt` (overlong UTF-8)") == STOPS:
        return PIECES
    return PIECES + INVALID_UTF8


def survives(host: Host, asked: Asked) -> bool:
    """Whether ``host`` stays up for ``asked``: netlify dev exits on an escape it cannot decode."""
    if host.expect("a malformed `%` escape (`/%3G`, `/%`)") != STOPS:
        return True
    path = asked.target.partition(b"?")[0]
    return not MALFORMED_ESCAPE.search(path) and valid_utf8(path)


def test_every_host_answers_as_the_app(server: Host) -> None:
    @settings(
        max_examples=EXAMPLES,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    @given(requests(pieces_for(server)).filter(lambda asked: survives(server, asked)))
    def agrees(asked: Asked) -> None:
        agree(server, asked)

    agrees()


# CloudFront: the function in node, and the bucket as the site's own files.


@pytest.fixture(scope="module")
def built_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.hosts import build_project

    return build_project(tmp_path_factory.mktemp("cloudfront_site"))


def stored(site: Path, key: str) -> bool:
    """Whether the bucket holds an object at ``key``: a regular file of the site, reached by no link."""
    path = site
    for name in key.split("/"):
        path = path / name
        if path.is_symlink():
            return False
    return path.is_file()


# A URI that S3 reads as one key: unreserved characters, slashes and %XX escapes.
FORWARDED: Final = re.compile(r"(?:[A-Za-z0-9._~!*'()/-]|%[0-9A-F]{2})*")
RATING_PATH: Final = re.compile(r"/away/api/articles/[1-9][0-9]*/rating/")


def cloudfront_agrees(site: Path, asked: Asked, result: dict[str, Any]) -> str | None:
    """Why the function's result for ``asked`` is not the app's answer, or None when it is."""
    app = oracle(site, asked)
    if "statusCode" not in result:  # passed on to S3, for the object at its key
        if not FORWARDED.fullmatch(result["uri"]):  # S3 would read `?`, `#` or `;` itself
            return f"on to {result['uri']!r}"
        key = urllib.parse.unquote(result["uri"])[1:]
        wanted = decoded(asked)
        if key != (wanted + "index.html" if wanted.endswith("/") else wanted)[1:] and (
            not RATING_PATH.fullmatch(wanted)
        ):
            return f"on to {key!r}, not the path asked for"
        if app.status == 200:
            file = route(decoded(asked))
            assert file is not None
            return None if key == file.file and stored(site, key) else f"on to {key!r}"
        # S3's answer for a missing key is the 404 page, the JSON error.
        return None if app.status != 200 and not stored(site, key) else f"on to {key!r}"
    got = cloudfront_headers(result)
    status = result["statusCode"]
    body = result.get("body", {}).get("data", "").encode()
    if status == 301 and app.status == 404 and decoded(asked).endswith("/rating"):
        return None  # documented: no slash, no article, the redirect comes first
    if (status, got.get("location"), got.get("allow")) != (
        app.status,
        app.headers.get("location"),
        app.headers.get("allow") if app.status != 404 else None,
    ):
        return f"{status} {got}"
    if asked.method != "HEAD" and body != app.body and (status, body) != (404, NOT_FOUND):
        return f"{status} {body!r}"
    return None


PRINTABLE_PIECES: Final = (
    tuple(piece for piece in PIECES if all(0x20 < ord(char) < 0x7F for char in piece))
    + INVALID_UTF8
)
# A distribution takes these methods only: the function never sees the others.
CLOUDFRONT_METHODS: Final = ("GET", "GET", "HEAD", "OPTIONS", "POST", "PUT", "DELETE", "PATCH")


def cloudfront_requests() -> st.SearchStrategy[list[Asked]]:
    one = st.builds(
        Asked,
        st.sampled_from(CLOUDFRONT_METHODS),
        requests(PRINTABLE_PIECES).map(lambda asked: asked.target),
    )
    return st.lists(one, min_size=CLOUDFRONT_BATCH, max_size=CLOUDFRONT_BATCH)


def test_the_cloudfront_function_answers_as_the_app(built_site: Path) -> None:
    @settings(
        max_examples=CLOUDFRONT_BATCHES,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(cloudfront_requests())
    def agrees(batch: list[Asked]) -> None:
        events = []
        for asked in batch:
            path, _, query = asked.target.decode("ascii").partition("?")
            events.append(viewer_request(path, asked.method, dict(urllib.parse.parse_qsl(query))))
        wrong = [
            f"{asked.method} {asked.target!r}: {why}"
            for asked, result in zip(batch, node(events), strict=True)
            if (why := cloudfront_agrees(built_site, asked, result)) is not None
        ]
        assert not wrong, "\n".join(wrong)

    agrees()
