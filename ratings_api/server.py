"""The WSGI app serving the built site: ``gunicorn 'generate:create_app()'``, and --serve's.

The app is WhiteNoise, through its documented options, inside a WSGI function
for what the contract (docs/http-api.md) wants and WhiteNoise does not give:
the routes, the JSON errors, OPTIONS and 405, CORS and ``Cache-Control`` on
every answer, and HTTP's conditions and ranges where WhiteNoise reads them otherwise.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Callable, Iterable, Iterator
from email.utils import formatdate
from typing import IO, TYPE_CHECKING, Final, NamedTuple
from wsgiref.headers import Headers
from wsgiref.util import FileWrapper

from whitenoise import WhiteNoise

from ratings_api.contract import (
    ALLOW,
    ARTICLE_ID,
    ARTICLES_PATH,
    COMMON_HEADERS,
    FRONT_PAGE,
    FRONT_PAGE_CSP,
    NOT_FOUND,
    PREFLIGHT,
    SERVER_ERROR,
    not_allowed,
)
from ratings_api.errors import InputError

if TYPE_CHECKING:
    from wsgiref.types import StartResponse, WSGIApplication, WSGIEnvironment

TYPES: Final = {".ts": "text/plain"}  # WhiteNoise adds "; charset=utf-8" to text/*
MAX_URL_PATH: Final = 1024  # far longer than any path the site has; bounds a request's work

ARTICLES_URL: Final = f"/{ARTICLES_PATH}"
ARTICLE_URL: Final = re.compile(rf"/{ARTICLES_PATH}/({ARTICLE_ID})/rating(/?)")
# Nothing hidden, no "." or "..", no backslash or NUL, no name too long for a disk.
NAME: Final = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,254}")
RANGE_SPEC: Final = re.compile(r"([0-9]*)-([0-9]*)")
UNSATISFIABLE: Final = "unsatisfiable"
# Read here, not by WhiteNoise: its ranges differ from HTTP's, it reads no
# If-Range, and the site has no compressed copies for it to choose.
READ_HERE: Final = frozenset(("HTTP_RANGE", "HTTP_IF_RANGE", "HTTP_ACCEPT_ENCODING"))
# A 404: nothing there, a name too long, a socket, or a file the server may not
# read (not for the web, as a dotfile is not). Any other error is a 500.
UNSERVABLE: Final = frozenset(
    (errno.ENOENT, errno.ENOTDIR, errno.ENAMETOOLONG, errno.ENXIO, errno.EACCES, errno.EPERM)
)


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


def byte_range(value: str, size: int) -> tuple[int, int] | str | None:
    """What ``Range`` asks of ``size`` bytes (RFC 9110, 14), as nginx with ``max_ranges 1``.

    ``(first, last)``; UNSATISFIABLE for a 416 (an invalid set, or no range
    left once those past the end and ``-0`` are); None for the whole file
    (another unit, or several ranges left).
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


def etag(status: os.stat_result) -> str:
    """The ETag: WhiteNoise's counts whole seconds, which two rebuilds in one second may share."""
    return f'"{status.st_mtime_ns:x}-{status.st_size:x}"'


def _add_etag(headers: Headers, path: str, url: str) -> None:
    headers["ETag"] = etag(os.stat(path))


def _identity(status: os.stat_result) -> tuple[int, int, int, int]:
    return status.st_ino, status.st_dev, status.st_size, status.st_mtime_ns


class ServerError(Exception):
    """The site cannot be read at all (its folder gone, an I/O error): a 500."""


class App:
    """The WSGI app serving the site in ``root``: WhiteNoise, and the contract around it."""

    def __init__(self, root: str) -> None:
        self.root = root
        # autorefresh: WhiteNoise looks a file up when it is asked for, rather than
        # walking the whole tree at start-up (minutes and gigabytes for a million
        # files). Every path is routed and checked here first; one WhiteNoise does
        # not find (gone since) gets no answer from the app it wraps: a 404 here.
        options = {"max_age": None, "allow_all_origins": False, "add_headers_function": _add_etag}
        # embed.d.ts is text to read, as npm's CDNs send it; WhiteNoise's .ts is video.
        files = WhiteNoise(lambda *_: [], root, autorefresh=True, mimetypes=TYPES, **options)
        self.files: WSGIApplication = files

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        method, url = environ["REQUEST_METHOD"], environ.get("PATH_INFO", "")
        if method == "OPTIONS":
            return _answer(start_response, "204 No Content", *PREFLIGHT)
        if method != "GET" and method != "HEAD":
            body = not_allowed(method)
            return _error(start_response, "405 Method Not Allowed", body, method, ("Allow", ALLOW))
        target = route(url)
        try:
            status = None if target is None else self._lookup(target.file)
        except ServerError as fault:
            # One line in the server's log, and the contract's answer: no traceback.
            environ["wsgi.errors"].write(f"{method} {url}: 500: {fault}\n")
            return _error(start_response, "500 Internal Server Error", SERVER_ERROR, method)
        if target is None or status is None or (target.add_slash and not _as_sent(environ)):
            return _error(start_response, "404 Not Found", NOT_FOUND, method)
        if target.add_slash:
            # Relative, as WhiteNoise's own: behind a proxy the app does not know
            # the public scheme, host or path. "rating/" against ".../7/rating".
            query = environ.get("QUERY_STRING", "")
            location = f"rating/?{query}" if query else "rating/"
            moved = ("Location", location), ("Content-Length", "0")
            return _answer(start_response, "301 Moved Permanently", *moved)
        return self._serve(environ, start_response, target.file, status)

    def _lookup(self, relative: str) -> os.stat_result | None:
        """The status of the regular file at ``relative``, reached through no symlink, or None.

        Each name is checked with lstat: a file is served only if no link leads
        to it, wherever it points, as nginx's ``disable_symlinks`` does.
        """
        *folders, name = relative.split("/")
        path = self.root  # itself a link maybe, as deploys often make it: followed
        try:
            for folder in folders:
                path = f"{path}/{folder}"
                if stat.S_ISLNK(os.lstat(path).st_mode):
                    return None
            path = f"{path}/{name}"
            status = os.lstat(path)  # a link is not a regular file here
        except OSError as error:
            if error.errno not in UNSERVABLE:
                raise ServerError(f"{path}: {error.strerror}") from None
            try:
                os.stat(self.root)
            except OSError as lost:
                message = f"{self.root}: cannot open the site's folder: {lost.strerror}"
                raise ServerError(message) from None
            return None
        return status if stat.S_ISREG(status.st_mode) else None

    def _serve(
        self,
        environ: WSGIEnvironment,
        start_response: StartResponse,
        relative: str,
        status: os.stat_result,
    ) -> Iterable[bytes]:
        """WhiteNoise's answer for the file looked up, with the contract's changes."""
        current, answer = etag(status), _Answer()
        self.files(answer.asking(environ, relative, current), answer.start_response)
        file = answer.file
        if file is not None and _identity(os.fstat(file.fileno())) != _identity(status):
            # Replaced by a rebuild, or by a link, since the lookup: its headers
            # would not describe it, or it may not be served. Again from the start.
            file.close()
            return self(environ, start_response)
        if not answer.status:  # gone since the lookup
            return _error(start_response, "404 Not Found", NOT_FOUND, environ["REQUEST_METHOD"])
        line, headers = answer.status, answer.headers
        if relative == FRONT_PAGE:  # it loads its own files: the browser refuses any other
            headers = [*headers, ("Content-Security-Policy", FRONT_PAGE_CSP)]
        wanted = None
        if line.startswith("200 ") and _if_range(environ.get("HTTP_IF_RANGE"), current, status):
            wanted = byte_range(environ.get("HTTP_RANGE", ""), status.st_size)
        if wanted is None:
            body = [] if file is None else environ.get("wsgi.file_wrapper", FileWrapper)(file)
        else:
            line, headers, body = _partial(wanted, headers, file, status.st_size)
        start_response(line, [*headers, *COMMON_HEADERS])
        return body


class _Answer:
    """What WhiteNoise answers, kept rather than sent: the status, headers and file opened."""

    def __init__(self) -> None:
        self.status = ""
        self.headers: list[tuple[str, str]] = []
        self.file: IO[bytes] | None = None

    def asking(self, environ: WSGIEnvironment, relative: str, current: str) -> WSGIEnvironment:
        """The request WhiteNoise is to answer: the file's own path, and what it reads right."""
        asked = {key: value for key, value in environ.items() if key not in READ_HERE}
        asked.update(PATH_INFO="/" + relative, **{"wsgi.file_wrapper": self.file_wrapper})
        if _none_match(environ.get("HTTP_IF_NONE_MATCH"), current):
            asked["HTTP_IF_NONE_MATCH"] = current  # WhiteNoise compares it as one string
        return asked

    def start_response(
        self, status: str, headers: list[tuple[str, str]], exc_info: object = None
    ) -> Callable[[bytes], object]:
        self.status, self.headers = status, headers
        return self.write

    def write(self, data: bytes) -> None:
        raise AssertionError("WhiteNoise sends no body through write() (PEP 3333)")

    def file_wrapper(self, file: IO[bytes], block_size: int = 0) -> IO[bytes]:
        self.file = file
        return file


def _as_sent(environ: WSGIEnvironment) -> bool:
    """Whether the path as sent ends in ``/rating``: a client resolves ``rating/`` against it,
    and from ``7%2Frating`` would reach ``articles/rating/``. gunicorn (and --serve) give
    the path as sent in RAW_URI, uWSGI and mod_wsgi in REQUEST_URI."""
    sent = environ.get("RAW_URI") or environ.get("REQUEST_URI")
    return sent is None or sent.partition("?")[0].endswith("/rating")


def _none_match(header: str | None, current: str) -> bool:
    """Whether If-None-Match names the ETag (RFC 9110, 13.1.2): in a list, weak, or ``*``."""
    if header is None:
        return False
    tags = {tag.strip().removeprefix("W/") for tag in header.split(",")}
    return "*" in tags or current in tags


def _if_range(header: str | None, current: str, status: os.stat_result) -> bool:
    """Whether a Range is to be read (RFC 9110, 13.1.5): no If-Range, or its exact validator."""
    return header is None or header.strip() in (current, formatdate(status.st_mtime, usegmt=True))


def _partial(
    wanted: tuple[int, int] | str,
    headers: list[tuple[str, str]],
    file: IO[bytes] | None,
    size: int,
) -> tuple[str, list[tuple[str, str]], Iterable[bytes]]:
    """The 206 or the 416 for a Range, from the 200's headers and file."""
    if isinstance(wanted, str):
        if file is not None:
            file.close()
        return "416 Requested Range Not Satisfiable", [("Content-Range", f"bytes */{size}")], []
    first, last = wanted
    kept = [header for header in headers if header[0] != "Content-Length"]
    kept += [("Content-Range", f"bytes {first}-{last}/{size}")]
    kept += [("Content-Length", f"{last - first + 1}")]
    return "206 Partial Content", kept, [] if file is None else _slice(file, first, last)


def _slice(file: IO[bytes], first: int, last: int) -> Iterator[bytes]:
    with file:
        file.seek(first)
        left = last - first + 1
        while left > 0 and (chunk := file.read(min(left, 65536))):
            left -= len(chunk)
            yield chunk


def _answer(start_response: StartResponse, status: str, *headers: tuple[str, str]) -> list[bytes]:
    start_response(status, [*headers, *COMMON_HEADERS])
    return []


def _error(
    start_response: StartResponse, status: str, body: bytes, method: str, *extra: tuple[str, str]
) -> list[bytes]:
    length = ("Content-Length", str(len(body)))
    _answer(start_response, status, ("Content-Type", "application/json"), length, *extra)
    return [] if method == "HEAD" else [body]  # wsgiref sends whatever it is given


def create_app(root: str = "site") -> WSGIApplication:
    """The WSGI app serving the built site in ``root``: ``gunicorn 'generate:create_app()'``.

    ``root`` is taken relative to the current directory once, here, as
    ``--output`` is; it must exist, as it does after a build.
    """
    folder = os.path.abspath(root)
    if not os.path.isdir(folder):
        raise InputError(f"{root}: no such folder: build the site first (python generate.py)")
    return App(folder)
