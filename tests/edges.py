"""The edges in front of a published bucket, as hosts of the HTTP contract suite.

A bucket filled by ``generate.py --publish s3://BUCKET[/PREFIX]`` is not the
API by itself; the edges in deploy/ make it one. Two run here, on 127.0.0.1,
offline:

- ``nginx → S3``: Debian's nginx with deploy/nginx-object-storage.conf, a
  caching reverse proxy in front of SeaweedFS (tests/objectstore.py);
- ``Worker → R2``: deploy/cloudflare-r2-worker under ``wrangler dev``, over
  wrangler's local R2 simulation.

The third, CloudFront, cannot run here: its function is tested in node
(tests/test_cloudfront.py).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Final

from tests.contract import CACHE_CONTROL, FOUND, RATINGS, REPO, Difference, Host
from tests.hosts import (
    BASE_URL,
    NODE_BIN,
    NODE_PROJECT,
    WRANGLER_READY,
    build_project,
    free_port,
    install_host_tools,
    started,
)

WORKER: Final = REPO / "deploy" / "cloudflare-r2-worker"
FILL_R2: Final = NODE_PROJECT / "fill-r2.mjs"
BUCKET: Final = "ratings"
PREFIX: Final = "live"  # a prefix, so that the edges are shown to honour one

# Until --publish exists: the types it sets, by the file's suffix.
CONTENT_TYPES: Final = {
    ".json": "application/json",
    ".html": 'text/html; charset="utf-8"',
    ".txt": 'text/plain; charset="utf-8"',
    ".css": 'text/css; charset="utf-8"',
    ".js": 'text/javascript; charset="utf-8"',
    ".svg": "image/svg+xml",
}


def published_objects(site: Path, prefix: str) -> list[dict[str, str]]:
    """The objects --publish writes for ``site``: key, file, Content-Type, Cache-Control."""
    objects = []
    for path in sorted(site.rglob("*")):
        if path.is_file():
            relative = path.relative_to(site).as_posix()
            objects.append(
                {
                    "key": f"{prefix}/{relative}" if prefix else relative,
                    "file": str(path),
                    "contentType": CONTENT_TYPES.get(path.suffix, "application/octet-stream"),
                    "cacheControl": CACHE_CONTROL,
                }
            )
    return objects


# Worker → R2

WORKER_ENVIRON: Final = {
    "WRANGLER_SEND_METRICS": "false",
    "CI": "1",
    # Offline: no fetch of the Request.cf object from Cloudflare (a placeholder is used).
    "CLOUDFLARE_CF_FETCH_ENABLED": "false",
}


def worker_environ(folder: Path) -> dict[str, str]:
    # Its logs and caches stay in the test's folder.
    return {**WORKER_ENVIRON, "XDG_CONFIG_HOME": str(folder / ".config"), "HOME": str(folder)}


def worker_config(folder: Path) -> Path:
    """deploy/cloudflare-r2-worker with its two documented edits: the bucket and the prefix."""
    text = (WORKER / "wrangler.toml").read_text(encoding="utf-8")
    for line, replacement in (
        ('bucket_name = "ratings"  # EDIT', f'bucket_name = "{BUCKET}"  # EDIT'),
        ('PREFIX = ""  # EDIT', f'PREFIX = "{PREFIX}"  # EDIT'),
    ):
        assert text.count(line) == 1, f"{WORKER}/wrangler.toml: no single {line!r}"
        text = text.replace(line, replacement)
    (folder / "worker.js").write_bytes((WORKER / "worker.js").read_bytes())
    config = folder / "wrangler.toml"
    config.write_text(text, encoding="utf-8")
    return config


def fill_r2(folder: Path, site: Path) -> None:
    """Put the published objects into the local R2 that ``wrangler dev`` reads."""
    manifest = folder / "objects.json"
    manifest.write_text(json.dumps(published_objects(site, PREFIX)), encoding="utf-8")
    done = subprocess.run(
        ["node", str(FILL_R2), str(folder / "state"), BUCKET, str(manifest)],
        cwd=folder,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, f"{FILL_R2}: {done.returncode}\n{done.stdout}{done.stderr}"


def start_worker(folder: Path, ratings: str = RATINGS) -> Host:
    """``wrangler dev`` running deploy/cloudflare-r2-worker over a local R2, offline."""
    install_host_tools()
    site = build_project(folder, ratings)
    config = worker_config(folder)
    fill_r2(folder, site)
    port = free_port()
    command = [
        str(NODE_BIN / "wrangler"),
        "dev",
        "--config",
        str(config),
        "--local",
        "--persist-to",
        str(folder / "state"),
        "--ip",
        "127.0.0.1",
        "--port",
        str(port),
        "--inspector-port",
        str(free_port()),
    ]
    log = folder / "wrangler.log"
    process, _ = started(command, folder, log, WRANGLER_READY, worker_environ(folder), port)
    return Host(
        "Worker → R2",
        port,
        site,
        BASE_URL,
        process,
        log,
        DIFFERENCES["Worker → R2"],
        publish=lambda: fill_r2(folder, site),
    )


EDGES: Final[dict[str, Callable[..., Host]]] = {
    "Worker → R2": start_worker,
}

# What each edge answers where it differs from the app, as measured, and why.
DIFFERENCES: Final[dict[str, dict[str, Difference]]] = {
    "Worker → R2": {
        "`ETag`": Difference(
            '`"<32 hex digits>"` (of the content)',
            "R2's own ETag, the MD5 of the object: it changes with the content",
        ),
        "dot segments inside the root (`api/./articles`, `rating/.`)": Difference(
            FOUND,
            "workerd resolves `.` segments (WHATWG URL parsing) before the Worker sees the "
            "URL: the document, inside the root",
        ),
        "an absolute-form target (`http://127.0.0.1/../secret.txt`)": Difference(
            500,
            "workerd fails to parse the target (kj/compat/url.c++: invalid URL), as under "
            "`wrangler pages dev`",
        ),
        "a NUL byte in the request line": Difference(400, "workerd refuses it"),
    },
}
