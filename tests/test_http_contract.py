"""The HTTP contract of the served site, checked over real HTTP on every host.

A host is a real server started here on 127.0.0.1 with a port of the
system's choosing: ``python generate.py --serve`` and gunicorn running
``generate:create_app()``, the documented production command. Every check in
CHECKS runs against every host in HOSTS; to add a host (nginx, Netlify's
local server), add a function that starts it. Where a host legitimately
differs on a line of the contract, its ``differences`` say so, with the
reason, and the check asserts that host's value instead: nothing is skipped.
"""
from __future__ import annotations

import concurrent.futures
import functools
import http.client
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from email.message import Message
from pathlib import Path
from typing import Final
from urllib.parse import urljoin, urlsplit

import pytest
from whitenoise.responders import Response, StaticFile

from ratings_api.build import build
from ratings_api.describe import FRONT_PAGE_CSP
from ratings_api.errors import InputError
from ratings_api.server import _StaticFile, create_app

REPO: Final = Path(__file__).resolve().parent.parent
READY_SECONDS: Final = 20.0  # generous for a loaded CI machine; a start takes about 1 s
STOP_SECONDS: Final = 10.0
CACHE_CONTROL: Final = "public, max-age=0, must-revalidate"
ALLOW: Final = "GET, HEAD, OPTIONS"
NOT_FOUND: Final = b'{"detail": "Not found."}\n'
SECRET: Final = b"the file next to the site, which no URL may reach"

RATINGS: Final = """\
scale: [1, 5]
articles:
  1: [4, 5, 3, 4]
  7: [5, 4, 5, 5, 5, 5]
  12: {sum: 29, count: 6}
  31: []
  1000000: [5]
"""
ARTICLES: Final = (1, 7, 12, 31, 1000000)
# Files a user keeps in the site folder, served by the same safe lookup.
USER_FILES: Final = {
    "CNAME": b"ratings.example.com\n",
    "robots.txt": b"User-agent: *\n",
    "about/index.html": b"<!doctype html><title>About</title>\n",
    ".hidden": b"not for the web\n",
}

# The lines of the contract on which a host may differ, and what the app does.
DIFFERENCE_POINTS: Final = {
    "leading //": 404,
    "request line over 4094 bytes": 404,
    "NUL byte in the request line": 404,
    "non-ASCII byte in the request line": 404,
    "no-slash Location": "rating/",
}


@dataclass(frozen=True)
class Difference:
    value: object
    why: str


@dataclass
class Host:
    """A running server and what a check needs to know about it."""

    name: str
    port: int
    site: Path  # the folder served: expected bodies are read from it
    base_url: str  # the one the site was built with, in article_url
    process: subprocess.Popen[bytes]
    log: Path
    differences: Mapping[str, Difference] = field(default_factory=dict)

    def expect(self, point: str) -> object:
        """The contract's value at ``point``, or this host's documented difference."""
        assert point in DIFFERENCE_POINTS, point
        difference = self.differences.get(point)
        return DIFFERENCE_POINTS[point] if difference is None else difference.value

    def document(self, article_id: int) -> bytes:
        return (self.site / f"away/api/articles/{article_id}/rating/index.json").read_bytes()


# Servers


def hermetic_environ() -> dict[str, str]:
    """This environment without the variables a build takes its base URL from."""
    names = ("BASE_URL", "CONTEXT", "URL", "DEPLOY_PRIME_URL")
    return {name: value for name, value in os.environ.items() if name not in names}


def make_project(folder: Path, ratings: str = RATINGS) -> Path:
    """A ratings file, a site folder with the user's files, and a secret beside them."""
    (folder / "ratings.yaml").write_text(ratings, encoding="utf-8")
    for name, body in USER_FILES.items():
        path = folder / "site" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)
    (folder / "secret.txt").write_bytes(SECRET)
    return folder / "ratings.yaml"


def start(command: list[str], folder: Path, log: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as output:
        return subprocess.Popen(
            command, cwd=folder, stdout=output, stderr=subprocess.STDOUT,
            env=hermetic_environ(),
            # As in a terminal, SIGINT is Ctrl-C, even when the tests run in a
            # background job, which starts its children with SIGINT ignored.
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )


def wait_for(pattern: str, log: Path, process: subprocess.Popen[bytes]) -> re.Match[str]:
    """The first match of ``pattern`` in the server's output, within READY_SECONDS."""
    deadline = time.monotonic() + READY_SECONDS
    while True:
        text = log.read_text(errors="replace")
        found = re.search(pattern, text, re.MULTILINE)
        if found:
            return found
        if process.poll() is not None:
            raise AssertionError(f"the server exited with {process.returncode}:\n{text}")
        if time.monotonic() > deadline:
            raise AssertionError(f"no /{pattern}/ within {READY_SECONDS} s:\n{text}")
        time.sleep(0.02)


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def serve_command(*options: str) -> list[str]:
    return [sys.executable, "-W", "error", str(REPO / "generate.py"), "--serve", "--port", "0", *options]


SERVING: Final = r"^Serving site/ at http://127\.0\.0\.1:(\d+)/ "


def start_serve(folder: Path) -> Host:
    """``python generate.py --serve`` with no base URL: the served address is used."""
    make_project(folder)
    log = folder / "serve.log"
    process = start(serve_command(), folder, log)
    try:
        port = int(wait_for(SERVING, log, process)[1])
    except BaseException:
        stop(process)
        raise
    return Host(
        "generate --serve", port, folder / "site", f"http://127.0.0.1:{port}", process, log,
        {
            "leading //": Difference(
                200, "Python's http.server turns a leading // into / before the app "
                "sees the path, against open redirects (gh-87389)",
            ),
        },
    )


def start_gunicorn(folder: Path) -> Host:
    """The production command, run in the folder that holds site/."""
    make_project(folder)
    base_url = "https://ratings.example.com"
    build(str(folder / "ratings.yaml"), str(folder / "site"), base_url=base_url, environ={})
    log = folder / "gunicorn.log"
    command = [
        sys.executable, "-W", "error", "-m", "gunicorn", "--bind", "127.0.0.1:0",
        "--workers", "2", "--threads", "4", "--no-control-socket",
        "--pythonpath", str(REPO), "generate:create_app()",
    ]
    process = start(command, folder, log)
    try:
        port = int(wait_for(r"Listening at: http://127\.0\.0\.1:(\d+)", log, process)[1])
        wait_answering(port)
    except BaseException:
        stop(process)
        raise
    return Host(
        "gunicorn", port, folder / "site", base_url, process, log,
        {
            "request line over 4094 bytes": Difference(
                414, "gunicorn refuses a request line longer than --limit-request-line "
                "(4094 bytes) before the app sees it",
            ),
            "NUL byte in the request line": Difference(
                400, "gunicorn refuses control characters in the request line",
            ),
            "non-ASCII byte in the request line": Difference(
                400, "gunicorn refuses bytes outside ASCII in the request target",
            ),
        },
    )


def wait_answering(port: int) -> None:
    """gunicorn listens before its workers run: wait until one answers."""
    deadline = time.monotonic() + READY_SECONDS
    while True:
        try:
            request(port, "GET", "/")
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


HOSTS: Final[dict[str, Callable[[Path], Host]]] = {
    "generate --serve": start_serve,
    "gunicorn": start_gunicorn,
}


@pytest.fixture(scope="module", params=list(HOSTS))
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Host]:
    folder = tmp_path_factory.mktemp(request.param.replace(" ", "_"))
    host = HOSTS[request.param](folder)
    try:
        yield host
    finally:
        stop(host.process)


# A client


@dataclass
class Reply:
    status: int
    headers: Message
    body: bytes

    def header(self, name: str) -> str | None:
        """The header's value; a header sent twice is a failure, not a choice."""
        values = self.headers.get_all(name) or []
        assert len(values) <= 1, f"{name} sent {len(values)} times: {values}"
        return values[0] if values else None


def request(
    port: int, method: str, path: str, headers: Mapping[str, str] | None = None,
    body: bytes | None = None,
) -> Reply:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request(method, path, body=body, headers=dict(headers or {}))
        response = connection.getresponse()
        return Reply(response.status, response.headers, response.read())
    finally:
        connection.close()


def raw_request(port: int, target: bytes) -> tuple[int, bytes]:
    """Send a GET for ``target`` exactly as given: no client tidies it up."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(b"GET " + target + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        chunks = []
        while chunk := connection.recv(65536):
            chunks.append(chunk)
    answer = b"".join(chunks)
    status = re.match(rb"HTTP/1\.[01] (\d{3}) ", answer)
    assert status, answer[:200]
    return int(status[1]), answer


def assert_common_headers(reply: Reply) -> None:
    assert reply.header("Access-Control-Allow-Origin") == "*"
    assert reply.header("X-Content-Type-Options") == "nosniff"
    assert reply.header("Cache-Control") == CACHE_CONTROL


def assert_not_found(reply: Reply, method: str = "GET") -> None:
    assert reply.status == 404
    assert reply.header("Content-Type") == "application/json"
    assert reply.header("Content-Length") == str(len(NOT_FOUND))
    assert reply.body == (NOT_FOUND if method == "GET" else b"")
    assert_common_headers(reply)


def rating_path(article_id: int | str) -> str:
    return f"/away/api/articles/{article_id}/rating/"


# The checks: each takes a running host and asserts one line of the contract.

CHECKS: dict[str, Callable[[Host], None]] = {}


def check(name: str, **arguments: object) -> Callable[[Callable[..., None]], Callable[..., None]]:
    def register(function: Callable[..., None]) -> Callable[..., None]:
        assert name not in CHECKS, name
        CHECKS[name] = functools.partial(function, **arguments)
        return function
    return register


def check_document(host: Host, article_id: int) -> None:
    reply = request(host.port, "GET", rating_path(article_id))
    assert reply.status == 200
    assert reply.header("Content-Type") == "application/json"
    assert reply.body == host.document(article_id)
    assert reply.header("Content-Length") == str(len(reply.body))
    assert re.fullmatch(r'"[0-9a-f]+-[0-9a-f]+"', reply.header("ETag") or "")
    assert reply.header("Last-Modified")
    assert_common_headers(reply)


for _id in ARTICLES:
    check(f"GET the rating of article {_id}", article_id=_id)(check_document)


@check("GET: the document of article 7, byte for byte")
def check_document_bytes(host: Host) -> None:
    reply = request(host.port, "GET", rating_path(7))
    assert reply.body == (
        f'{{"article_url": "{host.base_url}/away/api/articles/7/", "id": 7, '
        '"rating_sum": 29, "rating_count": 6, "rating_value": "4.8"}\n'
    ).encode()


@check("HEAD: the headers of GET, no body")
def check_head(host: Host) -> None:
    got = request(host.port, "GET", rating_path(7))
    reply = request(host.port, "HEAD", rating_path(7))
    assert reply.status == 200
    assert reply.body == b""
    for name in ("Content-Type", "Content-Length", "ETag", "Last-Modified"):
        assert reply.header(name) == got.header(name), name
    assert_common_headers(reply)


@check("no slash: a redirect to the slash form, with CORS headers")
def check_no_slash(host: Host) -> None:
    reply = request(host.port, "GET", "/away/api/articles/7/rating")
    assert reply.status == 301
    assert reply.header("Location") == host.expect("no-slash Location")
    assert reply.body == b""
    assert_common_headers(reply)  # without them a browser's fetch stops here
    followed = urlsplit(urljoin(f"http://127.0.0.1:{host.port}/away/api/articles/7/rating",
                                reply.header("Location") or ""))
    assert followed.path == rating_path(7)
    again = request(host.port, "GET", followed.path)
    assert again.status == 200
    assert again.body == host.document(7)
    assert_common_headers(again)


@check("no slash: the query string is kept")
def check_no_slash_query(host: Host) -> None:
    reply = request(host.port, "GET", "/away/api/articles/7/rating?v=2")
    assert reply.status == 301
    assert reply.header("Location") == f"{host.expect('no-slash Location')}?v=2"


@check("no slash, HEAD: the same redirect")
def check_no_slash_head(host: Host) -> None:
    reply = request(host.port, "HEAD", "/away/api/articles/7/rating")
    assert reply.status == 301
    assert reply.header("Location") == host.expect("no-slash Location")
    assert_common_headers(reply)


NOT_FOUND_PATHS: Final = (
    rating_path(2),  # an id with no article
    rating_path(99999999999999999999),
    rating_path("1" * 300),  # longer than a file name may be
    rating_path("abc"),
    rating_path("07"),
    rating_path("-1"),
    rating_path("0"),
    rating_path("+7"),
    rating_path("7.0"),
    rating_path("%207"),
    rating_path("0x7"),
    "/away/api/articles/2/rating",  # no slash and no article: no redirect either
    "/away/api/articles/abc/rating",
    "/away/api/articles/7/rating/index.json",
    "/away/api/articles/7/rating//",
    "/away/api/articles/7/rating/extra",
    "/away/api/articles/7/ratings/",
    "/away/api/articles/7/",
    "/away/api/articles/7",
    "/away/api/articles/",
    "/away/api/articles",
    "/away/api/",
    "/away/api",
    "/away/api/nothing",
    "/AWAY/api/articles/7/rating/index.json",
    "/nothing",
    "/about",  # a folder without its slash
    "/.hidden",
    "/.generate-state",  # the build's record
)


def check_not_found(host: Host, path: str, method: str) -> None:
    assert_not_found(request(host.port, method, path), method)


for _path in NOT_FOUND_PATHS:
    for _method in ("GET", "HEAD"):
        check(f"404 {_method} {_path}", path=_path, method=_method)(check_not_found)


def check_not_allowed(host: Host, method: str, path: str) -> None:
    reply = request(host.port, method, path, body=b'{"rating": 5}')
    assert reply.status == 405
    assert reply.header("Allow") == ALLOW
    assert reply.header("Content-Type") == "application/json"
    assert reply.body == f'{{"detail": "Method \\"{method}\\" not allowed."}}\n'.encode()
    assert reply.header("Content-Length") == str(len(reply.body))
    assert_common_headers(reply)


for _method in ("POST", "PUT", "PATCH", "DELETE", "TRACE", "PROPFIND"):
    for _path in (rating_path(7), rating_path(2), "/"):
        check(f"405 {_method} {_path}", method=_method, path=_path)(check_not_allowed)


def check_preflight(host: Host, path: str) -> None:
    reply = request(host.port, "OPTIONS", path, {
        "Origin": "https://news.example.org",
        "Access-Control-Request-Method": "GET",
        "Access-Control-Request-Headers": "if-none-match",
    })
    assert reply.status == 204
    assert reply.body == b""
    assert reply.header("Access-Control-Allow-Methods") == ALLOW
    assert reply.header("Access-Control-Allow-Headers") == "*"
    assert reply.header("Access-Control-Max-Age") == "86400"
    assert reply.header("Allow") == ALLOW
    assert_common_headers(reply)


for _path in (rating_path(7), rating_path(2)):
    check(f"CORS preflight {_path}", path=_path)(check_preflight)


@check("OPTIONS without CORS: 204 with Allow")
def check_options(host: Host) -> None:
    reply = request(host.port, "OPTIONS", rating_path(7))
    assert reply.status == 204
    assert reply.header("Allow") == ALLOW
    assert_common_headers(reply)


@check("a cross-origin GET: readable from any origin")
def check_cross_origin_get(host: Host) -> None:
    reply = request(host.port, "GET", rating_path(7), {"Origin": "https://news.example.org"})
    assert reply.status == 200
    assert reply.header("Access-Control-Allow-Origin") == "*"


@check("If-None-Match with the ETag: 304")
def check_if_none_match(host: Host) -> None:
    etag = request(host.port, "GET", rating_path(7)).header("ETag") or ""
    for method in ("GET", "HEAD"):
        reply = request(host.port, method, rating_path(7), {"If-None-Match": etag})
        assert reply.status == 304
        assert reply.body == b""
        assert reply.header("ETag") == etag
        assert_common_headers(reply)


@check("If-None-Match with another ETag: 200")
def check_if_none_match_other(host: Host) -> None:
    reply = request(host.port, "GET", rating_path(7), {"If-None-Match": '"0-0"'})
    assert reply.status == 200
    assert reply.body == host.document(7)


@check("If-Modified-Since the Last-Modified: 304")
def check_if_modified_since(host: Host) -> None:
    modified = request(host.port, "GET", rating_path(7)).header("Last-Modified") or ""
    reply = request(host.port, "GET", rating_path(7), {"If-Modified-Since": modified})
    assert reply.status == 304
    assert reply.body == b""
    assert_common_headers(reply)


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
    assert reply.status == 206
    assert reply.body == whole[:10]
    assert reply.header("Content-Range") == f"bytes 0-9/{len(whole)}"
    assert_common_headers(reply)


def check_other_file(host: Host, path: str, file: str, content_type: str) -> None:
    reply = request(host.port, "GET", path)
    assert reply.status == 200
    assert reply.header("Content-Type") == content_type
    assert reply.body == (host.site / file).read_bytes()
    assert_common_headers(reply)


HTML: Final = 'text/html; charset="utf-8"'  # WhiteNoise quotes the parameter
for _path, _name, _type in (
    ("/", "index.html", HTML),  # the front page the build writes
    ("/index.html", "index.html", HTML),
    ("/away/api/openapi.json", "away/api/openapi.json", "application/json"),
    ("/CNAME", "CNAME", "application/octet-stream"),
    ("/robots.txt", "robots.txt", 'text/plain; charset="utf-8"'),
    ("/about/", "about/index.html", HTML),
):
    check(f"another file: {_path}", path=_path, file=_name, content_type=_type)(check_other_file)


@check("the front page carries its Content-Security-Policy, and only it")
def check_front_page_policy(host: Host) -> None:
    assert request(host.port, "GET", "/").header("Content-Security-Policy") == FRONT_PAGE_CSP
    for path in (rating_path(7), "/away/api/openapi.json", "/robots.txt"):
        assert request(host.port, "GET", path).header("Content-Security-Policy") is None, path


# Requests that try to leave the root, sent byte for byte. A WSGI server
# decodes %XX before the app sees the path, so %2f is a slash like any other.
TRAVERSALS: Final = (
    b"/../secret.txt",
    b"/../../../../../../../../etc/passwd",
    b"/away/api/articles/7/rating/../../../../../../secret.txt",
    b"/%2e%2e/secret.txt",
    b"/%2E%2E/%2E%2E/%2E%2E/%2E%2E/etc/passwd",
    b"/away/api/articles/%2e%2e/%2e%2e/%2e%2e/%2e%2e/secret.txt",
    b"/..%2fsecret.txt",
    b"/away/api/articles/..%2f..%2f..%2f..%2fsecret.txt",
    b"/%2e%2e%2fsecret.txt",
    b"/..%5csecret.txt",
    b"/..\\secret.txt",
    b"/away/api/articles/7/rating\\index.json",
    b"/..%c0%af..%c0%afsecret.txt",
    b"/%00",
    b"/away/api/articles/7/rating/index.json%00",
    b"/openapi.json%00.html",
    b"/away/api/articles/7%00/rating/",
    b"//etc/passwd",
    b"/./secret.txt",
    b"/away/api/./articles/7/rating/",
    b"/away//api/articles/7/rating/",
    b"/away/api/articles/7/rating/.",
    b"http://127.0.0.1/../secret.txt",
    b"/" + b"a" * 2000,
    b"/away/api/articles/" + b"1" * 3000 + b"/rating/",
    b"/" + b"../" * 1300 + b"etc/passwd",
)


def check_traversal(host: Host, target: bytes, point: str | None = None) -> None:
    status, answer = raw_request(host.port, target)
    assert status == (host.expect(point) if point else 404)
    assert SECRET not in answer
    assert b"root:" not in answer


for _target in TRAVERSALS:
    check(f"traversal {_target[:60]!r}", target=_target)(check_traversal)

for _target, _point in (
    (b"//away/api/articles/7/rating/", "leading //"),
    (b"/" + b"a" * 5000, "request line over 4094 bytes"),
    (b"/away/api/articles/7/rating/\x00", "NUL byte in the request line"),
    (b"/../secret.txt\x00", "NUL byte in the request line"),
    (b"/away/api/articles/7/rating/\xff", "non-ASCII byte in the request line"),
):
    check(f"server-dependent {_target[:60]!r}", target=_target, point=_point)(check_traversal)


@check("an encoded slash is a slash")
def check_encoded_slash(host: Host) -> None:
    reply = request(host.port, "GET", "/away/api/articles/7%2Frating%2F")
    assert reply.status == 200
    assert reply.body == host.document(7)


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
    for (path, status), (_, got_status, body) in zip(work, results):
        assert got_status == status, path
        expected = NOT_FOUND if status == 404 else host.document(int(path.split("/")[4]))
        assert body == expected, path


assert len(CHECKS) > 100, "the contract lost its checks"


@pytest.mark.parametrize("name", list(CHECKS))
def test_contract(server: Host, name: str) -> None:
    CHECKS[name](server)


def test_differences_are_known_points_with_a_reason(server: Host) -> None:
    assert set(server.differences) <= set(DIFFERENCE_POINTS)
    for point, difference in server.differences.items():
        assert difference.value != DIFFERENCE_POINTS[point], f"{point}: no difference"
        assert difference.why


def test_a_rebuild_is_seen_at_the_next_request(server: Host) -> None:
    old = request(server.port, "GET", rating_path(7))
    changed = RATINGS.replace("7: [5, 4, 5, 5, 5, 5]", "7: [5, 4, 5, 5, 5, 4]")
    rebuild(server, changed)
    try:
        reply = request(server.port, "GET", rating_path(7))
        assert reply.body == (
            f'{{"article_url": "{server.base_url}/away/api/articles/7/", "id": 7, '
            '"rating_sum": 28, "rating_count": 6, "rating_value": "4.7"}\n'
        ).encode()
        assert reply.header("ETag") != old.header("ETag")
        stale = request(server.port, "GET", rating_path(7), {"If-None-Match": old.header("ETag") or ""})
        assert stale.status == 200
        assert stale.body == reply.body
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
    done = subprocess.run(
        serve_command(), cwd=serve_project, capture_output=True, text=True,
        env=hermetic_environ(), timeout=READY_SECONDS,
    )
    assert done.returncode == 2
    assert done.stderr == "ratings.yaml:2:10: article 7: rating 9 is outside the scale 1..5\n"
    assert done.stdout == ""


def test_serve_refuses_a_port_in_use_with_exit_2(serve_project: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        command = serve_command()
        command[command.index("--port") + 1] = str(port)
        done = subprocess.run(
            command, cwd=serve_project, capture_output=True, text=True,
            env=hermetic_environ(), timeout=READY_SECONDS,
        )
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
        assert "ratings.yaml:4:13: article 7: rating 50 is outside the scale 1..5\n" in log.read_text()
        assert request(port, "GET", rating_path(7)).body == good
        (serve_project / "ratings.yaml").write_text(RATINGS.replace("7: [5, 4", "7: [1, 4"))
        wait_for(r"^ratings.yaml changed: built site: 5 articles\b", log, process)
        assert b'"rating_sum": 25, "rating_count": 6, "rating_value": "4.2"' in request(
            port, "GET", rating_path(7)
        ).body
    finally:
        stop(process)


# What only the WSGI app does


def test_create_app_needs_a_built_site(tmp_path: Path) -> None:
    with pytest.raises(InputError) as caught:
        create_app(str(tmp_path / "nowhere"))
    assert str(caught.value) == (
        f"{tmp_path / 'nowhere'}: no such folder: build the site first (python generate.py)"
    )


def test_the_fast_static_file_answers_as_whitenoise_s(tmp_path: Path) -> None:
    """_StaticFile sets what StaticFile's own constructor would, so both answer alike."""
    path = tmp_path / "index.json"
    path.write_bytes(b'{"id": 7}\n')
    status = os.stat(path)
    ours = _StaticFile(str(path), "application/json", status)
    theirs = StaticFile(
        str(path), [("Content-Type", "application/json"), ("ETag", ours.etag)],
        stat_cache={str(path): status},
    )
    assert (ours.etag, ours.last_modified) == (theirs.etag, theirs.last_modified)
    modified = dict(theirs.alternatives[0][2])["Last-Modified"]
    for request_headers in (
        {},
        {"HTTP_IF_NONE_MATCH": ours.etag},
        {"HTTP_IF_NONE_MATCH": '"0-0"'},
        {"HTTP_IF_MODIFIED_SINCE": modified},
        {"HTTP_RANGE": "bytes=2-5"},
        {"HTTP_RANGE": "bytes=50-60"},
        {"HTTP_RANGE": "lines=1-2"},
        {"HTTP_ACCEPT_ENCODING": "gzip, br"},
    ):
        for method in ("GET", "HEAD"):
            with open(path, "rb") as file:
                response = ours.respond(file, method, request_headers)
                assert file.closed == (response.file is None)  # what is not sent is closed
                got = summary(response)
            assert got == summary(theirs.get_response(method, request_headers))


def summary(response: Response) -> tuple[object, ...]:
    body = None
    if response.file is not None:
        with response.file:
            body = response.file.read()
    return response.status, sorted(response.headers), body
