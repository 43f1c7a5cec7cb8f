"""The static hosts' own servers, started for the HTTP contract suite.

Each ``start_*`` function takes an empty folder, builds the test project in
it, starts the host's server on 127.0.0.1 with the configuration this
repository ships (``deploy/nginx.conf``, ``netlify.toml``,
``deploy/cloudflare-pages/_headers`` and the generated ``_redirects`` and
``404.html``), and returns a ``Host`` whose differences
name, with the reason, each line of the contract that host cannot honour.

The servers come from ``scripts/install-host-tools``, run once a session;
its failure fails the tests with its output, and nothing is skipped.
"""
from __future__ import annotations

import functools
import os
import shutil
import socket
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from tests.test_http_contract import Host

REPO: Final = Path(__file__).resolve().parent.parent
INSTALL: Final = REPO / "scripts" / "install-host-tools"
NODE_BIN: Final = REPO / "tests" / "hosts-node" / "node_modules" / ".bin"
NGINX_CONF: Final = REPO / "deploy" / "nginx.conf"
NETLIFY_TOML: Final = REPO / "netlify.toml"
BASE_URL: Final = "https://ratings.example.com"
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
NGINX_READY: Final = r"start worker process"
WRANGLER_READY: Final = r"Ready on http://127\.0\.0\.1:(\d+)"
# wrangler's own default is today's date, newer than its pinned workerd knows.
WRANGLER_COMPATIBILITY_DATE: Final = "2026-04-01"
CLOUDFLARE_HEADERS: Final = REPO / "deploy" / "cloudflare-pages" / "_headers"
NETLIFY_READY: Final = r"Local dev server ready: http://localhost:(\d+)"
# Netlify's CLI asks the network for nothing with these, and asks no one anything.
NETLIFY_ENVIRON: Final = {
    "NETLIFY_TELEMETRY_DISABLED": "1",
    "BROWSER": "none",
    "CI": "1",
}


@functools.cache
def install_host_tools() -> None:
    """Run scripts/install-host-tools once a session; fail with its output if it fails."""
    done = subprocess.run(
        [str(INSTALL)], capture_output=True, text=True, check=False, timeout=1800,
    )
    if done.returncode != 0:
        raise AssertionError(
            f"{INSTALL} exited with {done.returncode}:\n{done.stdout}{done.stderr}"
        )


def free_port() -> int:
    """A port nothing listens on now, for a server that cannot be told to take port 0."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def build_project(folder: Path) -> Path:
    """The contract's test project, built with BASE_URL and the hosts' files; its site/."""
    from ratings_api.build import build, load_catalogue, read_input
    from ratings_api.hosting import hosting_files
    from tests.test_http_contract import make_project

    ratings = make_project(folder)
    site = folder / "site"
    build(str(ratings), str(site), base_url=BASE_URL, environ={})
    # Until build() writes them itself, as it will with hosting_files among its extras.
    catalogue = load_catalogue(str(ratings), read_input(str(ratings)))
    for name, body in hosting_files(catalogue, BASE_URL).items():
        (site / name).write_bytes(body)
    return site


def nginx_site_conf(port: int, site: Path) -> str:
    """deploy/nginx.conf with the two documented edits: the port and the site's path."""
    text = NGINX_CONF.read_text(encoding="utf-8")
    for line, replacement in (
        (NGINX_LISTEN, f"    listen 127.0.0.1:{port};\n"),
        (NGINX_ROOT, f"    root {site};\n"),
    ):
        assert text.count(line) == 1, f"{NGINX_CONF}: no single line {line!r}"
        text = text.replace(line, replacement)
    return text


def start_nginx(folder: Path) -> Host:
    """Debian's nginx with deploy/nginx.conf, in the foreground, its files in ``folder``."""
    from tests.test_http_contract import Difference, Host, start, stop, wait_for

    install_host_tools()
    site = build_project(folder)
    port = free_port()
    (folder / "ratings.conf").write_text(nginx_site_conf(port, site), encoding="utf-8")
    # As root, nginx's workers would run as nobody, who cannot enter pytest's 0700 folders.
    user = "user root;\n" if os.geteuid() == 0 else ""
    main = folder / "nginx.conf"
    main.write_text(NGINX_MAIN.format(user=user, folder=folder), encoding="utf-8")
    log = folder / "nginx-error.log"
    log.touch()
    command = [
        shutil.which("nginx") or "/usr/sbin/nginx", "-p", str(folder), "-c", str(main),
        "-e", str(log), "-g", "daemon off;",
    ]
    process = start(command, folder, folder / "nginx.out")
    try:
        wait_for(NGINX_READY, log, process)
    except BaseException:
        stop(process)
        raise
    return Host("nginx", port, site, BASE_URL, process, log, {
        "NUL byte in the request line": Difference(
            400, "nginx refuses a request line holding a NUL byte before any location applies",
        ),
    })


def start_netlify_dev(folder: Path) -> Host:
    """``netlify dev --offline`` from netlify-cli, serving site/ with the shipped netlify.toml."""
    from tests.test_http_contract import Host, stop, wait_for

    install_host_tools()
    site = build_project(folder)
    shutil.copyfile(NETLIFY_TOML, folder / "netlify.toml")
    port = free_port()
    log = folder / "netlify.log"
    command = [
        str(NODE_BIN / "netlify"), "dev", "--offline", "--internal-disable-edge-functions",
        "--no-open", "--skip-gitignore", "--dir", "site", "--port", str(port),
    ]
    process = start_with(command, folder, log, NETLIFY_ENVIRON)
    try:
        wait_for(NETLIFY_READY, log, process)
    except BaseException:
        stop(process)
        raise
    # Measured differences that are not yet points of the contract are listed
    # in the README's table; tests/test_hosting.py asserts them one by one.
    return Host("netlify dev", port, site, BASE_URL, process, log, {})


def start_with(
    command: list[str], folder: Path, log: Path, extra: dict[str, str]
) -> subprocess.Popen[bytes]:
    """tests.test_http_contract.start, with a few more environment variables."""
    import signal

    from tests.test_http_contract import hermetic_environ

    with open(log, "wb") as output:
        return subprocess.Popen(
            command, cwd=folder, stdout=output, stderr=subprocess.STDOUT,
            env={**hermetic_environ(), **extra},
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )


def start_wrangler(folder: Path) -> Host:
    """``wrangler pages dev`` (Cloudflare Pages' local server) serving site/, offline."""
    from tests.test_http_contract import Host, stop, wait_for

    install_host_tools()
    site = build_project(folder)
    if CLOUDFLARE_HEADERS.exists():  # the documented step: the user's own _headers
        shutil.copyfile(CLOUDFLARE_HEADERS, site / "_headers")
    port = free_port()
    log = folder / "wrangler.log"
    command = [
        str(NODE_BIN / "wrangler"), "pages", "dev", "site", "--ip", "127.0.0.1",
        "--port", str(port), "--compatibility-date", WRANGLER_COMPATIBILITY_DATE,
    ]
    environ = {
        "WRANGLER_SEND_METRICS": "false", "CI": "1",
        # Its logs and caches stay in the test's folder.
        "XDG_CONFIG_HOME": str(folder / ".config"), "HOME": str(folder),
    }
    process = start_with(command, folder, log, environ)
    try:
        wait_for(WRANGLER_READY, log, process)
    except BaseException:
        stop(process)
        raise
    return Host("wrangler pages dev", port, site, BASE_URL, process, log, {})
