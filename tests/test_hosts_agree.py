"""The app is the oracle: every host answers generated requests as the app does.

Hypothesis (a fixed seed) sends odd requests byte for byte to each host and to the app; a host
may differ only on a line of its table the request touches. The CloudFront function too, in node.
"""

from __future__ import annotations

import datetime
import email.utils
import re
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from email.message import Message
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ratings_api.server import create_app, route
from tests.contract import ARTICLES, NOT_FOUND, POINTS, STOPS, Host, call_app, raw_request
from tests.test_cloudfront import headers as cloudfront_headers
from tests.test_cloudfront import node, viewer_request

pytestmark = pytest.mark.real_world

if TYPE_CHECKING:
    from wsgiref.types import WSGIApplication

EXAMPLES: Final = 60  # requests a host; each costs two to four requests
CLOUDFRONT_BATCHES: Final = 3
CLOUDFRONT_BATCH: Final = 150
# The headers of the contract, compared with the app's (names in lower case).
CONTRACT_HEADERS: Final = (
    *("content-type", "content-range", "location", "allow", "access-control-allow-origin"),
    *("x-content-type-options", "cache-control", "content-security-policy"),
)

# The requests

TEMPLATES: Final = (
    *("/away/api/articles/{id}/rating/", "/away/api/articles/{id}/rating"),
    *("/away/api/articles/{id}/rating/index.json", "/", "/index.html", "/about/", "/about"),
    *("/robots.txt", "/CNAME", "/.hidden", "/away/api/openapi.json", "/nothing"),
)
IDS: Final = (
    *(str(article) for article in ARTICLES),
    *("2", "0", "07", "+7"),
    "9" * 19,  # the longest id an article may have
    "1" + "0" * 19,  # one digit more
    "1" * 300,
)
# Pieces put into a path: separators, dots, encodings and bytes servers read differently.
PIECES: Final = (
    *("/", "//", "/./", "/../", "/..", ".", "%2f", "%2F", "%2e", "%2E%2E", "%5c", "\\", "%00"),
    *("\x00", "%01", "\x01", "\x7f", "%7f", "%20", "%3F", "%23", "%3B", "%25", "%C3%A9", "é"),
    *("\xff", "7", "9" * 19, "a" * 2100),
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
# Validators as the host itself sent them (OWN, OWN_DATE), or other values.
OWN: Final = "<its own>"
OWN_DATE: Final = "<its own date>"
TAGS: Final = st.sampled_from((OWN, f"W/{OWN}", "*", '"0-0"', f'"0-0", {OWN}', "garbage"))
DATES: Final = st.sampled_from((OWN_DATE, "a day later", "Thu, 01 Jan 1998 00:00:00 GMT", "x"))
IF_RANGE: Final = st.sampled_from((OWN, OWN_DATE, f"W/{OWN}", '"deadbeef-1"', "a day later"))


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
    raw = path.encode("utf-8", "surrogateescape").replace(b"\xc3\xbf", b"\xff")
    return raw + (b"?v=1" if query else b"")


def requests(pieces: tuple[str, ...]) -> st.SearchStrategy[Asked]:
    paths = st.builds(
        target,
        st.sampled_from(TEMPLATES),
        st.sampled_from(IDS),
        st.lists(st.tuples(st.integers(0, 60), st.sampled_from(pieces)), max_size=2),
        st.booleans(),
    )
    optional = {"Range": RANGES, "If-Range": IF_RANGE, "If-None-Match": TAGS}
    headers = st.fixed_dictionaries({}, optional={**optional, "If-Modified-Since": DATES})
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
        names = [
            name for name in CONTRACT_HEADERS if self.headers.get(name) != other.headers.get(name)
        ]
        return said + names


def contract_headers(pairs: Iterable[tuple[str, str]]) -> dict[str, str]:
    return {name.lower(): value for name, value in pairs if name.lower() in CONTRACT_HEADERS}


def send(port: int, asked: Asked) -> tuple[Answer, Message]:
    """The host's answer to ``asked``, sent byte for byte on a new connection, and its headers."""
    lines = [f"{name}: {value}\r\n".encode() for name, value in asked.headers.items()]
    lines += [b"Content-Length: 0\r\n"] if asked.method in ("POST", "PUT") else []
    reply = raw_request(port, asked.target, asked.method, b"".join(lines))
    return Answer(reply.status, contract_headers(reply.headers.items()), reply.body), reply.headers


APPS: dict[Path, WSGIApplication] = {}


def oracle(site: Path, asked: Asked) -> tuple[Answer, dict[str, str]]:
    """The app's answer, called as gunicorn calls it, and all its headers (names in lower case)."""
    app = APPS.get(site) or APPS.setdefault(site, create_app(str(site)))
    status, headers, body = call_app(app, asked.method, asked.target, asked.headers)
    return Answer(status, contract_headers(headers), body), {k.lower(): v for k, v in headers}


def with_validators(asked: Asked, etag: str | None, modified: str | None) -> Asked:
    """``asked`` with OWN and OWN_DATE replaced by the validators this side sent."""
    date = modified or "Thu, 01 Jan 1998 00:00:00 GMT"
    later = email.utils.parsedate_to_datetime(date) + datetime.timedelta(days=1)
    values = {
        name: value.replace(OWN_DATE, date)
        .replace(OWN, etag or '"none"')
        .replace("a day later", email.utils.format_datetime(later, usegmt=True))
        for name, value in asked.headers.items()
    }
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


NOT_ALLOWED_LINES: Final = (
    "POST, PUT, PATCH, DELETE, PROPFIND, TRACE on a rating",
    "the same on an unknown id and on `/`",
)
RANGE_LINES: Final = (*(point for point in POINTS if "Range" in point), "the 416's body")
BY_METHOD: Final = {
    "HEAD": ("HEAD: the headers of GET, no body",),
    "OPTIONS": ("OPTIONS, with or without CORS, on a rating", "OPTIONS on an unknown id"),
    **dict.fromkeys(("POST", "PUT", "DELETE"), NOT_ALLOWED_LINES),
}
BY_HEADER: Final = {
    "Range": RANGE_LINES,
    "If-Range": RANGE_LINES,
    "If-None-Match": (
        "`If-None-Match` with the `ETag`, GET and HEAD",
        "`If-None-Match: *`, a list, or the weak form of the `ETag`",
    ),
    "If-Modified-Since": ("`If-Modified-Since` the `Last-Modified` or later",),
}
# Of the decoded path: a pattern, and the lines a path it finds touches.
BY_PATH: Final = {
    r"(^|/)\.\.?(/|$)": ("dot segments inside the root (`api/./articles`, `rating/.`)",),
    r"//": (
        "an empty segment (`/away//api/…`)",
        "a leading `//` (`//away/api/articles/7/rating/`)",
    ),
    r"\\": (
        "`/..%5csecret.txt` (an encoded backslash)",
        "`rating\\index.json` (a backslash for a slash)",
    ),
    r"1{300}": ("an id of 300 digits",),
    r"/rating/*$": (
        *("no slash (`7/rating`): GET, HEAD, with a query", "the no-slash redirect's body"),
        *(
            "no slash, no article (`2/rating`, `abc/rating`)",
            "an encoded slash and no slash (`7%2Frating`)",
        ),
    ),
    r"/index\.json$": ("the document's own path (`7/rating/index.json`)",),
    r"/about(/\.)?$": ("a folder without its slash (`/about`)",),
    r"/\.": ("a dotfile of yours (`/.hidden`)",),
    r"(/index\.html|/)$": ("the front page `/index.html`",),
}
# Of the raw target.
BY_TARGET: Final = {
    rb"(?i)%2f": (
        "an encoded slash (`7%2Frating%2F`)",
        "an encoded slash and no slash (`7%2Frating`)",
    ),
    rb"%00": ("`%00` in the path",),
    rb"\x00": ("a NUL byte in the request line",),
    rb"[\x01-\x1f\x7f]": ("another control byte in the request line (`\\x01`, `\\x7f`)",),
    rb"%(?![0-9A-Fa-f]{2})": ("a malformed `%` escape (`/%3G`, `/%`)",),
    rb"[\x80-\xff]": ("a non-ASCII byte in the request line",),
    rb".{1025}": ("a path of 2,000 or 3,000 bytes", "a request line over 4094 bytes"),
}
BY_FIELD: Final = {
    "content-type": ("`Content-Type` of a JSON file", "the `charset` of HTML and text files"),
    "cache-control": (
        "`Cache-Control` of a file (200, 206, 304)",
        "`Cache-Control` of a 404",
        "`Cache-Control` of a redirect, 405 or OPTIONS",
    ),
    "content-security-policy": ("the front page's `Content-Security-Policy`",),
}


def touched(asked: Asked, field: str, status: int) -> set[str]:
    """The table's lines a difference in ``field`` of the answer to ``asked`` may come under."""
    raw, path = asked.target.partition(b"?")[0], decoded(asked)
    lines = {*BY_METHOD.get(asked.method, ()), *BY_FIELD.get(field, ())}
    lines |= {line for name in asked.headers for line in BY_HEADER.get(name, ())}
    lines |= {line for key, found in BY_PATH.items() if re.search(key, path) for line in found}
    lines |= {
        line for key, found in BY_TARGET.items() if re.search(key, raw, re.DOTALL) for line in found
    }
    if {"If-None-Match", "If-Modified-Since"} <= set(asked.headers):
        lines.add("`If-None-Match` with the `ETag` and an older or invalid `If-Modified-Since`")
    if climbs(path):
        lines.add("above the root (`../`, `%2e%2e`, `..%2f`, 1,300 × `../`)")
    if not valid_utf8(raw):
        lines.add("`/..%c0%af..%c0%afsecret.txt` (overlong UTF-8)")
    if field in ("content-type", "body") and status == 404:
        lines |= {"`Content-Type` of a 404", "a 404's body"}
    assert lines <= set(POINTS), lines - set(POINTS)
    return lines


STATUS: Final = re.compile(r"\b[1-5][0-9][0-9]\b")


def fits(documented: object, status: int) -> bool:
    """Whether a documented answer can be a response with ``status``: the statuses it names."""
    if isinstance(documented, int):
        return documented == status
    named = {int(found) for found in STATUS.findall(str(documented))}
    return not named or status in named


def validators(headers: Mapping[str, str]) -> tuple[str | None, str | None]:
    return headers.get("etag"), headers.get("last-modified")


def agree(host: Host, asked: Asked) -> None:
    """Assert that ``host`` answers ``asked`` as the app does, or as the table says."""
    app_asked, host_asked = asked, asked
    if {"If-None-Match", "If-Modified-Since", "If-Range"} & set(asked.headers):
        plain = Asked("GET", asked.target.partition(b"?")[0])
        app_asked = with_validators(asked, *validators(oracle(host.site, plain)[1]))
        host_headers = {k.lower(): v for k, v in send(host.port, plain)[1].items()}
        host_asked = with_validators(asked, *validators(host_headers))
    expected, got = oracle(host.site, app_asked)[0], send(host.port, host_asked)[0]
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


def survives(host: Host, asked: Asked) -> bool:
    """Whether ``host`` stays up for ``asked``: netlify dev exits on an escape it cannot decode."""
    if host.expect("a malformed `%` escape (`/%3G`, `/%`)") != STOPS:
        return True
    path = asked.target.partition(b"?")[0]
    return not MALFORMED_ESCAPE.search(path) and valid_utf8(path)


def test_every_host_answers_as_the_app(server: Host) -> None:
    stops = server.expect("`/..%c0%af..%c0%afsecret.txt` (overlong UTF-8)") == STOPS
    pieces = PIECES if stops else PIECES + INVALID_UTF8  # the table has its own line for these

    @settings(
        max_examples=EXAMPLES,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    @given(requests(pieces).filter(lambda asked: survives(server, asked)))
    def agrees(asked: Asked) -> None:
        agree(server, asked)

    agrees()


# CloudFront: the function in node, and the bucket as the site's own files.


@pytest.fixture(scope="module")
def built_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.hosts import build_project

    return build_project(tmp_path_factory.mktemp("cloudfront_site"))


def stored(site: Path, key: str) -> bool:
    """Whether the bucket holds an object at ``key``: a regular file of the site, by no link."""
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
    app, wanted = oracle(site, asked)[0], decoded(asked)
    if "statusCode" not in result:  # passed on to S3, for the object at its key
        if not FORWARDED.fullmatch(result["uri"]):  # S3 would read `?`, `#` or `;` itself
            return f"on to {result['uri']!r}"
        key = urllib.parse.unquote(result["uri"])[1:]
        asked_for = (wanted + "index.html" if wanted.endswith("/") else wanted)[1:]
        if key != asked_for and not RATING_PATH.fullmatch(wanted):
            return f"on to {key!r}, not the path asked for"
        if app.status == 200:
            file = route(wanted)
            assert file is not None
            return None if key == file.file and stored(site, key) else f"on to {key!r}"
        # S3's answer for a missing key is the 404 page, the JSON error.
        return None if not stored(site, key) else f"on to {key!r}"
    got, status = cloudfront_headers(result), result["statusCode"]
    body = result.get("body", {}).get("data", "").encode()
    if status == 301 and app.status == 404 and wanted.endswith("/rating"):
        return None  # documented: no slash, no article, the redirect comes first
    allow = app.headers.get("allow") if app.status != 404 else None
    if (status, got.get("location"), got.get("allow")) != (
        app.status,
        app.headers.get("location"),
        allow,
    ):
        return f"{status} {got}"
    if asked.method != "HEAD" and body != app.body and (status, body) != (404, NOT_FOUND):
        return f"{status} {body!r}"
    return None


PRINTABLE_PIECES: Final = (
    *(piece for piece in PIECES if all(0x20 < ord(char) < 0x7F for char in piece)),
    *INVALID_UTF8,
)
# A distribution takes these methods only: the function never sees the others.
CLOUDFRONT_METHODS: Final = ("GET", "GET", "HEAD", "OPTIONS", "POST", "PUT", "DELETE", "PATCH")


def test_the_cloudfront_function_answers_as_the_app(built_site: Path) -> None:
    one = st.builds(
        Asked,
        st.sampled_from(CLOUDFRONT_METHODS),
        requests(PRINTABLE_PIECES).map(lambda asked: asked.target),
    )

    @settings(
        max_examples=CLOUDFRONT_BATCHES,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(st.lists(one, min_size=CLOUDFRONT_BATCH, max_size=CLOUDFRONT_BATCH))
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
