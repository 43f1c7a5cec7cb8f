"""The hosts of the HTTP contract suite, and where each differs from the app (DIFFERENCES).

Each ``start_*`` builds the test project and starts a host on 127.0.0.1, configured as shipped:
``--serve``, gunicorn, nginx, ``netlify dev``, ``wrangler pages dev`` (scripts/install-host-tools).
"""

from __future__ import annotations

import functools
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Final

from ratings_api.build import build
from tests.contract import (
    NGINX_OWN,
    RATINGS,
    READY_SECONDS,
    REPO,
    Difference,
    Host,
    differences,
    hermetic_environ,
    make_project,
    run_ok,
    start,
    stop,
    wait_answering,
    wait_for,
)

INSTALL: Final = REPO / "scripts" / "install-host-tools"
NODE_PROJECT: Final = REPO / "tests" / "hosts-node"
NODE_BIN: Final = NODE_PROJECT / "node_modules" / ".bin"
NGINX_CONF: Final = REPO / "deploy" / "nginx.conf"
NETLIFY_TOML: Final = REPO / "netlify.toml"
CLOUDFLARE_HEADERS: Final = REPO / "deploy" / "cloudflare-pages" / "_headers"
CLOUDFLARE_BUILD: Final = REPO / "deploy" / "cloudflare-pages" / "build"
BASE_URL: Final = "https://ratings.example.com"


def started(
    command: list[str],
    folder: Path,
    ready: str,
    environ: dict[str, str] | None = None,
    port: int | None = None,
    log: Path | None = None,
) -> tuple[subprocess.Popen[bytes], int, Path]:
    """Start ``command`` in ``folder``; wait for ``ready`` in its log (group 1: the port if none
    is given). The process, its port and its log."""
    log = log or folder / "server.log"
    process = start(command, folder, log, environ)
    try:
        found = wait_for(ready, log, process)
    except BaseException:
        stop(process)
        raise
    return process, port if port is not None else int(found[1]), log


def host(name: str, site: Path, started: tuple[subprocess.Popen[bytes], int, Path]) -> Host:
    process, port, log = started
    return Host(name, port, site, BASE_URL, process, log, DIFFERENCES[name])


# python generate.py --serve, and gunicorn: the WhiteNoise app

SERVING: Final = r"^Serving site/ at http://127\.0\.0\.1:(\d+)/ "


def serve_command(*options: str, port: str = "0") -> list[str]:
    generate = str(REPO / "generate.py")
    return [sys.executable, "-W", "error", generate, "--serve", "--port", port, *options]


def refused_serve(folder: Path, port: str = "0") -> subprocess.CompletedProcess[str]:
    """``python generate.py --serve --port PORT`` in ``folder``, which must stop by itself."""
    return subprocess.run(  # check=False: the exit code is what the test reads
        serve_command(port=port),
        cwd=folder,
        capture_output=True,
        text=True,
        env=hermetic_environ(),
        timeout=READY_SECONDS,
        check=False,
    )


def start_serve(folder: Path, ratings: str = RATINGS) -> Host:
    """``python generate.py --serve`` with no base URL: the served address is used."""
    make_project(folder, ratings)
    served = host("generate --serve", folder / "site", started(serve_command(), folder, SERVING))
    served.base_url = f"http://127.0.0.1:{served.port}"
    return served


def start_gunicorn(folder: Path, ratings: str = RATINGS) -> Host:
    """The production command, run in the folder that holds site/."""
    site = build_project(folder, ratings)
    command = [sys.executable, "-W", "error", "-m", "gunicorn", "--bind", "127.0.0.1:0"]
    command += ["--workers", "2", "--threads", "4", "--no-control-socket"]
    command += ["--pythonpath", str(REPO)]
    process = started(
        [*command, "generate:create_app()"], folder, r"Listening at: http://127\.0\.0\.1:(\d+)"
    )
    try:
        wait_answering(process[1])  # gunicorn listens before its workers run
    except BaseException:
        stop(process[0])
        raise
    return host("gunicorn", site, process)


# The static hosts' own servers


@functools.cache
def install_host_tools() -> None:
    """Run scripts/install-host-tools once a session; fail with its output if it fails."""
    run_ok([str(INSTALL)], timeout=1800)


def free_port() -> int:
    """A port nothing listens on now, for a server that cannot be told to take port 0."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def build_project(folder: Path, ratings: str = RATINGS) -> Path:
    """The contract's test project, built with BASE_URL (and so the hosts' files); its site/."""
    source = make_project(folder, ratings)
    build(str(source), str(folder / "site"), base_url=BASE_URL, environ={})
    return folder / "site"


# The two lines of deploy/nginx.conf a user edits, as shipped.
NGINX_LISTEN: Final = "    listen 80;  # EDIT: the port (and address) to listen on\n"
NGINX_ROOT: Final = (
    "    root /var/www/ratings/site;  # EDIT: the absolute path of the built site/\n"
)
NGINX_MAIN: Final = """\
{user}pid {folder}/nginx.pid;
error_log {folder}/nginx-error.log notice;
events {{ worker_connections 256; }}
http {{
    include /etc/nginx/mime.types;
    default_type application/octet-stream;
    access_log off;
    include {folder}/ratings.conf;
}}
"""


def edited(path: Path, edits: dict[str, str]) -> str:
    """The text of ``path`` with each of its lines ``edits`` names replaced, as a user does."""
    text = path.read_text(encoding="utf-8")
    for line, replacement in edits.items():
        assert text.count(line) == 1, f"{path}: no single line {line!r}"
        text = text.replace(line, replacement)
    return text


def nginx_site_conf(port: int, site: Path) -> str:
    """deploy/nginx.conf with the two documented edits: the port and the site's path."""
    listen, root = f"    listen 127.0.0.1:{port};\n", f"    root {site};\n"
    return edited(NGINX_CONF, {NGINX_LISTEN: listen, NGINX_ROOT: root})


def start_nginx(folder: Path, ratings: str = RATINGS) -> Host:
    """Debian's nginx with deploy/nginx.conf, in the foreground, its files in ``folder``."""
    install_host_tools()
    site = build_project(folder, ratings)
    port = free_port()
    return host("nginx", site, run_nginx(folder, port, nginx_site_conf(port, site)))


def nginx_command(folder: Path, server: str) -> list[str]:
    """Debian's nginx with the server block ``server``, its files and its log in ``folder``."""
    (folder / "ratings.conf").write_text(server, encoding="utf-8")
    # As root, nginx's workers would run as nobody, who cannot enter pytest's 0700 folders.
    user = "user root;\n" if os.geteuid() == 0 else ""
    main = folder / "nginx.conf"
    main.write_text(NGINX_MAIN.format(user=user, folder=folder), encoding="utf-8")
    (folder / "nginx-error.log").touch()
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    return [nginx, "-p", str(folder), "-c", str(main), "-e", str(folder / "nginx-error.log")]


def run_nginx(folder: Path, port: int, server: str) -> tuple[subprocess.Popen[bytes], int, Path]:
    """nginx in the foreground (``nginx_command``): its process, port and log."""
    command = [*nginx_command(folder, server), "-g", "daemon off;"]
    log = folder / "nginx-error.log"
    return started(command, folder, "start worker process", port=port, log=log)


# No telemetry, no browser, no questions; offline, it asks the network for nothing. It
# listens on every interface: the preload (NODE_OPTIONS) keeps its servers on 127.0.0.1.
NETLIFY_ENVIRON: Final = {"NETLIFY_TELEMETRY_DISABLED": "1", "BROWSER": "none", "CI": "1"} | {
    "NODE_OPTIONS": f'--require "{NODE_PROJECT / "loopback.cjs"}"'
}


def start_netlify_dev(folder: Path, ratings: str = RATINGS) -> Host:
    """``netlify dev --offline`` from netlify-cli, serving site/ with the shipped netlify.toml."""
    install_host_tools()
    site = folder / "site"
    if not (site / "404.html").exists():  # started again after a crash: already built
        build_project(folder, ratings)
        shutil.copyfile(NETLIFY_TOML, folder / "netlify.toml")
    port = free_port()
    command = [str(NODE_BIN / "netlify"), "dev", "--offline", "--internal-disable-edge-functions"]
    command += ["--no-open", "--skip-gitignore", "--dir", "site", "--port", str(port)]
    # Its static server's own default port is 3999: two suites at once would share it.
    command += ["--staticServerPort", str(free_port())]
    ready = r"Local dev server ready: http://localhost:(\d+)"
    netlify = host("netlify dev", site, started(command, folder, ready, NETLIFY_ENVIRON, port))
    netlify.restart = lambda: start_netlify_dev(folder)
    return netlify


WRANGLER_READY: Final = r"Ready on http://127\.0\.0\.1:(\d+)"
# wrangler's own default is today's date, newer than its pinned workerd knows.
WRANGLER_COMPATIBILITY_DATE: Final = "2026-04-01"


def wrangler_environ(folder: Path) -> dict[str, str]:
    """No metrics, and its logs and caches in the test's folder."""
    environ = {"WRANGLER_SEND_METRICS": "false", "CI": "1", "HOME": str(folder)}
    return environ | {"XDG_CONFIG_HOME": str(folder / ".config")}


def start_wrangler(folder: Path, ratings: str = RATINGS) -> Host:
    """``wrangler pages dev`` (Cloudflare Pages' local server) serving site/, offline."""
    install_host_tools()
    make_project(folder, ratings)
    environ = {**hermetic_environ(), "CF_PAGES_URL": BASE_URL, "PYTHON": sys.executable}
    run_ok(["bash", str(CLOUDFLARE_BUILD)], cwd=folder, env=environ)  # as Pages runs it
    port = free_port()
    command = [str(NODE_BIN / "wrangler"), "pages", "dev", "site", "--ip", "127.0.0.1"]
    command += ["--port", str(port), "--compatibility-date", WRANGLER_COMPATIBILITY_DATE]
    process = started(command, folder, WRANGLER_READY, wrangler_environ(folder), port)
    return host("wrangler pages dev", folder / "site", process)


HOSTS: Final[dict[str, Callable[..., Host]]] = {
    "generate --serve": start_serve,
    "gunicorn": start_gunicorn,
    "nginx": start_nginx,
    "netlify dev": start_netlify_dev,
    "wrangler pages dev": start_wrangler,
}

# What each host answers where it differs from the app, as measured, and why:
# a line each, `point | what it answers | why`.
DIFFERENCES: Final[dict[str, dict[str, Difference]]] = {
    "generate --serve": {},
    "gunicorn": differences(r"""
a request line over 4094 bytes | 414 | gunicorn refuses a request line longer than --limit-request-line (4094 bytes) before the app sees it
a NUL byte in the request line | 400 | gunicorn refuses control characters in the request line
another control byte in the request line (`\x01`, `\x7f`) | 400 | the same
a non-ASCII byte in the request line | 400 | gunicorn refuses bytes outside ASCII in the request target
"""),
    "nginx": differences(r"""
`ETag` | `"<hex>-<hex>"` (mtime in s, size) | nginx's own ETag, from whole seconds
a rebuild (in the same second, same size) | the new document, with the old `ETag`: a client's copy gets 304 | nginx's ETag is the mtime in whole seconds and the size: a document rewritten within the same second at the same length keeps its ETag until the next change
the no-slash redirect's body | 162 bytes of `text/html` | nginx's `return 301` always sends its own HTML page
the `charset` of HTML and text files | `charset=utf-8` | nginx's `charset utf-8` writes the parameter unquoted, as most servers do; quoted or not, it is the same value (RFC 9110, 5.6.6)
""")
    | NGINX_OWN,
    "netlify dev": differences(r"""
`Content-Type` of a JSON file | `application/json; charset=utf-8` | netlify dev's static server adds the parameter
`ETag` | `W/"<size>-<hash>"`, weak | netlify dev's static server makes its own, of the content
`Last-Modified` | none | netlify dev sends none
HEAD: the headers of GET, no body | not the same `ETag` | netlify dev's ETag on HEAD is that of the empty body
`Cache-Control` of a file (200, 206, 304) | `public, max-age=0` | netlify dev's static server sets its own on the files it sends, over netlify.toml's (its proxy's own answers keep netlify.toml's)
`Cache-Control` of a 404 | `public, max-age=0` | the same
`If-Modified-Since` the `Last-Modified` or later | no `Last-Modified` to send | no Last-Modified
`Range: bytes=0-9` | 200 and the whole document | netlify dev ignores Range
`Range`: one byte (`bytes=0-0`, `bytes=-1`) | 200 and the whole document | the same: it ignores Range
`Range`: none satisfiable (`bytes=-0`, `bytes=500-`) or invalid (`bytes=5-2`) | 200 and the whole document | the same: it ignores Range
the 416's body | no 416 | the same: it ignores Range
`Range` past 2⁶³ (`bytes=0-99999999999999999999`) | 200 and the whole document | the same: it ignores Range
no slash (`7/rating`): GET, HEAD, with a query | 200 and the file | Netlify matches a rule with or without the trailing slash: the rewrite serves both forms, and the redirect rule is never reached
the no-slash redirect's body | no redirect | the same
an encoded slash and no slash (`7%2Frating`) | 200 and the file | the rewrite reads `%2F` as a slash, and serves `7/rating` so
`Content-Type` of a 404 | `text/html; charset=utf-8` | 404.html is sent with the type its name gives
the document's own path (`7/rating/index.json`) | 200 | Netlify serves every file at its own path as well
a folder without its slash (`/about`) | 200 | netlify dev serves a folder's index.html without the slash too
a dotfile of yours (`/.hidden`) | 200 | netlify dev serves every file of the folder; `netlify deploy` leaves out names that start with a dot (netlify-cli's getDeployFilesFilter, said to match Netlify's builds)
POST, PUT, PATCH, DELETE, PROPFIND, TRACE on a rating | 200, no `Allow`, `text/plain` “Method Not Allowed” | after the 200 rewrite, netlify dev's proxy answers other methods with its own text, and the rule's 200
the same on an unknown id and on `/` | 405, no `Allow`, `text/plain` “Method Not Allowed” | its proxy's own 405
OPTIONS, with or without CORS, on a rating | 200, no `Allow`, `text/plain` “Method Not Allowed” | the same as other methods: a preflight fails, so a browser sends only simple cross-origin GETs (which need none)
OPTIONS on an unknown id | 405, no `Allow`, `text/plain` “Method Not Allowed” | the same
the `charset` of HTML and text files | `charset=utf-8` | unquoted; the same value (RFC 9110, 5.6.6)
`/..%5csecret.txt` (an encoded backslash) | 403 | netlify dev answers this path with a 403 of its own
`rating\index.json` (a backslash for a slash) | 200 and the file | netlify dev reads `\` as `/`, as WHATWG URL parsing does in an http URL: the document, inside the root
dot segments inside the root (`api/./articles`, `rating/.`) | 200 and the file | netlify dev resolves `.` segments: the document, inside the root
an empty segment (`/away//api/…`) | 200 and the file | netlify dev merges the slashes: the document, inside the root
`%00` in the path | 400 | netlify dev refuses a path with a NUL byte
a NUL byte in the request line | 400 | netlify dev refuses it
another control byte in the request line (`\x01`, `\x7f`) | 400 | netlify dev refuses it
a non-ASCII byte in the request line | 400 | netlify dev refuses it
a symlink to a folder outside the root (`site/system -> /etc`) | 200 and the file | netlify dev follows every symlink in the folder it serves, wherever it leads: keep symlinks out of site/ (the build never makes one)
a symlink to a file outside the root (`-> ../secret.txt`) | 200 and the file | the same
a symlink to a file inside the root (`-> robots.txt`) | 200 and the file | the same
a symlink to a folder inside the root (`-> away`) | 200 and the file | the same
a symlink loop (`loop -> loop`) | 500 | netlify dev answers the ELOOP of its file lookup with a JSON 500 of its own
`If-None-Match: *`, a list, or the weak form of the `ETag` | `*`: 200 with an empty body; a list: 200; the weak form: 304 | netlify dev's static server reads one tag, and answers `*` with a 200 and no body
a malformed `%` escape (`/%3G`, `/%`) | no answer: the server exits | the same as overlong UTF-8 below: decodeURIComponent throws a URIError that ends the process; the suite starts it again
`/..%c0%af..%c0%afsecret.txt` (overlong UTF-8) | no answer: the server exits | netlify dev's rewriter (rules-proxy.js) calls decodeURIComponent on the path and the URIError it throws ends the process; the suite starts it again
"""),
    "wrangler pages dev": differences(r"""
`Content-Length` of a file | none | wrangler pages dev streams every file with `Transfer-Encoding: chunked`
`ETag` | `"<32 hex digits>"` (of the content) | wrangler pages dev's own: it changes with the content, the mtime plays no part
`Last-Modified` | none | wrangler pages dev sends none
`If-Modified-Since` the `Last-Modified` or later | no `Last-Modified` to send | the same
`If-None-Match` with the `ETag`, GET and HEAD | 304 without an `ETag` | wrangler pages dev's 304 leaves the ETag out
`Range: bytes=0-9` | 200 and the whole document | wrangler pages dev ignores Range
`Range`: one byte (`bytes=0-0`, `bytes=-1`) | 200 and the whole document | the same: it ignores Range
`Range`: none satisfiable (`bytes=-0`, `bytes=500-`) or invalid (`bytes=5-2`) | 200 and the whole document | the same: it ignores Range
the 416's body | no 416 | the same: it ignores Range
`Range` past 2⁶³ (`bytes=0-99999999999999999999`) | 200 and the whole document | the same: it ignores Range
`If-None-Match: *`, a list, or the weak form of the `ETag` | `*`: 200; a list: 200; the weak form: 304 | wrangler pages dev compares If-None-Match with its ETag as one value, weak or strong: `*` and lists are not read
no slash (`7/rating`): GET, HEAD, with a query | 301 to `/away/api/articles/7/rating/` | Pages matches `_redirects` rules exactly, so the second rule answers, and it sends the rule's target as written: an absolute path
the no-slash redirect's body | `text/plain` “Redirecting to /away/api/articles/7/rating/” | wrangler pages dev writes a short text body on its redirects
no slash, no article (`2/rating`, `abc/rating`) | 301 to the path with a slash, then 404 | a `_redirects` rule cannot ask whether the file exists: the redirect comes first, the 404 after it
`Content-Type` of a 404 | `text/html; charset=utf-8` | 404.html is sent with the type its name gives
`Cache-Control` of a 404 | `no-store` | wrangler pages dev replaces the `_headers` value on its 404s
`Content-Length` of a 404 | none | the same: chunked
an id of 300 digits | 502 | its local asset server looks the path up on disk, fails (ENAMETOOLONG: the name is longer than a file name may be) and answers 502 with the error's text
a path of 2,000 or 3,000 bytes | 502 | the same (ENAMETOOLONG)
`%00` in the path | 502 | the same: Node refuses a file path with a NUL byte (ERR_INVALID_ARG_VALUE)
the document's own path (`7/rating/index.json`) | 200 | Pages serves every file at its own path as well
a folder without its slash (`/about`) | 308 to the path with a slash, then 200 | wrangler pages dev redirects a folder's name to the folder
a dotfile of yours (`/.hidden`) | 200 | wrangler pages dev serves dotfiles, and `wrangler pages deploy` uploads them (its IGNORE_LIST holds only `.DS_Store`, `.git`, `.wrangler`, `node_modules` and the config files): the build keeps its record beside site/, not in it
POST, PUT, PATCH, DELETE, PROPFIND, TRACE on a rating | 405, no `Allow`, an empty body; TRACE: no answer within 2 s | wrangler pages dev answers every method but GET and HEAD with an empty 405 of its own, but TRACE: its proxy throws ("'TRACE' HTTP method is unsupported", from undici) and never answers
the same on an unknown id and on `/` | 405, no `Allow`, an empty body | the same
OPTIONS, with or without CORS, on a rating | 405, no `Allow`, an empty body | the same: a preflight fails, so a browser sends only simple cross-origin GETs (which need none)
OPTIONS on an unknown id | 405, no `Allow`, an empty body | the same
the front page `/index.html` | 308 to `/`, then 200 | wrangler pages dev redirects `/index.html` to `/`
the `charset` of HTML and text files | `charset=utf-8` | unquoted; the same value (RFC 9110, 5.6.6)
`rating\index.json` (a backslash for a slash) | 200 and the file | wrangler pages dev reads `\` as `/`, as WHATWG URL parsing does in an http URL: the document, inside the root
dot segments inside the root (`api/./articles`, `rating/.`) | 200 and the file | wrangler pages dev resolves `.` segments: the document, inside the root
an encoded slash (`7%2Frating%2F`) | 404 | wrangler pages dev does not take `%2F` for a separator
an absolute-form target (`http://127.0.0.1/../secret.txt`) | 500 | workerd fails to parse the target (kj/compat/url.c++: invalid URL)
a request line over 4094 bytes | 502 | ENAMETOOLONG, as above
a symlink to a folder outside the root (`site/system -> /etc`) | 200 and the file | wrangler pages dev follows a symlinked folder, wherever it leads: keep symlinks out of site/ (the build never makes one)
a symlink to a file outside the root (`-> ../secret.txt`) | 502 | wrangler pages dev fails on a symlinked file and answers 502 with the error's text
a symlink to a file inside the root (`-> robots.txt`) | 502 | the same
a symlink to a folder inside the root (`-> away`) | 200 and the file | it follows a symlinked folder
a symlink loop (`loop -> loop`) | 502 | the same as a symlinked file
a NUL byte in the request line | 400 | wrangler pages dev refuses it
another control byte in the request line (`\x01`, `\x7f`) | 200 and the file | workerd reads the target as a WHATWG URL, which drops a control byte at its end: the document, inside the root
"""),
}


# The edges in front of a published bucket join the same suite and table. Imported
# last: tests/edges.py starts its hosts with this module's helpers.
from tests import edges  # noqa: E402

HOSTS.update(edges.EDGES)
DIFFERENCES.update(edges.DIFFERENCES)
