"""The edges of deploy/ that make a published bucket the API, as hosts of the contract suite:
nginx in front of SeaweedFS, and the R2 Worker under ``wrangler dev``.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Final

from ratings_api.bucket_state import STATE_NAME
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
    run_ok,
)
from tests.objectstore import Store, start_store

# tests/hosts.py imports this module to list its hosts: its helpers are
# imported where they are used, so that either module may be imported first.
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
    from tests.hosts import BASE_URL

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
    from tests.hosts import edited

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


def start_worker(folder: Path, ratings: str = RATINGS) -> Host:
    """``wrangler dev`` running deploy/cloudflare-r2-worker over a local R2, offline."""
    from tests import hosts

    hosts.install_host_tools()
    site = hosts.build_project(folder, ratings)
    config = worker_config(folder)
    fill_r2(folder, site)
    port = hosts.free_port()
    command = [str(hosts.NODE_BIN / "wrangler"), "dev", "--config", str(config), "--local"]
    command += ["--persist-to", str(folder / "state"), "--ip", "127.0.0.1", "--port", str(port)]
    command += ["--inspector-port", str(hosts.free_port())]
    # Offline: no fetch of the Request.cf object from Cloudflare (a placeholder is used).
    environ = hosts.wrangler_environ(folder) | {"CLOUDFLARE_CF_FETCH_ENABLED": "false"}
    ready = hosts.started(command, folder, hosts.WRANGLER_READY, environ, port)
    worker = hosts.host("Worker → R2", site, ready)
    worker.publish = lambda: fill_r2(folder, site)
    return worker


# nginx → S3

NGINX_EDGE_CONF: Final = REPO / "deploy" / "nginx-object-storage.conf"
# The cache's lifetime in deploy/nginx-object-storage.conf (proxy_cache_valid 1s),
# and how long a copy may really live: nginx's clock counts whole seconds.
NGINX_EDGE_CACHE_SECONDS: Final = 1.0
NGINX_EDGE_STALE_SECONDS: Final = 2.0


def nginx_edge_conf(port: int, store_port: int, folder: Path) -> str:
    """deploy/nginx-object-storage.conf with its documented edits for a store on ``store_port``."""
    from tests.hosts import edited

    server = "    server 127.0.0.1:8333;  # EDIT: the store's host:port (port 443 for https)\n"
    listen = "    listen 80;  # EDIT: the port (and address) to listen on\n"
    root = "    set $ratings_edge_root /BUCKET/PREFIX;\n"
    edits = {
        server: f"    server 127.0.0.1:{store_port};\n",
        "proxy_cache_path /var/cache/nginx/ratings ": f"proxy_cache_path {folder / 'cache'} ",
        listen: f"    listen 127.0.0.1:{port};\n",
        root: f"    set $ratings_edge_root /{BUCKET}/{PREFIX};\n",
    }
    return edited(NGINX_EDGE_CONF, edits)


def start_edge_nginx(folder: Path, store_port: int) -> tuple[subprocess.Popen[bytes], int, Path]:
    """nginx with deploy/nginx-object-storage.conf, its files in ``folder``: process, port, log."""
    from tests.hosts import free_port, run_nginx

    port = free_port()
    return run_nginx(folder, port, nginx_edge_conf(port, store_port, folder))


def nginx_edge(folder: Path, ratings: str = RATINGS) -> tuple[Host, Store]:
    """Debian's nginx with deploy/nginx-object-storage.conf in front of SeaweedFS, and the
    store (stopped with it)."""
    from tests.hosts import build_project, host, install_host_tools

    install_host_tools()
    site = build_project(folder, ratings)
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
    return edge, store


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


EDGES: Final[dict[str, Callable[..., Host]]] = {
    "nginx → S3": lambda folder, ratings=RATINGS: nginx_edge(folder, ratings)[0],
    "Worker → R2": start_worker,
}

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
