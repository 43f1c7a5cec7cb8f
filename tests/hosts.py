"""The hosts of the HTTP contract suite, and where each differs from the app (DIFFERENCES).

Each ``start_*`` builds the test project and starts a host on 127.0.0.1, configured as shipped:
``--serve``, gunicorn, nginx, ``netlify dev``, ``wrangler pages dev`` (scripts/install-host-tools),
and the edges in front of a published bucket: nginx → SeaweedFS, the R2 Worker (``wrangler dev``).
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Final

from ratings_api.bucket_state import STATE_NAME
from ratings_api.build import build
from ratings_api.contract import CACHE_CONTROL
from ratings_api.publish import content_type
from tests.contract import (
    NOT_RUN,
    POINTS,
    RATINGS,
    REPO,
    USER_FILES,
    Difference,
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
from tests.objectstore import Store, free_port, start_store

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
    answering: bool = False,
) -> tuple[subprocess.Popen[bytes], int, Path]:
    """Start ``command`` in ``folder``; wait for ``ready`` in its log (group 1: the port if none
    is given), and if ``answering``, until it answers. The process, its port and its log."""
    log = log or folder / "server.log"
    process = start(command, folder, log, environ)
    try:
        found = wait_for(ready, log, process)
        port = port if port is not None else int(found[1])
        if answering:
            wait_answering(port)
    except BaseException:
        stop(process)
        raise
    return process, port, log


def host(name: str, site: Path, started: tuple[subprocess.Popen[bytes], int, Path]) -> Host:
    process, port, log = started
    return Host(name, port, site, BASE_URL, process, log, DIFFERENCES[name])


# python generate.py --serve, and gunicorn: the WhiteNoise app

SERVING: Final = r"^Serving site/ at http://127\.0\.0\.1:(\d+)/ "


def serve_command(*options: str, port: str = "0") -> list[str]:
    generate = str(REPO / "generate.py")
    return [sys.executable, "-W", "error", generate, "--serve", "--port", port, *options]


def start_serve(folder: Path, ratings: str = RATINGS) -> Host:
    """``python generate.py --serve`` with no base URL: the served address is used."""
    make_project(folder, ratings)
    served = host("generate --serve", folder / "site", started(serve_command(), folder, SERVING))
    served.base_url = f"http://127.0.0.1:{served.port}"
    return served


def start_gunicorn(folder: Path) -> Host:
    """The production command, run in the folder that holds site/."""
    site = build_project(folder)
    command = [sys.executable, "-W", "error", "-m", "gunicorn", "--bind", "127.0.0.1:0"]
    command += ["--workers", "2", "--threads", "4", "--no-control-socket"]
    command += ["--pythonpath", str(REPO)]
    ready = r"Listening at: http://127\.0\.0\.1:(\d+)"
    # gunicorn listens before its workers run.
    process = started([*command, "generate:create_app()"], folder, ready, answering=True)
    return host("gunicorn", site, process)


# The static hosts' own servers


@functools.cache
def install_host_tools() -> None:
    """Run scripts/install-host-tools once a session; fail with its output if it fails."""
    run_ok([str(INSTALL)], timeout=1800)


def build_project(folder: Path) -> Path:
    """The contract's test project, built with BASE_URL (and so the hosts' files); its site/."""
    source = make_project(folder)
    build(str(source), str(folder / "site"), base_url=BASE_URL, environ={})
    return folder / "site"


# The line of both shipped nginx files a user edits to say where it listens.
NGINX_LISTEN: Final = "    listen 80;  # EDIT: the port (and address) to listen on\n"
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


def run_nginx(
    folder: Path, shipped: Path, edits: dict[str, str]
) -> tuple[subprocess.Popen[bytes], int, Path]:
    """Debian's nginx in the foreground with ``shipped`` and a user's ``edits`` of it, on a free
    port, its files and log in ``folder``; it warns of nothing, as `nginx -t` would not."""
    port = free_port()
    server = edited(shipped, {**edits, NGINX_LISTEN: f"    listen 127.0.0.1:{port};\n"})
    (folder / "ratings.conf").write_text(server, encoding="utf-8")
    # As root, nginx's workers would run as nobody, who cannot enter pytest's 0700 folders.
    user = "user root;\n" if os.geteuid() == 0 else ""
    main = folder / "nginx.conf"
    main.write_text(NGINX_MAIN.format(user=user, folder=folder), encoding="utf-8")
    log = folder / "nginx-error.log"
    log.touch()
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    command = [nginx, "-p", str(folder), "-c", str(main), "-e", str(log), "-g", "daemon off;"]
    process = started(command, folder, "start worker process", port=port, log=log)
    if "[warn]" in log.read_text():
        stop(process[0])
        raise AssertionError(log.read_text())
    return process


def start_nginx(folder: Path) -> Host:
    """Debian's nginx with deploy/nginx.conf and its documented edits, its files in ``folder``."""
    install_host_tools()
    site = build_project(folder)
    root = "    root /var/www/ratings/site;  # EDIT: the absolute path of the built site/\n"
    return host("nginx", site, run_nginx(folder, NGINX_CONF, {root: f"    root {site};\n"}))


# No telemetry, no browser, no questions; offline, it asks the network for nothing. It
# listens on every interface: the preload (NODE_OPTIONS) keeps its servers on 127.0.0.1.
NETLIFY_ENVIRON: Final = {"NETLIFY_TELEMETRY_DISABLED": "1", "BROWSER": "none", "CI": "1"} | {
    "NODE_OPTIONS": f'--require "{NODE_PROJECT / "loopback.cjs"}"'
}


def start_netlify_dev(folder: Path) -> Host:
    """``netlify dev --offline`` from netlify-cli, serving site/ with the shipped netlify.toml."""
    install_host_tools()
    site = folder / "site"
    if not (site / "404.html").exists():  # started again after a crash: already built
        build_project(folder)
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


def start_wrangler(folder: Path) -> Host:
    """``wrangler pages dev`` (Cloudflare Pages' local server) serving site/, offline."""
    install_host_tools()
    make_project(folder)
    environ = {**hermetic_environ(), "CF_PAGES_URL": BASE_URL, "PYTHON": sys.executable}
    run_ok(["bash", str(CLOUDFLARE_BUILD)], cwd=folder, env=environ)  # as Pages runs it
    port = free_port()
    command = [str(NODE_BIN / "wrangler"), "pages", "dev", "site", "--ip", "127.0.0.1"]
    command += ["--port", str(port), "--compatibility-date", WRANGLER_COMPATIBILITY_DATE]
    process = started(command, folder, WRANGLER_READY, wrangler_environ(folder), port)
    return host("wrangler pages dev", folder / "site", process)


# The edges of deploy/ that make a published bucket the API: nginx in front of SeaweedFS,
# and the R2 Worker under ``wrangler dev``.
WORKER: Final = REPO / "deploy" / "cloudflare-r2-worker"
FILL_R2: Final = REPO / "tests" / "hosts-node" / "fill-r2.mjs"
BUCKET: Final = "ratings"
PREFIX: Final = "live"  # a prefix, so that the edges are shown to honour one


def bucket_object(site: Path, name: str) -> dict[str, str]:
    """The file ``name`` of the site as an object under PREFIX, with its headers."""
    kind = "text/plain; charset=utf-8" if name.endswith(".txt") else content_type(name)
    return {"key": f"{PREFIX}/{name}", "file": str(site / name), "contentType": kind}


def publish_with_cli(folder: Path, store: Store) -> None:
    """``python generate.py --publish s3://BUCKET/PREFIX`` in the project, as a user runs it,
    and the user's own files (CNAME, robots.txt, about/, a dotfile), which --publish leaves
    out, copied by hand, so that the edges are shown to serve (or hide) them as other hosts do."""
    command = [sys.executable, "-W", "error", str(REPO / "generate.py"), "--quiet"]
    command += ["--base-url", BASE_URL, "--publish", f"s3://{BUCKET}/{PREFIX}"]
    run_ok(command, cwd=folder, env={**hermetic_environ(), **store.environ()})
    client = store.client()
    for name in USER_FILES:
        entry = bucket_object(folder / "site", name)
        extra = {"ContentType": entry["contentType"], "CacheControl": CACHE_CONTROL}
        client.upload_file(entry["file"], BUCKET, entry["key"], ExtraArgs=extra)


# Worker → R2


def worker_config(folder: Path) -> Path:
    """deploy/cloudflare-r2-worker with its two documented edits: the bucket and the prefix."""
    text = edited(
        WORKER / "wrangler.toml",
        {
            'bucket_name = "ratings"  # EDIT': f'bucket_name = "{BUCKET}"  # EDIT',
            'PREFIX = ""  # EDIT': f'PREFIX = "{PREFIX}"  # EDIT',
        },
    )
    (folder / "worker.js").write_bytes((WORKER / "worker.js").read_bytes())
    (folder / "wrangler.toml").write_text(text, encoding="utf-8")
    return folder / "wrangler.toml"


def fill_r2(folder: Path, site: Path) -> None:
    """Put the site into the local R2 that ``wrangler dev`` reads, as --publish and a user would.

    wrangler's R2 has no S3 interface for --publish to write to: every file of
    the site (no link, and not `_redirects`, which only Netlify and Pages read and
    --publish leaves out) with the headers --publish gives it, and a state object.
    """
    walked = [(top, name) for top, _, names in os.walk(site) for name in names]
    files = [os.path.relpath(os.path.join(*file), site) for file in walked]
    kept = [name for name in files if name != "_redirects" and not (site / name).is_symlink()]
    objects = [bucket_object(site, name) for name in kept]
    (folder / "state.gz").write_bytes(b"the publisher's state, never served")
    objects.append({"key": f"{PREFIX}/{STATE_NAME}", "file": str(folder / "state.gz")})
    for entry in objects:
        entry.update(
            cacheControl=CACHE_CONTROL, contentType=entry.get("contentType", "application/gzip")
        )
    (folder / "objects.json").write_text(json.dumps(objects), encoding="utf-8")
    objects_file = str(folder / "objects.json")
    run_ok(["node", str(FILL_R2), str(folder / "state"), BUCKET, objects_file], cwd=folder)


def start_worker(folder: Path) -> Host:
    """``wrangler dev`` running deploy/cloudflare-r2-worker over a local R2, offline."""
    install_host_tools()
    site = build_project(folder)
    config = worker_config(folder)
    fill_r2(folder, site)
    port = free_port()
    command = [str(NODE_BIN / "wrangler"), "dev", "--config", str(config), "--local"]
    command += ["--persist-to", str(folder / "state"), "--ip", "127.0.0.1", "--port", str(port)]
    command += ["--inspector-port", str(free_port())]
    # Offline: no fetch of the Request.cf object from Cloudflare (a placeholder is used).
    environ = wrangler_environ(folder) | {"CLOUDFLARE_CF_FETCH_ENABLED": "false"}
    ready = started(command, folder, WRANGLER_READY, environ, port)
    worker = host("Worker → R2", site, ready)
    worker.publish = lambda: fill_r2(folder, site)
    return worker


# nginx → S3

NGINX_EDGE_CONF: Final = REPO / "deploy" / "nginx-object-storage.conf"
# The cache's lifetime in deploy/nginx-object-storage.conf (proxy_cache_valid 1s),
# and how long a copy may really live: nginx's clock counts whole seconds.
NGINX_EDGE_CACHE_SECONDS: Final = 1.0
NGINX_EDGE_STALE_SECONDS: Final = 2.0


def start_edge_nginx(folder: Path, store_port: int) -> tuple[subprocess.Popen[bytes], int, Path]:
    """nginx with deploy/nginx-object-storage.conf and its documented edits for a store on
    ``store_port``, its files in ``folder``: process, port, log."""
    server = "    server 127.0.0.1:8333;  # EDIT: the store's host:port (port 443 for https)\n"
    root = "    set $ratings_edge_root /BUCKET/PREFIX;\n"
    edits = {
        server: f"    server 127.0.0.1:{store_port};\n",
        "proxy_cache_path /var/cache/nginx/ratings ": f"proxy_cache_path {folder / 'cache'} ",
        root: f"    set $ratings_edge_root /{BUCKET}/{PREFIX};\n",
    }
    return run_nginx(folder, NGINX_EDGE_CONF, edits)


def nginx_edge(folder: Path) -> Host:
    """Debian's nginx with deploy/nginx-object-storage.conf in front of SeaweedFS, and the
    store (stopped with it)."""
    install_host_tools()
    site = build_project(folder)
    store = start_store(folder / "store")
    try:
        store.create_bucket(BUCKET)
        publish_with_cli(folder, store)
        edge = host("nginx → S3", site, start_edge_nginx(folder, store.ports["s3.port"]))
    except BaseException:
        store.stop()
        raise

    def publish_again() -> None:
        publish_with_cli(folder, store)
        time.sleep(NGINX_EDGE_STALE_SECONDS + 0.1)  # until the cached copies expire

    edge.publish, edge.stop_also = publish_again, store.stop
    edge.reads = functools.partial(store_reads, store)
    edge.stale_seconds = NGINX_EDGE_STALE_SECONDS
    return edge


def store_reads(store: Store, bucket: str = BUCKET) -> int:
    """How many GET and HEAD requests the store has answered on ``bucket`` (its own count).

    SeaweedFS counts a request once its answer is sent: a count read the moment the
    answer arrives can miss it, so the count is read a moment later.
    """
    time.sleep(0.05)
    url = f"http://127.0.0.1:{store.ports['metricsPort']}/metrics"
    with urllib.request.urlopen(url, timeout=10) as answer:
        text = answer.read().decode()
    kind = rf'\{{bucket="{bucket}",code="\d+",type="(?:GET|HEAD)"\}}'
    found = re.findall(rf"^SeaweedFS_s3_request_total{kind} (\d+)$", text, re.MULTILINE)
    return sum(int(count) for count in found)


# CloudFront: its function runs in node (tests/test_cloudfront.py); CloudFront
# itself and S3 cannot run here. These lines are decided by the function alone,
# from the event CloudFront passes it, and the node tests assert them.
CLOUDFRONT_FUNCTION_POINTS: Final = (
    "no slash (`7/rating`): GET, HEAD, with a query",
    "the no-slash redirect's body",
    "no slash, no article (`2/rating`, `abc/rating`)",
    "an encoded slash and no slash (`7%2Frating`)",
    "an id of 300 digits",
    "the document's own path (`7/rating/index.json`)",
    "a dotfile of yours (`/.hidden`)",
    "POST, PUT, PATCH, DELETE, PROPFIND, TRACE on a rating",
    "the same on an unknown id and on `/`",
    "OPTIONS, with or without CORS, on a rating",
    "OPTIONS on an unknown id",
    "the front page's `Content-Security-Policy`",
)
NOT_RUN_WHY: Final = (
    "CloudFront and S3 cannot run here, so these lines are not measured; the function "
    "is run in node on the events CloudFront would pass it, and its answers held to the "
    "app's (tests/test_http_contract.py): its JSON 404 for malformed ids, traversals, "
    "dotfiles and paths too long for a key, its 405, its preflight and its redirect; its "
    "rewrites in tests/test_cloudfront.py"
)
NOT_MEASURED: Final = {
    point: Difference(NOT_RUN, NOT_RUN_WHY)
    for point in POINTS
    if point not in CLOUDFRONT_FUNCTION_POINTS
}


HOSTS: Final[dict[str, Callable[[Path], Host]]] = {
    "generate --serve": start_serve,
    "gunicorn": start_gunicorn,
    "nginx": start_nginx,
    "netlify dev": start_netlify_dev,
    "wrangler pages dev": start_wrangler,
    "nginx → S3": nginx_edge,
    "Worker → R2": start_worker,
}
DIFFERENCES: Final = read_differences([*HOSTS, "CloudFront"])
DIFFERENCES["CloudFront"] = NOT_MEASURED | DIFFERENCES["CloudFront"]
