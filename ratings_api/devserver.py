"""The development server: ``python generate.py --serve``.

It builds the site, serves it with the WSGI app (server.py) under Python's own
wsgiref server, a thread a connection, and rebuilds whenever the input file
changes; a rebuild that fails leaves the last good site served and says why.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
import traceback
from collections.abc import Callable
from socketserver import ThreadingMixIn
from typing import TYPE_CHECKING, Final
from urllib.parse import unquote
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

from ratings_api.build import Reading, Result, build
from ratings_api.contract import ARTICLES_PATH
from ratings_api.errors import InputError
from ratings_api.server import create_app

if TYPE_CHECKING:
    from wsgiref.types import WSGIEnvironment

POLL_SECONDS: Final = 0.5
# An absolute-form request target (RFC 9112, 3.2.2), which a server must accept: its
# scheme and authority, before the path that gunicorn and every server answer by.
ABSOLUTE_FORM: Final = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://[^/?#]*")
Signature = tuple[int, int, int, int]  # the input file's, to tell an edit


class _Server(ThreadingMixIn, WSGIServer):
    """wsgiref's server with a thread a connection, so one slow client blocks no other."""

    daemon_threads = True  # Ctrl-C stops the server without waiting for clients
    request_queue_size = 128  # socketserver's 5 drops connections when a page asks for many


class _Handler(WSGIRequestHandler):
    """wsgiref's handler, giving the app the path as it was sent, as gunicorn does.

    http.server turns a leading ``//`` into ``/`` (against open redirects, which
    the app never makes), and takes an absolute-form target for a path: the
    other hosts of the API do neither, and all must agree.
    """

    quiet = False  # --quiet: no line a request

    def get_environ(self) -> WSGIEnvironment:
        environ = super().get_environ()
        environ["RAW_URI"] = self.requestline.split()[1]
        path = ABSOLUTE_FORM.sub("", environ["RAW_URI"].partition("?")[0], count=1)
        environ["PATH_INFO"] = unquote(path, "iso-8859-1")
        return environ

    def log_message(self, format: str, *args: object) -> None:
        if not self.quiet:
            super().log_message(format, *args)


def serve(
    input_path: str,
    output: str,
    *,
    base_url: str | None,
    host: str,
    port: int,
    quiet: bool,
    reading: Reading,
) -> None:
    """Build ``output``, serve it at ``host:port``, rebuild when ``input_path`` changes,
    until Ctrl-C.

    ``quiet`` keeps the build summaries and the request log to itself: only
    the address served at and errors are printed. An input or an address that
    cannot be used is an InputError, as for a build.
    """
    try:
        with _listen(host, port, type("Handler", (_Handler,), {"quiet": quiet})) as server:
            address = f"http://{host}:{server.server_port}"  # the bound port, for --port 0

            def rebuild(cause: str = "") -> Result:
                """Build the site, the served address as the last resort base URL; say its
                summary after ``cause`` (none with --quiet)."""
                started = time.perf_counter()
                result = build(
                    input_path,
                    output,
                    base_url=base_url,
                    environ=os.environ,
                    fallback_base_url=address,
                    reading=reading,
                )
                if not quiet:
                    print(cause + result.summary(output, time.perf_counter() - started), flush=True)
                return result

            seen = _signature(input_path)  # before the build, so no edit falls in between
            built = rebuild()
            server.set_app(create_app(output, autorefresh=True))
            print(_serving_line(output, address, built), flush=True)
            stop = threading.Event()
            watcher = threading.Thread(target=_watch, args=(input_path, seen, rebuild, stop))
            watcher.start()
            try:
                server.serve_forever()
            finally:
                stop.set()
                watcher.join()  # a rebuild under way finishes: a build is never cut short
    except KeyboardInterrupt:
        pass  # Ctrl-C is how a development server stops: no traceback


def _listen(host: str, port: int, handler: type[WSGIRequestHandler]) -> _Server:
    try:
        # The socket module encodes a non-ASCII name with the IDNA codec, and
        # turns its failure into a bare TypeError: ask the codec first.
        host.encode("idna")
        return _Server((host, port), handler)
    except UnicodeError as error:
        # The codec's own words (the cause), without its wrapping.
        raise InputError(f"--host {host}: not a host name ({error.__cause__ or error})") from None
    except OverflowError:
        raise InputError(f"--port {port}: a port is a number from 0 to 65535") from None
    except OSError as error:
        raise InputError(f"cannot serve at {host}:{port}: {error.strerror}") from None


def _serving_line(output: str, address: str, built: Result) -> str:
    """Where the site is served, and the document of the smallest article id it built to try:
    from the catalogue, not a listing of a folder that may hold a million."""
    ids = built.catalogue.ids if built.catalogue else []
    sample = f"try {address}/{ARTICLES_PATH}/{min(ids)}/rating/" if ids else "no articles yet"
    return f"Serving {os.path.join(output, '')} at {address}/ — {sample}"


def _signature(path: str) -> Signature | None:
    try:
        status = os.stat(path)
    except OSError:
        return None  # gone for a moment while an editor saves by rename
    return status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns


def _watch(
    input_path: str, seen: Signature | None, rebuild: Callable[[str], None], stop: threading.Event
) -> None:
    """Rebuild whenever the input file changes, until ``stop`` is set."""
    while not stop.wait(POLL_SECONDS):
        current = _signature(input_path)
        if current is None or current == seen:
            continue
        seen = current
        try:
            rebuild(f"{input_path} changed: ")
        except InputError as error:
            _still_serving(str(error))
        except OSError as error:  # the machine's doing (a full disk...), not a bug: one line
            _still_serving(f"{input_path}: the rebuild failed: {error}")
        except Exception:  # noqa: BLE001 - a bug, but this thread is what keeps the site fresh
            # Loud, as a bug should be, yet the watching goes on: the next edit
            # may well rebuild, and a dead watcher would serve an old site silently.
            traceback.print_exc()
            _still_serving(
                f"{input_path}: the rebuild failed (a bug: please report the traceback above)"
            )


def _still_serving(error: str) -> None:
    print(f"{error}\nstill serving the last good build", file=sys.stderr, flush=True)
