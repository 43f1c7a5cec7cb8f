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
    RATINGS,
    READY_SECONDS,
    REPO,
    Host,
    hermetic_environ,
    make_project,
    read_differences,
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
    """nginx in the foreground (``nginx_command``), which warned of nothing: its process, port, log."""
    command = [*nginx_command(folder, server), "-g", "daemon off;"]
    log = folder / "nginx-error.log"
    process = started(command, folder, "start worker process", port=port, log=log)
    if "[warn]" in log.read_text():  # as `nginx -t` would say: a shipped file warns of nothing
        stop(process[0])
        raise AssertionError(log.read_text())
    return process


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

# The edges in front of a published bucket join the same suite and table. Imported
# last: tests/edges.py starts its hosts with this module's helpers.
from tests import edges  # noqa: E402

HOSTS.update(edges.EDGES)
DIFFERENCES: Final = read_differences([*HOSTS, "CloudFront"])
DIFFERENCES["CloudFront"] = edges.NOT_MEASURED | DIFFERENCES["CloudFront"]
