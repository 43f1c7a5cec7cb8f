"""Measure serving: ``create_app`` against stock WhiteNoise, side by side in one run.

    python bench/serve.py [--sizes 10000,100000,1000000] [--stock-up-to 100000]
                          [--seconds 3] [--tmp /dev/shm]

For each size it builds a synthetic site (fixed seed) in a temporary folder
under --tmp (/dev/shm is a tmpfs; give a folder on a disk to measure one), then
measures, in fresh interpreters taking turns (ROUNDS each, the median kept):

* ``create_app(site)``, this checkout's app;
* stock WhiteNoise indexing the same site, as its docs set it up
  (``WhiteNoise(app, root=site, index_file="index.json")``, the wrapped app a
  404), up to --stock-up-to articles: it walks every file before it starts.

Each process reports its start-up (the wall time to create the app, imports
done before); the µs of CPU a rating request costs (the app called directly
with a WSGI environ and its body read to the end, one thread: the app's own
cost, without a server's), first for each article once in a scattered order
(a file's first request), then for --seconds of articles chosen uniformly at
random; and its peak RSS (VmHWM) after those requests, the interpreter's and WhiteNoise's
own included.
Linux only (/proc). The temporary folder is removed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

REPO: Final = Path(__file__).resolve().parent.parent
SEED: Final = 20260301
ROUNDS: Final = 3
APPS: Final = ("create_app", "stock WhiteNoise")
STRIDE: Final = 7_919  # a prime: coprime with every size but its multiples, so a permutation


def article_id(index: int) -> int:
    """The id of the index-th article: odd numbers, so ids have gaps, and no list to keep."""
    return 2 * index + 1


def rating_path(count: int, rng: random.Random) -> str:
    return f"/away/api/articles/{article_id(rng.randrange(count))}/rating/"


def make_site(folder: Path, count: int) -> Path:
    """Write a ratings file of ``count`` articles in ``folder`` and build its site."""
    sys.path.insert(0, str(REPO))
    from ratings_api.build import build

    rng = random.Random(SEED)
    lines = ["scale: [1, 5]", "articles:"]
    for index in range(count):
        ratings = rng.randint(0, 500)
        lines.append(
            f"  {article_id(index)}: {{sum: {rng.randint(ratings, 5 * ratings)}, count: {ratings}}}"
        )
    source = folder / "ratings.yaml"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    build(str(source), str(folder / "site"), base_url="https://ratings.example.com", environ={})
    return folder / "site"


# In a fresh interpreter


def not_found(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
    start_response("404 Not Found", [("Content-Length", "0")])
    return []


def in_process(name: str, root: str, count: int, seconds: float) -> dict[str, float]:
    """Start-up, µs of CPU a request, and peak RSS, of one app (in a child)."""
    sys.path.insert(0, str(REPO))
    from whitenoise import WhiteNoise

    from ratings_api.server import create_app

    started = time.perf_counter()
    if name == "create_app":
        app = create_app(root)
    else:
        app = WhiteNoise(not_found, root=root, index_file="index.json")
    startup = time.perf_counter() - started
    rng = random.Random(SEED)
    cpu = time.process_time()
    # Each file's first request (the app reads it, stock finds it indexed), in an order
    # that scatters them as a shuffle would, with no list that would weigh in the RSS.
    for step in range(count):
        call(app, f"/away/api/articles/{article_id(step * STRIDE % count)}/rating/")
    first_us = (time.process_time() - cpu) / count * 1e6
    done, cpu, deadline = 0, time.process_time(), time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        for _ in range(500):
            call(app, rating_path(count, rng))
        done += 500
    per_request = (time.process_time() - cpu) / done * 1e6
    status = Path("/proc/self/status").read_text()  # VmHWM: ru_maxrss carries over exec
    rss = int(re.search(r"^VmHWM:\s+(\d+) kB", status, re.MULTILINE)[1]) / 1024  # type: ignore[index]
    return {"startup": startup, "first": first_us, "us": per_request, "rss": rss}


def call(app: Callable[..., Any], path: str) -> None:
    statuses = []
    environ = {
        "REQUEST_METHOD": "GET",
        "PATH_INFO": path,
        "QUERY_STRING": "",
        "wsgi.errors": sys.stderr,
    }
    body = app(environ, lambda status, headers, exc_info=None: statuses.append(status))
    for _ in body:
        pass
    getattr(body, "close", lambda: None)()
    if statuses != ["200 OK"]:
        raise RuntimeError(f"{path}: {statuses}")


def in_child(name: str, root: Path, count: int, seconds: float) -> dict[str, float]:
    command = [sys.executable, __file__, "--child", name, str(root), str(count), str(seconds)]
    done = subprocess.run(command, check=True, capture_output=True, text=True, cwd="/")
    return json.loads(done.stdout)  # type: ignore[no-any-return]


def measure(count: int, names: Sequence[str], seconds: float, tmp: str) -> dict[str, dict]:
    folder = Path(tempfile.mkdtemp(prefix="ratings-bench-serve-", dir=tmp))
    try:
        started = time.perf_counter()
        root = make_site(folder, count)
        took = time.perf_counter() - started
        print(f"  built {count:,} articles in {took:.1f} s", file=sys.stderr)
        runs: dict[str, list[dict[str, float]]] = {name: [] for name in names}
        for _ in range(ROUNDS):
            for name in names:
                runs[name].append(in_child(name, root, count, seconds))
        return {
            name: {key: statistics.median(run[key] for run in named) for key in named[0]}
            for name, named in runs.items()
        }
    finally:
        shutil.rmtree(folder)


def rows(count: int, results: dict[str, dict[str, float]]) -> str:
    lines = [
        f"| {count:,} | {name} | {r['startup'] * 1000:,.1f} ms | {r['rss']:.0f} MB "
        f"| {r['first']:.1f} µs | {r['us']:.1f} µs |"
        for name, r in results.items()
    ]
    if len(results) == 2:
        app, stock = results.values()
        lines.append(
            f"| {count:,} | ratio | {app['startup'] / stock['startup']:.5f} "
            f"| {app['rss'] / stock['rss']:.2f} | {app['first'] / stock['first']:.2f} "
            f"| {app['us'] / stock['us']:.2f} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--stock-up-to", type=int, default=100_000, help="articles")
    parser.add_argument("--seconds", type=float, default=3.0, help="per measurement")
    parser.add_argument("--tmp", default="/dev/shm", help="where the sites are built")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        name, root, count, seconds = args.child
        print(json.dumps(in_process(name, root, int(count), float(seconds))))
        return 0
    kind = subprocess.run(
        ["stat", "-f", "-c", "%T", args.tmp], capture_output=True, text=True, check=True
    )
    print(f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, sites in {args.tmp} ", end="")
    print(
        f"({kind.stdout.strip()}), load {' '.join(Path('/proc/loadavg').read_text().split()[:3])}"
    )
    print("| articles | app | start-up | peak RSS | CPU a request: first | then |")
    print("|---:|---|---:|---:|---:|---:|", flush=True)
    sizes = [int(size) for size in args.sizes.split(",")]
    if any(count % STRIDE == 0 for count in sizes):
        parser.error(f"--sizes: a multiple of {STRIDE} would not ask every article once")
    for count in sizes:
        print(f"{count:,} articles:", file=sys.stderr)
        names = APPS if count <= args.stock_up_to else APPS[:1]
        print(rows(count, measure(count, names, args.seconds, args.tmp)), flush=True)
    print(f"load after: {' '.join(Path('/proc/loadavg').read_text().split()[:3])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
