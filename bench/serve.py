"""Measure serving: start-up time, memory and throughput, stock WhiteNoise against ours.

    python bench/serve.py [--sizes 10000,100000,1000000] [--seconds 3] [--tmp /dev/shm]

For each size it builds a synthetic site (fixed seed) with the generator in a
temporary folder under --tmp, then measures two apps serving it:

* ``WhiteNoise, indexed``: stock WhiteNoise given the root, which walks the
  whole tree and keeps a responder for every file before the first request;
* ``create_app``: ours, which looks each file up on its first request.

Start-up is the wall time to create the app in a fresh process, imports done
before. Peak RSS is that process's high-water mark (VmHWM) after start-up and
the in-process requests: WhiteNoise's walk and our cache are both in it.
Both are the median of ROUNDS processes, the two apps taking turns.

Every request asks for an article chosen uniformly at random, the worst case
for our bounded cache (10,000 files): with more articles than that, most
requests are a file's first. Throughput is measured after WARM_UP requests,
counted per CPU second of the process that serves, and the two apps take
turns every SLICE seconds, so that other work on the machine does not blur
the comparison:

* HTTP: gunicorn, one sync worker pinned to CPU 0 for each app, asked by
  client processes pinned to the other CPUs; requests per CPU second of the
  worker (what one worker can serve), and requests per second of wall time;
* in-process: both apps in one process, called directly with a WSGI
  environ, one thread: the app's own cost, without a server's.

Linux only (/proc, sched_setaffinity). The temporary folder is removed at
the end.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Final

REPO: Final = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # a script in bench/: the package is one folder up

from whitenoise import WhiteNoise  # noqa: E402

from ratings_api.build import build  # noqa: E402
from ratings_api.server import api_fallback, create_app  # noqa: E402
from tests.contract import process_tree  # noqa: E402

SEED: Final = 20260301
BASE_URL: Final = "https://ratings.example.com"
KINDS: Final = ("whitenoise", "create_app")
LABELS: Final = {"whitenoise": "WhiteNoise, indexed", "create_app": "create_app (lazy)"}
ROUNDS: Final = 3
SLICE: Final = 0.5  # seconds of requests before the other app's turn
# Requests before measuring, for both apps alike: enough to fill our cache
# (10,000 entries) at every size, and to ask for 95% of 10,000 articles.
WARM_UP: Final = 30_000
CLIENTS: Final = 2  # client processes; one sync worker idles between requests with fewer
READY_TIMEOUT: Final = 900.0  # stock WhiteNoise walks a million files before its first answer
LISTENING: Final = re.compile(r"Listening at: http://127\.0\.0\.1:(\d+)")
TICKS: Final = os.sysconf("SC_CLK_TCK")


def indexed_whitenoise(root: str) -> WhiteNoise:
    """Stock WhiteNoise configured for the site: every file indexed at start-up."""
    return WhiteNoise(api_fallback, root=root, index_file="index.json", max_age=0)


FACTORIES: Final[dict[str, Callable[[str], object]]] = {
    "whitenoise": indexed_whitenoise,
    "create_app": create_app,
}


def bench_app(kind: str, root: str) -> object:
    """The app of one kind, for gunicorn: ``serve:bench_app('create_app', '/dev/shm/...')``."""
    return FACTORIES[kind](root)


def article_id(index: int) -> int:
    """The id of the index-th article: odd numbers, so ids have gaps, and no list to keep."""
    return 2 * index + 1


def rating_path(count: int, rng: random.Random) -> str:
    return f"/away/api/articles/{article_id(rng.randrange(count))}/rating/"


def make_site(folder: Path, count: int) -> Path:
    """Write a ratings file of ``count`` articles in ``folder`` and build its site."""
    rng = random.Random(SEED)
    lines = ["scale: [1, 5]", "articles:"]
    for index in range(count):
        ratings = rng.randint(0, 500)
        total = rng.randint(ratings, 5 * ratings)
        lines.append(f"  {article_id(index)}: {{sum: {total}, count: {ratings}}}")
    source = folder / "ratings.yaml"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    site = folder / "site"
    build(str(source), str(site), base_url=BASE_URL, environ={})
    return site


# In a fresh process


def peak_rss_mb(pid: int | str = "self") -> float:
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss over exec, from the parent.
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"^VmHWM:\s+(\d+) kB", status, re.MULTILINE)[1]) / 1024


def measure_start(kind: str, root: str, count: int, seconds: float) -> dict[str, float]:
    """Start-up and peak RSS of one app, after ``seconds`` of requests."""
    started = time.perf_counter()
    app = FACTORIES[kind](root)
    startup = time.perf_counter() - started
    rng = random.Random(SEED)
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        for _ in range(1000):
            _call(app, rating_path(count, rng))
    return {"startup": startup, "rss": peak_rss_mb()}


def measure_calls(root: str, count: int, seconds: float) -> dict[str, dict[str, float]]:
    """Requests per CPU second of each app, called directly, the apps taking turns."""
    apps = {kind: FACTORIES[kind](root) for kind in KINDS}
    rngs = {kind: random.Random(SEED) for kind in KINDS}  # the same requests for both
    for kind, app in apps.items():
        for _ in range(WARM_UP):
            _call(app, rating_path(count, rngs[kind]))
    done = dict.fromkeys(KINDS, 0)
    cpu = dict.fromkeys(KINDS, 0.0)
    for _ in range(max(1, round(seconds / SLICE))):
        for kind, app in apps.items():
            started, deadline = time.process_time(), time.perf_counter() + SLICE
            while time.perf_counter() < deadline:
                for _ in range(500):
                    _call(app, rating_path(count, rngs[kind]))
                done[kind] += 500
            cpu[kind] += time.process_time() - started
    return {kind: {"in_process": done[kind] / cpu[kind]} for kind in KINDS}


def _call(app: Callable, path: str) -> None:
    statuses = []
    body = app(
        {"REQUEST_METHOD": "GET", "PATH_INFO": path, "QUERY_STRING": ""},
        lambda status, headers, exc_info=None: statuses.append(status),
    )
    try:
        for _ in body:
            pass
    finally:
        if hasattr(body, "close"):
            body.close()
    if statuses != ["200 OK"]:
        raise RuntimeError(f"{path}: {statuses}")


def in_child(*arguments: object) -> dict:
    """What ``--child ARGUMENTS`` prints, run in a fresh interpreter: memory starts from nothing."""
    command = [sys.executable, __file__, "--child", *map(str, arguments)]
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    return json.loads(done.stdout)


def measure_in_children(root: str, count: int, seconds: float) -> dict[str, dict[str, float]]:
    """Start-up and memory (the median of ROUNDS processes each), then the call rates."""
    runs: dict[str, list[dict[str, float]]] = {kind: [] for kind in KINDS}
    for _ in range(ROUNDS):
        for kind in KINDS:
            runs[kind].append(in_child("start", kind, root, count, seconds))
    results = {kind: medians(kind_runs) for kind, kind_runs in runs.items()}
    for kind, figures in in_child("calls", "-", root, count, ROUNDS * seconds).items():
        results[kind].update(figures)
    return results


def medians(runs: Iterable[dict[str, float]]) -> dict[str, float]:
    runs = list(runs)
    return {name: statistics.median(run[name] for run in runs) for name in runs[0]}


# Over HTTP


class Gunicorn:
    """One gunicorn serving one app with one worker pinned to CPU 0, until ``stop``."""

    def __init__(self, kind: str, root: str, log: Path) -> None:
        self.log = log
        with open(log, "wb") as output:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "gunicorn",
                    "--workers",
                    "1",
                    "--bind",
                    "127.0.0.1:0",
                    "--timeout",
                    str(int(READY_TIMEOUT)),
                    "--no-control-socket",
                    "--pythonpath",
                    str(Path(__file__).parent),
                    f"serve:bench_app({kind!r}, {root!r})",
                ],
                stdout=output,
                stderr=subprocess.STDOUT,
                # Pinned before gunicorn forks its workers, which inherit it; this process
                # has no other threads at this point, so the fork-then-call is safe.
                preexec_fn=lambda: os.sched_setaffinity(0, {0}),  # noqa: PLW1509
            )
        self.port = self._port()

    def _port(self) -> int:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            found = LISTENING.search(self.log.read_text(errors="replace"))
            if found:
                return int(found[1])
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"gunicorn did not start:\n{self.log.read_text()}")

    def wait_ready(self, path: str) -> None:
        deadline = time.monotonic() + READY_TIMEOUT
        while time.monotonic() < deadline:
            try:
                if _get(self.port, path).startswith(b"HTTP/1.1 200 "):
                    return
            except OSError:
                time.sleep(0.2)
        raise RuntimeError(f"gunicorn never answered {path}")

    def worker_cpu_seconds(self) -> float:
        (worker,) = process_tree(self.process.pid) - {self.process.pid}
        fields = Path(f"/proc/{worker}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / TICKS  # utime and stime

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _get(port: int, path: str) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=READY_TIMEOUT) as connection:
        connection.sendall(
            f"GET {path} HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n".encode()
        )
        chunks = []
        while chunk := connection.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def _client(
    port: int, count: int, seconds: float, seed: int, results: multiprocessing.Queue
) -> None:
    os.sched_setaffinity(0, set(range(1, os.cpu_count() or 1)) or {0})
    rng = random.Random(seed)
    done = 0
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        response = _get(port, rating_path(count, rng))
        if not response.startswith(b"HTTP/1.1 200 "):
            raise RuntimeError(response[:200])
        done += 1
    results.put(done)


def warm_up(port: int, count: int) -> None:
    """WARM_UP requests, from as many processes as CPUs, to fill the caches of one server."""
    with multiprocessing.Pool(os.cpu_count()) as pool:
        pool.starmap(
            _warm_up,
            [
                (port, count, WARM_UP // (os.cpu_count() or 1), n)
                for n in range(os.cpu_count() or 1)
            ],
        )


def _warm_up(port: int, count: int, requests: int, seed: int) -> None:
    rng = random.Random(SEED + seed)
    for _ in range(requests):
        _get(port, rating_path(count, rng))


def http_slice(server: Gunicorn, count: int, seed: int) -> tuple[int, float, float]:
    """Requests answered in SLICE seconds to CLIENTS processes, wall and worker CPU seconds."""
    results: multiprocessing.Queue = multiprocessing.Queue()
    clients = [
        multiprocessing.Process(target=_client, args=(server.port, count, SLICE, seed + n, results))
        for n in range(CLIENTS)
    ]
    cpu, started = server.worker_cpu_seconds(), time.perf_counter()
    for client in clients:
        client.start()
    total = sum(results.get() for _ in clients)
    for client in clients:
        client.join()
        if client.exitcode:
            raise RuntimeError("a client failed")
    return total, time.perf_counter() - started, server.worker_cpu_seconds() - cpu


def measure_http(root: str, count: int, seconds: float, logs: Path) -> dict[str, dict[str, float]]:
    """Requests per second and per worker CPU second of each app, the apps taking turns."""
    servers = {kind: Gunicorn(kind, root, logs / f"gunicorn-{kind}.log") for kind in KINDS}
    sums = {kind: [0, 0.0, 0.0] for kind in KINDS}
    try:
        for server in servers.values():
            server.wait_ready(f"/away/api/articles/{article_id(0)}/rating/")
            warm_up(server.port, count)
        for number in range(max(1, round(ROUNDS * seconds / SLICE))):
            for kind, server in servers.items():
                for index, value in enumerate(http_slice(server, count, SEED + 10 * number)):
                    sums[kind][index] += value
    finally:
        for server in servers.values():
            server.stop()
    return {
        kind: {"http": done / wall, "http_cpu": done / cpu}
        for kind, (done, wall, cpu) in sums.items()
    }


def measure(count: int, seconds: float, tmp: str) -> dict[str, dict[str, float]]:
    folder = Path(tempfile.mkdtemp(prefix="ratings-bench-", dir=tmp))
    try:
        started = time.perf_counter()
        site = str(make_site(folder, count))
        print(
            f"  built {count:,} articles in {time.perf_counter() - started:.1f} s", file=sys.stderr
        )
        results = measure_in_children(site, count, seconds)
        for kind, figures in measure_http(site, count, seconds, folder).items():
            results[kind].update(figures)
        return results
    finally:
        shutil.rmtree(folder)


HEADER: Final = (
    "| articles | app | start-up | peak RSS | HTTP req/s | HTTP req per worker CPU s "
    "| in-process req per CPU s |\n"
    "|---:|---|---:|---:|---:|---:|---:|"
)


def rows(count: int, by_kind: dict[str, dict[str, float]]) -> str:
    """The table's rows for one size: each app, then ours divided by stock WhiteNoise."""
    lines = []
    for kind in KINDS:
        r = by_kind[kind]
        lines.append(
            f"| {count:,} | {LABELS[kind]} | {r['startup']:.3f} s | {r['rss']:.0f} MB "
            f"| {r['http']:,.0f} | {r['http_cpu']:,.0f} | {r['in_process']:,.0f} |"
        )
    ours, base = by_kind["create_app"], by_kind["whitenoise"]
    ratios = [ours[name] / base[name] for name in ("rss", "http", "http_cpu", "in_process")]
    lines.append(
        f"| {count:,} | ratio | {ours['startup'] / base['startup']:.5f} | "
        + " | ".join(f"{ratio:.2f}" for ratio in ratios)
        + " |"
    )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--seconds", type=float, default=3.0, help="per measurement")
    parser.add_argument("--tmp", default="/dev/shm", help="where the sites are built")
    parser.add_argument(
        "--child",
        nargs=5,
        help=argparse.SUPPRESS,
        metavar=("WHAT", "KIND", "ROOT", "COUNT", "SECONDS"),
    )
    args = parser.parse_args(argv)
    if args.child:
        what, kind, root, count, seconds = args.child
        if what == "start":
            figures = measure_start(kind, root, int(count), float(seconds))
        else:
            figures = measure_calls(root, int(count), float(seconds))
        print(json.dumps(figures))
        return 0
    print(f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, sites in {args.tmp}")
    print(HEADER, flush=True)
    for count in (int(size) for size in args.sizes.split(",")):
        print(f"{count:,} articles:", file=sys.stderr)
        print(rows(count, measure(count, args.seconds, args.tmp)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
