"""The hosts of the HTTP contract suite, and where each differs from the app (DIFFERENCES).

Each ``start_*`` builds the test project and starts a host on 127.0.0.1, configured as shipped:
``--serve``, gunicorn, nginx, ``netlify dev``, ``wrangler pages dev`` (scripts/install-host-tools,
which ``install_host_tools()`` runs once a session, before any of these), and the edges in
front of a published bucket: nginx → SeaweedFS, the R2 Worker (``wrangler dev``)."""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from subprocess import PIPE
from typing import Any, Final

from ratings_api.bucket_state import STATE_NAME
from ratings_api.build import build
from ratings_api.contract import CACHE_CONTROL
from ratings_api.publish import content_type
from ratings_api.server import create_app
from tests.contract import (
    RATINGS,
    REPO,
    USER_FILES,
    Host,
    Reply,
    call_app,
    hermetic_environ,
    make_project,
    read_differences,
    run_installer,
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
CLOUDFLARE_BUILD: Final = REPO / "deploy" / "cloudflare-pages" / "build"
BASE_URL: Final = "https://ratings.example.com"


def started(
    name: str,
    site: Path,
    command: list[str],
    ready: str,
    environ: dict[str, str] | None = None,
    port: int | None = None,
    answering: bool = False,
) -> Host:
    """Start ``command`` in the folder of ``site``; wait for ``ready`` in its log (group 1: the
    port if none is given), and if ``answering``, until it answers: the host ``name``."""
    log = site.parent / "server.log"
    process = start(command, site.parent, log, environ)
    try:
        found = wait_for(ready, log, process)
        port = port if port is not None else int(found[1])
        if answering:
            wait_answering(port)
    except BaseException:
        stop(process)
        raise
    return Host(name, port, site, BASE_URL, process, log, DIFFERENCES[name])


# The app: in this process, as gunicorn calls it; python generate.py --serve, and gunicorn


def start_app(folder: Path) -> Host:
    """The app, called in this process as gunicorn calls it, on the contract's test project."""
    site = build_project(folder)
    answer = functools.partial(call_app, create_app(str(site)))
    return Host("the app", 0, site, BASE_URL, None, folder / "no.log", answer=answer)


SERVING: Final = r"^Serving site/ at http://127\.0\.0\.1:(\d+)/ "


def serve_command(*options: str, port: str = "0") -> list[str]:
    generate = str(REPO / "generate.py")
    return [sys.executable, "-W", "error", generate, "--serve", "--port", port, *options]


def start_serve(folder: Path, ratings: str = RATINGS) -> Host:
    """``python generate.py --serve`` with no base URL: the served address is used."""
    make_project(folder, ratings)
    served = started("generate --serve", folder / "site", serve_command(), SERVING)
    served.base_url = served.address
    return served


def start_gunicorn(folder: Path) -> Host:
    """The production command, run in the folder that holds site/."""
    site = build_project(folder)
    command = [sys.executable, "-W", "error", "-m", "gunicorn", "--bind", "127.0.0.1:0"]
    command += ["--workers", "2", "--threads", "4", "--no-control-socket"]
    command += ["--pythonpath", str(REPO)]
    ready = r"Listening at: http://127\.0\.0\.1:(\d+)"
    # gunicorn listens before its workers run.
    return started("gunicorn", site, [*command, "generate:create_app()"], ready, answering=True)


# The static hosts' own servers


@functools.cache
def install_host_tools() -> None:
    """Run scripts/install-host-tools once a session (a worker's)."""
    run_installer(INSTALL, timeout=1800)


def build_project(folder: Path) -> Path:
    """The contract's test project, built with BASE_URL (and so the hosts' files); its site/."""
    source = make_project(folder)
    build(str(source), str(folder / "site"), base_url=BASE_URL, environ={})
    return folder / "site"


# The line of both shipped nginx files a user edits to say where it listens.
NGINX_LISTEN: Final = "    listen 80;  # EDIT: the port (and address) to listen on\n"
NGINX_MAIN: Final = """\
{user}pid {folder}/nginx.pid;
error_log {folder}/server.log notice;
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


def run_nginx(name: str, folder: Path, shipped: Path, edits: dict[str, str]) -> Host:
    """Debian's nginx in the foreground with ``shipped`` and a user's ``edits`` of it, on a free
    port, its files and log in ``folder``, serving ``folder/site``; it warns of nothing, as
    `nginx -t` would not."""
    port = free_port()
    server = edited(shipped, {**edits, NGINX_LISTEN: f"    listen 127.0.0.1:{port};\n"})
    (folder / "ratings.conf").write_text(server, encoding="utf-8")
    # As root, nginx's workers would run as nobody, who cannot enter pytest's 0700 folders.
    user = "user root;\n" if os.geteuid() == 0 else ""
    main = folder / "nginx.conf"
    main.write_text(NGINX_MAIN.format(user=user, folder=folder), encoding="utf-8")
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    log = str(folder / "server.log")  # its error log, started's log
    command = [nginx, "-p", str(folder), "-c", str(main), "-e", log, "-g", "daemon off;"]
    nginx = started(name, folder / "site", command, "start worker process", port=port)
    if "[warn]" in nginx.log.read_text():
        nginx.stop()
        raise AssertionError(nginx.log.read_text())
    return nginx


def start_nginx(folder: Path) -> Host:
    """Debian's nginx with deploy/nginx.conf and its documented edits, its files in ``folder``."""
    site = build_project(folder)
    root = "    root /var/www/ratings/site;  # EDIT: the absolute path of the built site/\n"
    return run_nginx("nginx", folder, NGINX_CONF, {root: f"    root {site};\n"})


# No telemetry, no browser, no questions; offline, it asks the network for nothing. It
# listens on every interface: the preload (NODE_OPTIONS) keeps its servers on 127.0.0.1.
NETLIFY_ENVIRON: Final = {"NETLIFY_TELEMETRY_DISABLED": "1", "BROWSER": "none", "CI": "1"} | {
    "NODE_OPTIONS": f'--require "{NODE_PROJECT / "loopback.cjs"}"'
}


def start_netlify_dev(folder: Path) -> Host:
    """``netlify dev --offline`` from netlify-cli, serving site/ with the shipped netlify.toml."""
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
    netlify = started("netlify dev", site, command, ready, NETLIFY_ENVIRON, port)
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
    make_project(folder)
    environ = {**hermetic_environ(), "CF_PAGES_URL": BASE_URL, "PYTHON": sys.executable}
    run_ok(["bash", str(CLOUDFLARE_BUILD)], cwd=folder, env=environ)  # as Pages runs it
    port = free_port()
    command = [str(NODE_BIN / "wrangler"), "pages", "dev", "site", "--ip", "127.0.0.1"]
    command += ["--port", str(port), "--compatibility-date", WRANGLER_COMPATIBILITY_DATE]
    environ = wrangler_environ(folder)
    return started("wrangler pages dev", folder / "site", command, WRANGLER_READY, environ, port)


# The edges of deploy/ that make a published bucket the API: nginx in front of SeaweedFS,
# and the R2 Worker under ``wrangler dev``.
WORKER: Final = REPO / "deploy" / "cloudflare-r2-worker"
FILL_R2: Final = REPO / "tests" / "hosts-node" / "fill-r2.mjs"
BUCKET: Final = "ratings"
PREFIX: Final = "live"  # a prefix, so that the edges are shown to honour one


def object_type(name: str) -> str:
    """The type of the object ``name`` in the bucket: --publish's, and a user's for robots.txt."""
    return "text/plain; charset=utf-8" if name.endswith(".txt") else content_type(name)


def bucket_object(file: Path, name: str) -> dict[str, str]:
    """``file`` as the object ``name`` under PREFIX, with the headers --publish gives it."""
    headers = {"contentType": object_type(name), "cacheControl": CACHE_CONTROL}
    return {"key": f"{PREFIX}/{name}", "file": str(file), **headers}


def publish_with_cli(folder: Path, store: Store) -> None:
    """``python generate.py --publish s3://BUCKET/PREFIX`` in the project, as a user runs it,
    and the user's own files (CNAME, robots.txt, about/, a dotfile), which --publish leaves
    out, copied by hand, so that the edges are shown to serve (or hide) them as other hosts do."""
    command = [sys.executable, "-W", "error", str(REPO / "generate.py"), "--quiet"]
    command += ["--base-url", BASE_URL, "--publish", f"s3://{BUCKET}/{PREFIX}"]
    run_ok(command, cwd=folder, env={**hermetic_environ(), **store.environ()})
    client = store.client()
    for name in USER_FILES:
        extra = {"ContentType": object_type(name), "CacheControl": CACHE_CONTROL}
        client.upload_file(str(folder / "site" / name), BUCKET, f"{PREFIX}/{name}", ExtraArgs=extra)


# Worker → R2


def fill_r2(folder: Path, site: Path) -> None:
    """Put the site into the local R2 that ``wrangler dev`` reads, as --publish and a user would.

    wrangler's R2 has no S3 interface for --publish to write to: every file of
    the site (no link, and not `_redirects`, which only Netlify and Pages read and
    --publish leaves out) with the headers --publish gives it, and a state object.
    """
    files = [path for path in site.rglob("*") if path.is_file() and not path.is_symlink()]
    names = [path.relative_to(site).as_posix() for path in files]
    objects = [bucket_object(site / name, name) for name in names if name != "_redirects"]
    (folder / "state.gz").write_bytes(b"the publisher's state, never served")
    objects.append(bucket_object(folder / "state.gz", STATE_NAME))
    (folder / "objects.json").write_text(json.dumps(objects), encoding="utf-8")
    objects_file = str(folder / "objects.json")
    run_ok(["node", str(FILL_R2), str(folder / "state"), BUCKET, objects_file], cwd=folder)


def start_worker(folder: Path) -> Host:
    """``wrangler dev`` running deploy/cloudflare-r2-worker over a local R2, offline."""
    site = build_project(folder)
    # deploy/cloudflare-r2-worker with its two documented edits: the bucket and the prefix.
    edits = {
        'bucket_name = "ratings"  # EDIT': f'bucket_name = "{BUCKET}"  # EDIT',
        'PREFIX = ""  # EDIT': f'PREFIX = "{PREFIX}"  # EDIT',
    }
    (folder / "worker.js").write_bytes((WORKER / "worker.js").read_bytes())
    config = folder / "wrangler.toml"
    config.write_text(edited(WORKER / "wrangler.toml", edits), encoding="utf-8")
    fill_r2(folder, site)
    port = free_port()
    command = [str(NODE_BIN / "wrangler"), "dev", "--config", str(config), "--local"]
    command += ["--persist-to", str(folder / "state"), "--ip", "127.0.0.1", "--port", str(port)]
    command += ["--inspector-port", str(free_port())]
    # Offline: no fetch of the Request.cf object from Cloudflare (a placeholder is used).
    environ = wrangler_environ(folder) | {"CLOUDFLARE_CF_FETCH_ENABLED": "false"}
    worker = started("Worker → R2", site, command, WRANGLER_READY, environ, port)
    worker.publish = lambda: fill_r2(folder, site)
    return worker


# nginx → S3

NGINX_EDGE_CONF: Final = REPO / "deploy" / "nginx-object-storage.conf"
# The cache's lifetime in deploy/nginx-object-storage.conf (proxy_cache_valid 1s),
# and how long a copy may really live: nginx's clock counts whole seconds.
NGINX_EDGE_CACHE_SECONDS: Final = 1.0
NGINX_EDGE_STALE_SECONDS: Final = 2.0


def start_edge_nginx(folder: Path, store_port: int) -> Host:
    """nginx with deploy/nginx-object-storage.conf and its documented edits for a store on
    ``store_port``, its files in ``folder``."""
    server = "    server 127.0.0.1:8333;  # EDIT: the store's host:port (port 443 for https)\n"
    root = "    set $ratings_edge_root /BUCKET/PREFIX;\n"
    edits = {
        server: f"    server 127.0.0.1:{store_port};\n",
        "proxy_cache_path /var/cache/nginx/ratings ": f"proxy_cache_path {folder / 'cache'} ",
        root: f"    set $ratings_edge_root /{BUCKET}/{PREFIX};\n",
    }
    return run_nginx("nginx → S3", folder, NGINX_EDGE_CONF, edits)


def nginx_edge(folder: Path) -> Host:
    """Debian's nginx with deploy/nginx-object-storage.conf in front of SeaweedFS, and the
    store (stopped with it)."""
    build_project(folder)
    store = start_store(folder / "store")
    try:
        store.create_bucket(BUCKET)
        publish_with_cli(folder, store)
        edge = start_edge_nginx(folder, store.ports["s3.port"])
    except BaseException:
        store.stop()
        raise

    def publish_again() -> None:
        publish_with_cli(folder, store)
        time.sleep(NGINX_EDGE_STALE_SECONDS + 0.1)  # until the cached copies expire

    edge.publish, edge.stop_also = publish_again, store.stop
    edge.reads, edge.store = functools.partial(store_reads, store), store.process
    edge.stale_seconds = NGINX_EDGE_STALE_SECONDS
    return edge


def store_reads(store: Store) -> int:
    """How many GET and HEAD requests the store has answered on BUCKET (its own count).

    SeaweedFS counts a request once its answer is sent: a count read the moment the
    answer arrives can miss it, so the count is read a moment later.
    """
    time.sleep(0.05)
    url = f"http://127.0.0.1:{store.ports['metricsPort']}/metrics"
    with urllib.request.urlopen(url, timeout=10) as answer:
        text = answer.read().decode()
    kind = rf'\{{bucket="{BUCKET}",code="\d+",type="(?:GET|HEAD)"\}}'
    found = re.findall(rf"^SeaweedFS_s3_request_total{kind} (\d+)$", text, re.MULTILINE)
    return sum(int(count) for count in found)


# CloudFront in front of the bucket, which cannot run here: its function runs in node on each
# request as CloudFront would pass it, and what it sends on reaches the bucket --publish fills,
# the site's folder (an object: a regular file reached by no link; any other key: 404.html,
# as template.yaml's CustomErrorResponses say). The table says "not run here" of the points that
# the headers of S3 and CloudFront, their ranges and conditions or CloudFront's own reading of
# the request decide.
CLOUDFRONT_FUNCTION: Final = REPO / "deploy" / "cloudfront" / "function.js"
CLOUDFRONT_RUNNER: Final = NODE_PROJECT / "cloudfront-run.cjs"
CLOUDFRONT_METHODS: Final = ("GET", "HEAD", "OPTIONS", "PUT", "PATCH", "POST", "DELETE")
# A URI that S3 reads as one key: unreserved characters, slashes and %XX escapes.
ONE_KEY: Final = re.compile(r"(?:[A-Za-z0-9._~!*'()/-]|%[0-9A-F]{2})*")
Event = dict[str, Any]


def viewer_request(uri: str, method: str = "GET", query: str = "") -> Event:
    """The event CloudFront passes the function for ``method`` on ``uri?query``."""
    querystring = {name: {"value": value} for name, value in urllib.parse.parse_qsl(query)}
    headers = {"host": {"value": "ratings.example.com"}}
    request = {"method": method, "uri": uri, "querystring": querystring, "headers": headers}
    context = {"distributionDomainName": "d111111abcdef8.cloudfront.net", "requestId": "4TyzHT"}
    context |= {"distributionId": "EDFDVBD6EXAMPLE", "eventType": "viewer-request"}
    viewer = {"ip": "198.51.100.11"}
    return {"version": "1.0", "context": context, "viewer": viewer, "request": request}


def viewer_response(uri: str, status: int, content_type: str) -> Event:
    """The event CloudFront passes the function with the bucket's answer to ``uri``."""
    event = viewer_request(uri)
    event["context"]["eventType"] = "viewer-response"
    event["response"] = {"statusCode": status, "headers": {"content-type": {"value": content_type}}}
    return event


class CloudFrontFunction:
    """deploy/cloudfront/function.js in node (tests/hosts-node/cloudfront-run.cjs), as
    CloudFront runs it: what it returns for each event."""

    def __init__(self, log: Path) -> None:
        command = ["node", str(CLOUDFRONT_RUNNER), str(CLOUDFRONT_FUNCTION)]
        with open(log, "wb") as errors:
            self.process = subprocess.Popen(
                command, stdin=PIPE, stdout=PIPE, stderr=errors, encoding="utf-8"
            )
        assert self.process.stdout is not None
        self.results, self.log = self.process.stdout, log

    def __call__(self, event: Event) -> Any:
        print(json.dumps(event), file=self.process.stdin, flush=True)
        line = self.results.readline()
        assert line, self.log.read_text()
        return json.loads(line)

    def close(self) -> None:
        stop(self.process)
        self.process.communicate()  # its pipes closed


def start_cloudfront(folder: Path) -> Host:
    """The function in front of the built site as its bucket."""
    site = build_project(folder)
    function = CloudFrontFunction(folder / "node.log")

    def answer(method: str, target: bytes, headers: Mapping[str, str]) -> Reply:
        uri, _, query = target.decode().partition("?")
        result = function(viewer_request(uri, method, query))
        if "statusCode" not in result:  # sent on to the bucket
            assert ONE_KEY.fullmatch(result["uri"]), result  # S3 would read `?`, `#` or `;`
            key = urllib.parse.unquote(result["uri"])[1:]
            # An object: a regular file reached by no link (its real path is its path).
            found = (site / key).is_file() and os.path.realpath(site / key) == str(site / key)
            key = key if found else "404.html"
            event = viewer_response(result["uri"], 200 if found else 404, object_type(key))
            result = function(event) | {"body": {"data": (site / key).read_text("utf-8")}}
        body = result.get("body", {}).get("data", "").encode()
        sent = [(name, value["value"]) for name, value in result["headers"].items()]
        # CloudFront says the body's length, and sends none after HEAD.
        sent.append(("Content-Length", str(len(body))))
        return Reply(result["statusCode"], sent, b"" if method == "HEAD" else body)

    cloudfront = Host("CloudFront", 0, site, BASE_URL, None, function.log, answer=answer)
    cloudfront.differences, cloudfront.methods = DIFFERENCES["CloudFront"], CLOUDFRONT_METHODS
    cloudfront.stop_also = function.close
    return cloudfront


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
