"""Serve the built site over HTTP: the WSGI app, and ``python generate.py --serve``.

The app is WhiteNoise, with three changes for an API of a million files:

* a file is looked up when it is first asked for, not found by walking the
  whole folder at start-up, which for a million articles takes stock
  WhiteNoise over a minute and 3.6 GB (bench/serve.py);
* below ``/away/api/articles/`` the only resource is ``<id>/rating/``, with a
  canonical decimal id; elsewhere a path must be plain names to be looked up;
* every response, errors included, follows one contract: JSON errors in the
  style of Django REST framework, CORS for any origin, ``nosniff``, and a
  ``Cache-Control`` that makes caches revalidate (ratings change at each deploy).
"""

from __future__ import annotations

import errno
import functools
import json
import os
import re
import stat
import sys
import threading
import time
import traceback
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from email.utils import formatdate, parsedate
from http import HTTPStatus
from socketserver import ThreadingMixIn
from typing import TYPE_CHECKING, Any, BinaryIO, Final, NamedTuple
from wsgiref.headers import Headers
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer
from wsgiref.util import FileWrapper

from whitenoise import WhiteNoise
from whitenoise.responders import Response, SlicedFile, StaticFile

from ratings_api.build import build
from ratings_api.describe import FRONT_PAGE, FRONT_PAGE_CSP
from ratings_api.errors import InputError
from ratings_api.rating import ARTICLES_PATH

if TYPE_CHECKING:
    from wsgiref.types import FileWrapper as FileWrapperType
    from wsgiref.types import StartResponse, WSGIApplication, WSGIEnvironment

ALLOW: Final = "GET, HEAD, OPTIONS"
# Ratings change at every deploy, and a deploy cannot purge browsers' caches:
# caches may keep a copy but must ask again each time, which costs a 304.
CACHE_CONTROL: Final = "public, max-age=0, must-revalidate"
# On every response, errors and 304s too: a browser reads a cross-origin
# response, even a 404 or a redirect, only if it carries CORS headers.
COMMON_HEADERS: Final = (
    ("Access-Control-Allow-Origin", "*"),
    ("X-Content-Type-Options", "nosniff"),
    ("Cache-Control", CACHE_CONTROL),
)
PREFLIGHT_MAX_AGE: Final = "86400"  # browsers cap it lower anyway (Chrome: 2 hours)
CACHE_SIZE: Final = 10_000  # files whose WhiteNoise responder is kept, about 1.3 kB each
MAX_URL_PATH: Final = 1024  # far longer than any path the site has; bounds a request's work
POLL_SECONDS: Final = 0.5

ARTICLES_URL: Final = f"/{ARTICLES_PATH}"
# An id has at most 19 digits, the loader's limit: a longer one is not looked for.
ARTICLE_URL: Final = re.compile(rf"/{ARTICLES_PATH}/([1-9][0-9]{{0,18}})/rating(/?)")
# Nothing hidden (the build's record and temporary files included), no "." or
# "..", no backslash or NUL, no name longer than file systems allow.
NAME: Final = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,254}")
ID_NAME: Final = re.compile(r"[1-9][0-9]*")
# No .gz or .br variants are looked for: a document is smaller than a gzip header.
ANY_ENCODING: Final = re.compile("")
NONBLOCK: Final = getattr(os, "O_NONBLOCK", 0)  # not on Windows, which has no FIFOs to fear
# A folder is opened only to open what is in it: Linux's O_PATH skips the rest of
# an open's work (a fifth less time for the whole walk, measured). Without it
# (macOS) a folder must be readable, not only searchable, to be walked through.
FOLDER: Final = os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_PATH", 0)
# Why a file below the root may not open, each a 404: nothing there (ENOENT,
# ENOTDIR), a symlink, which is never followed (ELOOP; ENOTDIR for a linked
# folder), a socket (ENXIO), a name too long, or a file the server may not
# read (EACCES, EPERM: not meant for the web, as a dotfile is not). Any other
# error is the server's own fault (EMFILE, EIO...): a JSON 500.
UNSERVABLE: Final = frozenset(
    (
        errno.ENOENT,
        errno.ENOTDIR,
        errno.EISDIR,
        errno.ELOOP,
        errno.ENXIO,
        errno.ENAMETOOLONG,
        errno.EACCES,
        errno.EPERM,
    )
)


def json_body(detail: str) -> bytes:
    """An error body in the style of Django REST framework, ending in a newline as documents."""
    return json.dumps({"detail": detail}).encode() + b"\n"


NOT_FOUND: Final = json_body("Not found.")
SERVER_ERROR: Final = json_body("A server error occurred.")  # Django REST framework's words


class Target(NamedTuple):
    """The file a URL path names, relative to the root."""

    file: str
    add_slash: bool  # the URL is an article's rating without its trailing slash


def route(url: str) -> Target | None:
    """The file that the URL path ``url`` may name, or None when it can name none."""
    if len(url) > MAX_URL_PATH:
        return None
    article = ARTICLE_URL.fullmatch(url)
    if article:
        return Target(f"{ARTICLES_PATH}/{article[1]}/rating/index.json", not article[2])
    lowered = url.lower()  # on a case-insensitive disk, /AWAY/ is the same folder
    if lowered == ARTICLES_URL or lowered.startswith(ARTICLES_URL + "/"):
        return None  # the generator's folder: nothing there but the ratings
    first, *names = url.split("/")
    if first or not names:
        return None
    if names[-1] == "":
        names[-1] = "index.html"  # a folder's page, as static hosts serve it
    if not all(NAME.fullmatch(name) for name in names):
        return None
    return Target("/".join(names), add_slash=False)


class _Entry(NamedTuple):
    identity: tuple[int, int, int, int]
    static_file: _StaticFile
    file: str  # relative to the root


def _identity(status: os.stat_result) -> tuple[int, int, int, int]:
    # A rebuild renames a new file into place: a new inode, whatever the size.
    return status.st_ino, status.st_dev, status.st_size, status.st_mtime_ns


@functools.lru_cache(maxsize=64)
def _http_date(seconds: int) -> tuple[str, tuple[int, ...] | None]:
    """Last-Modified, and the parsed form WhiteNoise compares If-Modified-Since with."""
    # A build writes its files within a few seconds: each of those seconds is
    # formatted once, not at the first request for each file.
    text = formatdate(seconds, usegmt=True)
    return text, parsedate(text)


class _StaticFile(StaticFile):
    """WhiteNoise's StaticFile for a file already open, described by its own fstat.

    Stock StaticFile is made from a stat of the path and opens the path again
    at each GET: a rebuild renaming a new file in between pairs the old
    file's Content-Length and ETag with the new bytes. Here the file is opened
    first and described after. The constructor sets the four attributes that
    StaticFile's methods read (WhiteNoise 6.12, pinned) to the values its own
    constructor gives them, without the 9 µs that one spends in wsgiref's
    Headers, most of the cost of a file's first request. The answering is
    WhiteNoise's (conditional requests, HEAD), but for ranges: WhiteNoise
    answers ``bytes=0-0`` and ``bytes=-1`` with a 416 and ``bytes=-0`` with
    the whole file, where HTTP wants one byte, one byte and a 416
    (``byte_range``). A test holds the two together.
    """

    def __init__(
        self,
        path: str,
        content_type: str,
        status: os.stat_result,
        extra: tuple[tuple[str, str], ...] = (),
    ) -> None:
        # WhiteNoise's own ETag counts whole seconds: two rebuilds in one second
        # that keep a file's size would share it, and a client keep the old rating.
        self.etag = f'"{status.st_mtime_ns:x}-{status.st_size:x}"'
        modified, self.last_modified = _http_date(int(status.st_mtime))
        # Tuples where WhiteNoise has lists: tuples of strings are left alone by
        # the garbage collector, which would otherwise walk every cached file.
        headers = (
            ("Content-Type", content_type),
            ("Last-Modified", modified),
            ("ETag", self.etag),
            ("Content-Length", str(status.st_size)),
            *extra,
        )
        self.alternatives = ((ANY_ENCODING, path, headers),)
        # A 304 updates the copy a cache keeps: the front page's policy with it.
        self.not_modified_response = Response(
            HTTPStatus.NOT_MODIFIED, (("ETag", self.etag), *extra), None
        )

    def is_not_modified(self, request_headers: Mapping[str, Any]) -> bool:
        """Whether the client's copy is current (RFC 9110, 13.1.2 and 13.1.3).

        WhiteNoise compares If-None-Match with its ETag as one string: `*`, a
        list of tags or the weak form of the file's own tag were a 200, where
        HTTP (and nginx, and the edges) answer 304.
        """
        match = request_headers.get("HTTP_IF_NONE_MATCH")
        if match is not None:  # If-Modified-Since is then ignored
            tags = {tag.strip().removeprefix("W/") for tag in match.split(",")}
            return "*" in tags or self.etag in tags
        since: str | None = request_headers.get("HTTP_IF_MODIFIED_SINCE")
        if since is None or self.last_modified is None:
            return False
        parsed = parsedate(since)
        return parsed is not None and parsed >= self.last_modified

    def respond(self, file: BinaryIO, method: str, request_headers: WSGIEnvironment) -> Response:
        """StaticFile.get_response for GET or HEAD, from ``file``, the file described."""
        if self.is_not_modified(request_headers):
            file.close()
            return self.not_modified_response
        _, headers = self.get_path_and_headers(request_headers)
        body = file if method == "GET" else None
        if body is None:
            file.close()
        range_header = request_headers.get("HTTP_RANGE")
        if range_header:
            size = int(dict(headers)["Content-Length"])
            wanted = byte_range(range_header, size)
            if wanted is UNSATISFIABLE:
                if body is not None:
                    body.close()
                return Response(
                    HTTPStatus.REQUESTED_RANGE_NOT_SATISFIABLE,
                    (("Content-Range", f"bytes */{size}"),),
                    None,
                )
            if isinstance(wanted, tuple):
                return _partial(headers, body, size, *wanted)
        return Response(HTTPStatus.OK, headers, body)


def _partial(
    headers: Iterable[tuple[str, str]], body: BinaryIO | None, size: int, first: int, last: int
) -> Response:
    kept = [header for header in headers if header[0] != "Content-Length"]
    kept += [
        ("Content-Range", f"bytes {first}-{last}/{size}"),
        ("Content-Length", f"{last - first + 1}"),
    ]
    return Response(
        HTTPStatus.PARTIAL_CONTENT, kept, None if body is None else SlicedFile(body, first, last)
    )


UNSATISFIABLE: Final = "unsatisfiable"
RANGE_SPEC: Final = re.compile(r"([0-9]*)-([0-9]*)")


def byte_range(value: str, size: int) -> tuple[int, int] | str | None:
    """What a ``Range`` header asks of a file of ``size`` bytes (RFC 9110, 14).

    The one range to send as ``(first, last)``; UNSATISFIABLE for a 416; None
    to ignore the header and send the whole file. Every host of the API
    answers alike (nginx's rules with ``max_ranges 1``): another unit than
    bytes is ignored, as HTTP requires; an invalid set of ranges is refused
    with the 416 (as HTTP allows); ranges that start past the end, and the
    empty suffix ``-0``, are left out, and a 416 comes when none is left;
    several left are not merged into a multipart answer: the whole file is.
    """
    unit, equals, specs = value.partition("=")
    if unit.lower() != "bytes" or not equals or not specs.strip(" \t"):
        return None  # `bytes=` names no range at all: nothing to refuse
    satisfiable = []
    for spec in specs.split(","):
        found = RANGE_SPEC.fullmatch(spec.strip(" \t"))
        if found is None or found[0] == "-":
            return UNSATISFIABLE
        first, last = found[1], found[2]
        if first and last and int(last) < int(first):
            return UNSATISFIABLE
        if not first:  # the last N bytes, all of them where the file is shorter
            if int(last) > 0 and size > 0:
                satisfiable.append((max(0, size - int(last)), size - 1))
        elif int(first) < size:
            satisfiable.append((int(first), min(int(last), size - 1) if last else size - 1))
    if not satisfiable:
        return UNSATISFIABLE
    return satisfiable[0] if len(satisfiable) == 1 else None


class ServerError(Exception):
    """The site cannot be read at all (its folder gone, no descriptors left): a 500."""


def _open_file(root: str, relative: str) -> tuple[BinaryIO, os.stat_result] | None:
    """The regular file at ``relative`` below ``root``, open, and its status; None if none.

    Each name is opened relative to the folder before it, without following
    a symlink: a file is served only if no link leads to it, so that its real
    path is inside the root, whatever links the site holds, and no link can
    be swapped in between a check and the open. (``root`` itself may be a
    link, as deploys often make it.) nginx's ``disable_symlinks`` does the same.
    """
    try:
        folder = os.open(root, FOLDER)
    except OSError as error:
        raise ServerError(f"{root}: cannot open the site's folder: {error.strerror}") from None
    try:
        *folders, name = relative.split("/")
        for part in folders:
            inner = os.open(part, FOLDER | os.O_NOFOLLOW, dir_fd=folder)
            os.close(folder)
            folder = inner
        # O_NONBLOCK: a FIFO left in the site must not hang the request.
        descriptor = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | NONBLOCK, dir_fd=folder)
    except OSError as error:
        if error.errno in UNSERVABLE:
            return None
        raise ServerError(f"{os.path.join(root, relative)}: {error.strerror}") from None
    finally:
        os.close(folder)
    status = os.fstat(descriptor)
    if not stat.S_ISREG(status.st_mode):
        os.close(descriptor)
        return None
    return open(descriptor, "rb"), status


class LazyWhiteNoise(WhiteNoise):
    """WhiteNoise that finds a file at its first request, and keeps up with rebuilds.

    A request opens its file, then looks up the StaticFile of that very file
    (its inode, device, size and modification time) in a bounded cache, and
    makes one only when there is none: a rebuild is seen at the next request,
    and headers always describe the bytes sent. GET and HEAD of files only:
    everything else goes to ``application``.
    """

    def __init__(
        self, application: WSGIApplication, root: str, *, cache_size: int = CACHE_SIZE
    ) -> None:
        # No root for WhiteNoise itself: given one, it would walk the tree now.
        super().__init__(application, max_age=None, allow_all_origins=False)
        self.root = root
        self.cache_size = cache_size
        self._cache: OrderedDict[str, _Entry] = OrderedDict()
        self._lock = threading.Lock()  # for writes; a read needs none
        # One a file name of the site: every document is index.json.
        self._content_types: dict[str, str] = {}

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        method = environ["REQUEST_METHOD"]
        if method != "GET" and method != "HEAD":
            return self.application(environ, start_response)
        url = environ.get("PATH_INFO", "")
        try:
            response = self._respond(url, method, environ)
            if response is None and self._lacks_slash(url):
                return _redirect_to_slash(environ, start_response)
        except ServerError as fault:
            # One line in the server's log, and the contract's answer: no traceback.
            environ["wsgi.errors"].write(f"{method} {url}: 500: {fault}\n")
            return _json_error("500 Internal Server Error", SERVER_ERROR, method, start_response)
        if response is not None:
            return self._send(response, environ, start_response)
        return self.application(environ, start_response)

    def _respond(self, url: str, method: str, environ: WSGIEnvironment) -> Response | None:
        entry = self._cache.get(url)
        relative = entry.file if entry is not None else self._file(url)
        if relative is None:
            return None  # no file of the site can be at this URL
        opened = _open_file(self.root, relative)
        if opened is None:
            if entry is not None:
                self._forget(url)  # removed by a rebuild
            return None
        file, status = opened
        try:
            if entry is None or entry.identity != _identity(status):
                entry = self._remember(url, relative, status)
            return entry.static_file.respond(file, method, environ)
        except BaseException:
            file.close()
            raise

    @staticmethod
    def _file(url: str) -> str | None:
        target = route(url)
        if target is None or target.add_slash:
            return None
        return target.file

    def _remember(self, url: str, relative: str, status: os.stat_result) -> _Entry:
        # The generated front page loads its own script, style sheet and icon and
        # fetches this API, nothing else: the browser refuses whatever it did not plan.
        path = os.path.join(self.root, relative)
        extra = (("Content-Security-Policy", FRONT_PAGE_CSP),) if relative == FRONT_PAGE else ()
        static_file = _StaticFile(path, self._content_type(path, url), status, extra)
        entry = _Entry(_identity(status), static_file, relative)
        with self._lock:
            if url not in self._cache and len(self._cache) >= self.cache_size:
                # The oldest goes. A plain dict would do, but finding its first
                # key scans every slot deleted before it.
                self._cache.popitem(last=False)
            self._cache[url] = entry
        return entry

    def _forget(self, url: str) -> None:
        with self._lock:
            self._cache.pop(url, None)

    def _content_type(self, path: str, url: str) -> str:
        """WhiteNoise's Content-Type for the file, which depends on its name only."""
        name = os.path.basename(path)
        known = self._content_types.get(name)
        if known is None:
            headers = Headers([])
            self.add_mime_headers(headers, path, url)
            known = headers["Content-Type"]
            assert known is not None, path  # add_mime_headers always sets one
            self._content_types[name] = known
        return known

    def _lacks_slash(self, url: str) -> bool:
        target = route(url)
        if target is None or not target.add_slash:
            return False
        opened = _open_file(self.root, target.file)  # as it would be served: no symlink
        if opened is None:
            return False
        opened[0].close()
        return True

    @staticmethod
    def _send(
        response: Response, environ: WSGIEnvironment, start_response: StartResponse
    ) -> Iterable[bytes]:
        status = f"{response.status} {response.status.phrase}"
        start_response(status, [*response.headers, *COMMON_HEADERS])
        if response.file is None:
            return []
        wrapper: FileWrapperType = environ.get("wsgi.file_wrapper", FileWrapper)
        return wrapper(response.file)


def api_fallback(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
    """What no file answers: CORS preflights, methods not allowed, and 404s."""
    method = environ["REQUEST_METHOD"]
    if method == "OPTIONS":
        start_response(
            "204 No Content",
            [
                ("Allow", ALLOW),
                ("Access-Control-Allow-Methods", ALLOW),
                ("Access-Control-Allow-Headers", "*"),
                ("Access-Control-Max-Age", PREFLIGHT_MAX_AGE),
                *COMMON_HEADERS,
            ],
        )
        return []
    if method in ("GET", "HEAD"):
        return _json_error("404 Not Found", NOT_FOUND, method, start_response)
    body = json_body(f'Method "{method}" not allowed.')
    return _json_error("405 Method Not Allowed", body, method, start_response, ("Allow", ALLOW))


def _json_error(
    status: str,
    body: bytes,
    method: str,
    start_response: StartResponse,
    *extra: tuple[str, str],
) -> list[bytes]:
    start_response(
        status,
        [
            ("Content-Type", "application/json"),
            ("Content-Length", str(len(body))),
            *extra,
            *COMMON_HEADERS,
        ],
    )
    return [] if method == "HEAD" else [body]  # wsgiref sends whatever it is given


def _redirect_to_slash(environ: WSGIEnvironment, start_response: StartResponse) -> list[bytes]:
    # Relative, as WhiteNoise's own redirects: behind a proxy the app does not
    # know the public scheme and host. "rating/" against ".../7/rating" is ".../7/rating/".
    query = environ.get("QUERY_STRING", "")
    location = f"rating/?{query}" if query else "rating/"
    start_response(
        "301 Moved Permanently",
        [
            ("Location", location),
            ("Content-Length", "0"),
            *COMMON_HEADERS,
        ],
    )
    return []


def create_app(root: str = "site") -> WSGIApplication:
    """The WSGI app serving the built site in ``root``: ``gunicorn 'generate:create_app()'``.

    ``root`` is taken relative to the current directory once, here, as
    ``--output`` is; it must exist, as it does after a build.
    """
    folder = os.path.abspath(root)
    if not os.path.isdir(folder):
        raise InputError(f"{root}: no such folder: build the site first (python generate.py)")
    return LazyWhiteNoise(api_fallback, folder)


class _Server(ThreadingMixIn, WSGIServer):
    """wsgiref's server with a thread a connection, so one slow client blocks no other."""

    daemon_threads = True  # Ctrl-C stops the server without waiting for clients
    request_queue_size = 128  # socketserver's 5 drops connections when a page asks for many


def serve(
    input_path: str,
    output: str,
    *,
    base_url: str | None,
    host: str,
    port: int,
    quiet: bool = False,
) -> int:
    """Build ``output``, serve it at ``host:port``, rebuild when ``input_path`` changes.

    ``quiet`` keeps the build summaries and the request log to itself: only
    the address served at and errors are printed.
    Returns the exit code: 0 after Ctrl-C, 2 when the input or the address is unusable.
    """
    try:
        server = _listen(host, port, _QuietHandler if quiet else WSGIRequestHandler)
    except InputError as error:
        print(error, file=sys.stderr)
        return 2
    with server:
        address = f"http://{host}:{server.server_port}"  # the bound port, for --port 0
        rebuild = functools.partial(_build, input_path, output, base_url, address)
        try:
            return _run(server, input_path, output, address, rebuild, _silent if quiet else _say)
        except KeyboardInterrupt:
            return 0  # Ctrl-C is how a development server stops: no traceback


def _run(
    server: _Server,
    input_path: str,
    output: str,
    address: str,
    rebuild: Callable[[], str],
    say: Callable[[str], None],
) -> int:
    seen = _signature(input_path)  # before the build, so no edit falls in between
    try:
        say(rebuild())
    except InputError as error:
        print(error, file=sys.stderr)
        return 2
    server.set_app(create_app(output))
    print(_serving_line(output, address), flush=True)
    stop = threading.Event()
    watcher = threading.Thread(target=_watch, args=(input_path, seen, rebuild, stop, say))
    watcher.start()
    try:
        server.serve_forever()
    finally:
        stop.set()
        watcher.join()  # a rebuild under way finishes: a build is never cut short
    return 0


def _say(line: str) -> None:
    print(line, flush=True)


def _silent(line: str) -> None:
    del line  # --quiet: a summary nobody asked for


class _QuietHandler(WSGIRequestHandler):
    """wsgiref's handler without its line a request, for --quiet."""

    def log_message(self, format: str, *args: object) -> None:
        del format, args


def _listen(host: str, port: int, handler: type[WSGIRequestHandler]) -> _Server:
    try:
        # The socket module encodes a non-ASCII name with the IDNA codec, and
        # turns its failure into a bare TypeError: ask the codec first.
        host.encode("idna")
    except UnicodeError as error:
        reason = error.__cause__ or error  # the codec's own words, without its wrapping
        raise InputError(f"--host {host}: not a host name ({reason})") from None
    try:
        return _Server((host, port), handler)
    except OverflowError:
        raise InputError(f"--port {port}: a port is a number from 0 to 65535") from None
    except OSError as error:
        raise InputError(f"cannot serve at {host}:{port}: {error.strerror}") from None


def _build(input_path: str, output: str, base_url: str | None, address: str) -> str:
    """Build the site, the served address as the last resort base URL; the summary line."""
    started = time.perf_counter()
    result = build(
        input_path, output, base_url=base_url, environ=os.environ, fallback_base_url=address
    )
    return result.summary(output, time.perf_counter() - started)


def _serving_line(output: str, address: str) -> str:
    first = first_article(output)
    sample = (
        f"try {address}/{ARTICLES_PATH}/{first}/rating/" if first is not None else "no articles yet"
    )
    return f"Serving {os.path.join(output, '')} at {address}/ — {sample}"


def first_article(root: str) -> int | None:
    """The smallest article id in the site built in ``root``, if any."""
    try:
        with os.scandir(os.path.join(root, ARTICLES_PATH)) as entries:
            return min((int(e.name) for e in entries if ID_NAME.fullmatch(e.name)), default=None)
    except FileNotFoundError:
        return None


def _signature(path: str) -> tuple[int, int, int, int] | None:
    try:
        status = os.stat(path)
    except OSError:
        return None  # gone for a moment while an editor saves by rename
    return status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns


def _watch(
    input_path: str,
    seen: tuple[int, int, int, int] | None,
    rebuild: Callable[[], str],
    stop: threading.Event,
    say: Callable[[str], None],
) -> None:
    """Rebuild whenever the input file changes, until ``stop`` is set."""
    while not stop.wait(POLL_SECONDS):
        current = _signature(input_path)
        if current is None or current == seen:
            continue
        seen = current
        try:
            say(f"{input_path} changed: {rebuild()}")
        except InputError as error:
            print(f"{error}\nstill serving the last good build", file=sys.stderr, flush=True)
        except OSError as error:  # the machine's doing (a full disk...), not a bug: one line
            print(
                f"{input_path}: the rebuild failed: {error}\nstill serving the last good build",
                file=sys.stderr,
                flush=True,
            )
        except Exception:  # noqa: BLE001 - a bug, but this thread is what keeps the site fresh
            # Loud, as a bug should be, yet the watching goes on: after the next
            # edit, a rebuild may well succeed, and a dead watcher would leave
            # the server answering with an old site and no word of it.
            traceback.print_exc(file=sys.stderr)
            print(
                f"{input_path}: the rebuild failed (a bug: please report the traceback above)\n"
                "still serving the last good build",
                file=sys.stderr,
                flush=True,
            )
