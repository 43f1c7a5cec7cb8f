"""The WSGI app serving the built site: ``gunicorn 'generate:create_app()'``, and --serve's.

It answers by the HTTP contract (docs/http-api.md, its values in contract.py):
the routes, the JSON errors, OPTIONS and 405, CORS and ``Cache-Control`` on every
answer. The rating documents, the API's hot path, and the files beside them it
answers itself, with HTTP's conditions and ranges as nginx reads them; what it keeps
of a small file (its headers and bytes) is checked against the file with one
``lstat`` on each request, so a rebuild is served at once, with no restart.

WhiteNoise serves the build's static assets (``assets/``), as its docs intend: it
indexes them at start-up, or, under --serve (development), looks each up when asked
(``autorefresh``). Its root is never the site's: it would walk a million documents
before its first answer (its issue #263), and autorefresh is not for production.
"""

from __future__ import annotations

import errno
import mimetypes
import os
import re
import stat
from calendar import timegm
from collections.abc import Callable, Iterable, Iterator
from email.utils import formatdate, parsedate
from functools import lru_cache, partial
from typing import IO, TYPE_CHECKING, Any, Final, NamedTuple
from wsgiref.headers import Headers

from whitenoise import WhiteNoise

from ratings_api import contract
from ratings_api.errors import InputError

if TYPE_CHECKING:
    from wsgiref.types import StartResponse, WSGIApplication, WSGIEnvironment

ASSETS: Final = "assets/"  # the build's static files, which change only with the package
MAX_URL_PATH: Final = 1024  # far longer than any path the site has; bounds a request's work
KEEP_BYTES: Final = 16384  # a file this size or smaller is kept in memory: every document is
KEEP_FILES: Final = 100_000  # then all are dropped: memory stays bounded at any site's size
CHUNK: Final = 65536
READ: Final = os.O_RDONLY | getattr(os, "O_BINARY", 0)  # as tempfile reads: bytes on Windows too

ARTICLES_FOLDER: Final = f"/{contract.ARTICLES_PATH}/"
ARTICLE_URL: Final = re.compile(rf"/{contract.ARTICLES_PATH}/({contract.ARTICLE_ID})/rating(/?)")
# Nothing hidden, no "." or "..", no backslash or NUL, no name too long for a disk.
NAME: Final = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,254}")
RANGE_SPEC: Final = re.compile(r"([0-9]*)-([0-9]*)")
UNSATISFIABLE: Final = "unsatisfiable"
Span = tuple[int, int]  # bytes of a file, first to last, as a Range names them
# Python's own table, not the system's (/etc/mime.types differs between machines).
TYPES: Final = mimetypes.MimeTypes()
# A 404: nothing there, a name too long, a socket, or a file the server may not
# read (not for the web, as a dotfile is not). Any other error is a 500.
UNSERVABLE: Final = frozenset(
    (errno.ENOENT, errno.ENOTDIR, errno.ENAMETOOLONG, errno.ENXIO, errno.EACCES, errno.EPERM)
)


def route(url: str) -> tuple[str, bool] | None:
    """The file that the URL path ``url`` may name, relative to the root, and whether the
    URL is an article's rating without its trailing slash; None when it can name none."""
    if len(url) > MAX_URL_PATH or not url.startswith("/"):
        return None
    article = ARTICLE_URL.fullmatch(url)
    if article:
        return f"{contract.ARTICLES_PATH}/{article[1]}/rating/index.json", not article[2]
    # The generator's folder: nothing there but the ratings (/AWAY/ too: a disk may ignore case).
    if f"{url.lower()}/".startswith(ARTICLES_FOLDER):
        return None
    # A folder's page, as static hosts serve it.
    relative = f"{url[1:]}index.html" if url.endswith("/") else url[1:]
    if not all(NAME.fullmatch(name) for name in relative.split("/")):
        return None
    return relative, False


def byte_range(value: str, size: int) -> Span | str | None:
    """What ``Range`` asks of ``size`` bytes (RFC 9110, 14), as nginx with ``max_ranges 1``.

    ``(first, last)``; UNSATISFIABLE for a 416 (an invalid set, or no range
    left once those past the end and ``-0`` are); None for the whole file
    (another unit, or several ranges left).
    """
    unit, equals, specs = value.partition("=")
    if unit.lower() != "bytes" or not equals or not specs.strip(" \t"):
        return None  # `bytes=` names no range at all: nothing to refuse
    satisfiable: list[Span] = []
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


class File(NamedTuple):
    """What the app answers for a file, from the status it was read with."""

    identity: tuple[int, int, int, int]  # checked at each request: kept, not built again
    size: int
    seconds: int  # Last-Modified, as a number
    etag: str
    modified: str  # Last-Modified
    headers: tuple[tuple[str, str], ...]  # a 200's, all of them, Content-Type first
    policy: tuple[tuple[str, str], ...]  # the front page's CSP, on a 304 too
    body: bytes  # the file's bytes if kept; else read from the file at each request


def _identity(status: os.stat_result) -> tuple[int, int, int, int]:
    return status.st_ino, status.st_dev, status.st_size, status.st_mtime_ns


def _describe(relative: str, status: os.stat_result, body: bytes = b"") -> File:
    etag, seconds = _etag(status), int(status.st_mtime)
    modified = _http_date(seconds)
    # The front page loads its own files only: the browser refuses any other.
    csp = ("Content-Security-Policy", contract.FRONT_PAGE_CSP)
    policy = (csp,) if relative == contract.FRONT_PAGE else ()
    headers = (
        ("Content-Type", _content_type(relative.rpartition("/")[2])),
        ("ETag", etag),
        ("Last-Modified", modified),
        ("Content-Length", str(status.st_size)),
        *policy,
        *contract.COMMON_HEADERS,
    )
    return File(_identity(status), status.st_size, seconds, etag, modified, headers, policy, body)


@lru_cache(maxsize=256)
def _http_date(seconds: int) -> str:
    return formatdate(seconds, usegmt=True)  # one date for all the files of a build: kept


@lru_cache(maxsize=256)
def _content_type(name: str) -> str:
    kind = contract.CONTENT_TYPES.get(os.path.splitext(name)[1]) or TYPES.guess_type(name)[0]
    kind, _, charset = (kind or "application/octet-stream").partition("; charset=")
    return f'{kind}; charset="{charset or "utf-8"}"' if kind.startswith("text/") else kind


class ServerError(Exception):
    """The site cannot be read at all (its folder gone, an I/O error): a 500."""


class App:
    """The WSGI app serving the site in ``root``, by the contract."""

    def __init__(self, root: str, *, autorefresh: bool = False) -> None:
        self.root = root
        self.real = os.path.realpath(root)  # what /proc names the site's files under
        self.kept: dict[str, File] = {}  # by path below the root
        headers = {"max_age": None, "allow_all_origins": False, "add_headers_function": _add_etag}
        self.assets: WSGIApplication = WhiteNoise(_not_found, autorefresh=autorefresh, **headers)
        if os.path.isdir(f"{root}/{ASSETS}"):
            self.assets.add_files(f"{root}/{ASSETS}", prefix=ASSETS)

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        method, url = environ["REQUEST_METHOD"], environ.get("PATH_INFO", "")
        if method == "OPTIONS":
            return _answer(start_response, "204 No Content", *contract.PREFLIGHT)
        if method != "GET" and method != "HEAD":
            body, allow = contract.not_allowed(method), ("Allow", contract.ALLOW)
            return _error(start_response, "405 Method Not Allowed", body, method, allow)
        relative, add_slash = route(url) or ("", False)  # "": no file to look for
        try:
            found = self._open(relative) if relative else None
        except ServerError as fault:
            # One line in the server's log, and the contract's answer: no traceback.
            environ["wsgi.errors"].write(f"{method} {url}: 500: {fault}\n")
            return _error(
                start_response, "500 Internal Server Error", contract.SERVER_ERROR, method
            )
        if found is None or (add_slash and not _as_sent(environ)):
            return _error(start_response, "404 Not Found", contract.NOT_FOUND, method)
        file, opened = found
        if file is None:  # an asset: looked up here too, so that no link leads to it
            return self.assets(environ, partial(_with_common, start_response))
        span = None  # the bytes to send, first to last; None: none
        if add_slash:
            # Relative: behind a proxy the app does not know the public scheme,
            # host or path. "rating/" against ".../7/rating".
            query = environ.get("QUERY_STRING", "")
            moved = ("Location", f"rating/?{query}" if query else "rating/")
            _answer(start_response, "301 Moved Permanently", moved, ("Content-Length", "0"))
        else:
            span = _start(environ, start_response, file)
        if span is None or method == "HEAD":
            if opened is not None:
                opened.close()
            return []
        first, last = span
        return [file.body[first : last + 1]] if opened is None else _slice(opened, first, last)

    def _open(self, relative: str) -> tuple[File | None, IO[bytes] | None] | None:
        """The file at ``relative``, reached through no symlink, and its handle if too large
        to keep (no File for an asset: WhiteNoise's); None where there is none to serve.

        A file is served only if no link leads to it, wherever it points, as nginx's
        ``disable_symlinks`` does. The root itself may be a link, as deploys often
        make it: followed.
        """
        path, kept = f"{self.root}/{relative}", self.kept.get(relative)
        while True:
            try:
                status = os.lstat(path)  # a link is not a regular file here, and is never kept
                if kept is not None and _identity(status) == kept.identity:
                    return kept, None
                if not stat.S_ISREG(status.st_mode):
                    return None
                # os's calls, not open()'s five more: the API's first requests cost them
                descriptor = os.open(path, READ)
            except OSError as error:
                self._fault(path, error)
                return None
            if _identity(os.fstat(descriptor)) == _identity(status):
                break
            os.close(descriptor)  # replaced by a rebuild, or by a link, since: again
        direct = self._direct(descriptor, relative)
        if not direct or relative.startswith(ASSETS):
            os.close(descriptor)
            return (None, None) if direct else None  # an asset is WhiteNoise's to answer
        if status.st_size > KEEP_BYTES:
            return _describe(relative, status), open(descriptor, "rb")
        try:
            file = _describe(relative, status, os.read(descriptor, status.st_size))
        finally:
            os.close(descriptor)
        if len(self.kept) >= KEEP_FILES:
            self.kept.clear()
        self.kept[relative] = file
        return file, None

    def _direct(self, descriptor: int, relative: str) -> bool:
        """Whether no link below the root led to the file open as ``descriptor``.

        Linux names an open file's real path in /proc: one call, where checking each
        folder with lstat takes five for a document. Elsewhere, or once the root's
        link points to another folder, each folder is checked.
        """
        try:
            if os.readlink(f"/proc/self/fd/{descriptor}") == f"{self.real}/{relative}":
                return True
        except OSError:
            pass  # no /proc here
        where = self.root
        try:
            for folder in relative.split("/")[:-1]:
                where = f"{where}/{folder}"
                if stat.S_ISLNK(os.lstat(where).st_mode):
                    return False
        except OSError:
            return False  # gone since it was opened: as if it had never been there
        return True

    def _fault(self, path: str, error: OSError) -> None:
        """Raise ServerError unless ``error`` only means that nothing is there to serve."""
        if error.errno not in UNSERVABLE:
            raise ServerError(f"{path}: {error.strerror}") from None
        try:
            os.stat(self.root)
        except OSError as lost:
            message = f"{self.root}: cannot open the site's folder: {lost.strerror}"
            raise ServerError(message) from None


def _etag(status: os.stat_result) -> str:
    """In nanoseconds: WhiteNoise's own counts whole seconds, which two rebuilds may share."""
    return f'"{status.st_mtime_ns:x}-{status.st_size:x}"'


def _add_etag(headers: Headers, path: str, url: str) -> None:
    headers["ETag"] = _etag(os.stat(path))  # WhiteNoise's add_headers_function


def _with_common(
    start_response: StartResponse, status: str, headers: list[tuple[str, str]], *exc_info: Any
) -> Callable[[bytes], object]:
    """WhiteNoise's answer, with the contract's headers that every answer carries."""
    return start_response(status, [*headers, *contract.COMMON_HEADERS], *exc_info)


def _not_found(environ: WSGIEnvironment, start_response: StartResponse) -> list[bytes]:
    """The app WhiteNoise wraps: an asset it does not have (added since it indexed them)."""
    start_response("404 Not Found", list(_json(contract.NOT_FOUND)))
    return [] if environ["REQUEST_METHOD"] == "HEAD" else [contract.NOT_FOUND]


def _start(environ: WSGIEnvironment, start_response: StartResponse, file: File) -> Span | None:
    """Start the answer for ``file``: 200, 206, 304 or 416, as the request's conditions ask;
    the bytes of the file it sends, first to last, or None for none."""
    if _not_modified(environ, file):
        _answer(start_response, "304 Not Modified", ("ETag", file.etag), *file.policy)
        return None
    asked, validator = environ.get("HTTP_RANGE"), environ.get("HTTP_IF_RANGE")
    size, wanted = file.size, None
    # A Range is read (RFC 9110, 13.1.5) with no If-Range, or with its exact validator.
    if asked is not None and (validator is None or validator.strip() in (file.etag, file.modified)):
        wanted = byte_range(asked, size)
    if isinstance(wanted, str):
        unsatisfiable = ("Content-Range", f"bytes */{size}")
        _answer(start_response, "416 Requested Range Not Satisfiable", unsatisfiable)
        return None
    if wanted is None:
        start_response("200 OK", list(file.headers))
        return 0, size - 1  # a kept file's bytes whole: sliced whole, bytes are the same object
    first, last = wanted
    spans = ("Content-Range", f"bytes {first}-{last}/{size}")
    length = ("Content-Length", str(last - first + 1))
    _answer(start_response, "206 Partial Content", *file.headers[:3], *file.policy, spans, length)
    return wanted


def _not_modified(environ: WSGIEnvironment, file: File) -> bool:
    """If-None-Match (RFC 9110, 13.1.2: in a list, weak, or ``*``), else If-Modified-Since."""
    header = environ.get("HTTP_IF_NONE_MATCH")
    if header is not None:
        tags = {tag.strip().removeprefix("W/") for tag in header.split(",")}
        return "*" in tags or file.etag in tags
    since: str | None = environ.get("HTTP_IF_MODIFIED_SINCE")
    parsed = parsedate(since) if since else None  # None: no date, or none to read
    return parsed is not None and timegm(parsed) >= file.seconds


def _slice(file: IO[bytes], first: int, last: int) -> Iterator[bytes]:
    with file:
        file.seek(first)
        left = last - first + 1
        while left > 0 and (chunk := file.read(min(left, CHUNK))):
            left -= len(chunk)
            yield chunk


def _as_sent(environ: WSGIEnvironment) -> bool:
    """Whether the path as sent ends in ``/rating``: a client resolves ``rating/`` against it,
    and from ``7%2Frating`` would reach ``articles/rating/``. gunicorn (and --serve) give
    the path as sent in RAW_URI, uWSGI and mod_wsgi in REQUEST_URI."""
    sent = environ.get("RAW_URI") or environ.get("REQUEST_URI")
    return sent is None or sent.partition("?")[0].endswith("/rating")


def _answer(start_response: StartResponse, status: str, *headers: tuple[str, str]) -> list[bytes]:
    start_response(status, [*headers, *contract.COMMON_HEADERS])
    return []


def _error(
    start_response: StartResponse, status: str, body: bytes, method: str, *extra: tuple[str, str]
) -> list[bytes]:
    _answer(start_response, status, *_json(body), *extra)
    return [] if method == "HEAD" else [body]  # wsgiref sends whatever it is given


def _json(body: bytes) -> tuple[tuple[str, str], ...]:
    return ("Content-Type", contract.ERROR_TYPE), ("Content-Length", str(len(body)))


def create_app(root: str = "site", *, autorefresh: bool = False) -> WSGIApplication:
    """The WSGI app serving the built site in ``root``: ``gunicorn 'generate:create_app()'``.

    ``root`` is taken relative to the current directory once, here, as
    ``--output`` is; it must exist, as it does after a build. ``autorefresh``
    is --serve's: WhiteNoise looks each asset up when asked, for development.
    """
    folder = os.path.abspath(root)
    if not os.path.isdir(folder):
        raise InputError(f"{root}: no such folder: build the site first (python generate.py)")
    return App(folder, autorefresh=autorefresh)
