"""Measure serving: start-up, memory and the cost of a request, this checkout against another.

    python bench/serve.py [--compare CHECKOUT] [--sizes 10000,100000,1000000]
                          [--seconds 3] [--tmp /dev/shm]

For each size it builds a synthetic site (fixed seed) with this checkout in a
temporary folder under --tmp, then measures each checkout's ``create_app``
serving it (this one, and --compare's if given):

* start-up: the wall time of ``create_app`` in a fresh interpreter, imports
  done before; peak RSS (VmHWM) after --seconds of requests in that process;
  the median of ROUNDS processes, the checkouts taking turns;
* in-process: µs of CPU a request, the app called directly with a WSGI
  environ, one thread: the app's own cost, without a server's;
* HTTP: gunicorn, one sync worker pinned to CPU 0, asked by client processes
  pinned to the other CPUs; requests per second of wall time, and per CPU
  second of the worker (what one worker can serve). The checkouts take turns
  every SLICE seconds, so that other work on the machine blurs the comparison
  as little as it can.

Every request asks for an article chosen uniformly at random: with a million,
nearly every one is a file's first. Linux only (/proc, sched_setaffinity).
The temporary folder is removed at the end.
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
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Final

REPO: Final = Path(__file__).resolve().parent.parent
SEED: Final = 20260301
ROUNDS: Final = 3
SLICE: Final = 0.5  # seconds of requests before the other checkout's turn
WARM_UP: Final = 2_000  # requests before measuring, for both alike
CLIENTS: Final = 2  # client processes; one sync worker idles between requests with fewer
LISTENING: Final = re.compile(r"Listening at: http://127\.0\.0\.1:(\d+)")
TICKS: Final = os.sysconf("SC_CLK_TCK")


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


# In a fresh interpreter, with the checkout's package


def in_process(checkout: str, root: str, count: int, seconds: float) -> dict[str, float]:
    """Start-up, µs of CPU a request, and peak RSS, of the checkout's app (in a child)."""
    sys.path.insert(0, checkout)
    from ratings_api.server import create_app

    started = time.perf_counter()
    app = create_app(root)
    startup = time.perf_counter() - started
    rng = random.Random(SEED)
    for _ in range(WARM_UP):
        call(app, rating_path(count, rng))
    done, cpu, deadline = 0, time.process_time(), time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        for _ in range(500):
            call(app, rating_path(count, rng))
        done += 500
    per_request = (time.process_time() - cpu) / done * 1e6
    status = Path("/proc/self/status").read_text()  # VmHWM: ru_maxrss carries over exec
    rss = int(re.search(r"^VmHWM:\s+(\d+) kB", status, re.MULTILINE)[1]) / 1024  # type: ignore[index]
    return {"startup": startup, "us": per_request, "rss": rss}


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


def in_child(checkout: Path, root: Path, count: int, seconds: float) -> dict[str, float]:
    command = [
        sys.executable,
        __file__,
        "--child",
        str(checkout),
        str(root),
        str(count),
        str(seconds),
    ]
    done = subprocess.run(command, check=True, capture_output=True, text=True, cwd="/")
    return json.loads(done.stdout)  # type: ignore[no-any-return]


# Over HTTP


class Gunicorn:
    """One gunicorn serving a checkout's app with one worker pinned to CPU 0, until ``stop``."""

    def __init__(self, checkout: Path, root: Path, log: Path) -> None:
        command = [sys.executable, "-m", "gunicorn", "--workers", "1", "--bind", "127.0.0.1:0"]
        command += [
            "--no-control-socket",
            "--pythonpath",
            str(checkout),
            f"generate:create_app({str(root)!r})",
        ]
        self.log = log
        with open(log, "wb") as output:
            self.process = subprocess.Popen(
                command,
                stdout=output,
                stderr=subprocess.STDOUT,
                cwd="/",
                # Pinned before gunicorn forks its worker, which inherits it; this process
                # has no other threads at this point, so the fork-then-call is safe.
                preexec_fn=lambda: os.sched_setaffinity(0, {0}),  # noqa: PLW1509
            )
        deadline = time.monotonic() + 30
        while not (found := LISTENING.search(log.read_text(errors="replace"))):
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"gunicorn did not start:\n{log.read_text()}")
            time.sleep(0.05)
        self.port = int(found[1])
        while not get(self.port, "/").startswith(b"HTTP/1.1 "):  # its worker answers
            time.sleep(0.05)

    def worker_cpu_seconds(self) -> float:
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children").read_text()
        (worker,) = children.split()
        fields = Path(f"/proc/{worker}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / TICKS  # utime and stime

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)


def get(port: int, path: str) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=60) as connection:
        connection.sendall(
            f"GET {path} HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n".encode()
        )
        chunks = []
        while chunk := connection.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def client(
    port: int, count: int, seconds: float, seed: int, results: multiprocessing.Queue
) -> None:
    os.sched_setaffinity(0, set(range(1, os.cpu_count() or 1)) or {0})
    rng, done = random.Random(seed), 0
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        response = get(port, rating_path(count, rng))
        if not response.startswith(b"HTTP/1.1 200 "):
            raise RuntimeError(response[:200])
        done += 1
    results.put(done)


def http_slice(server: Gunicorn, count: int, seed: int) -> tuple[int, float, float]:
    """Requests answered in SLICE seconds to CLIENTS processes, wall and worker CPU seconds."""
    results: multiprocessing.Queue = multiprocessing.Queue()
    clients = [
        multiprocessing.Process(target=client, args=(server.port, count, SLICE, seed + n, results))
        for n in range(CLIENTS)
    ]
    cpu, started = server.worker_cpu_seconds(), time.perf_counter()
    for process in clients:
        process.start()
    total = sum(results.get() for _ in clients)
    for process in clients:
        process.join()
    return total, time.perf_counter() - started, server.worker_cpu_seconds() - cpu


def over_http(
    checkouts: dict[str, Path], root: Path, count: int, seconds: float
) -> dict[str, dict[str, float]]:
    servers = {
        name: Gunicorn(path, root, root.parent / f"gunicorn-{index}.log")
        for index, (name, path) in enumerate(checkouts.items())
    }
    sums = {name: [0.0, 0.0, 0.0] for name in checkouts}
    try:
        for number in range(max(1, round(ROUNDS * seconds / SLICE))):
            for name, server in servers.items():
                for index, value in enumerate(http_slice(server, count, SEED + 10 * number)):
                    sums[name][index] += value
    finally:
        for server in servers.values():
            server.stop()
    return {
        name: {"http": done / wall, "http_cpu": done / cpu}
        for name, (done, wall, cpu) in sums.items()
    }


def measure(
    checkouts: dict[str, Path], count: int, seconds: float, tmp: str
) -> dict[str, dict[str, float]]:
    folder = Path(tempfile.mkdtemp(prefix="ratings-bench-serve-", dir=tmp))
    try:
        started = time.perf_counter()
        root = make_site(folder, count)
        print(
            f"  built {count:,} articles in {time.perf_counter() - started:.1f} s", file=sys.stderr
        )
        runs: dict[str, list[dict[str, float]]] = {name: [] for name in checkouts}
        for _ in range(ROUNDS):
            for name, checkout in checkouts.items():
                runs[name].append(in_child(checkout, root, count, seconds))
        results = {
            name: {key: statistics.median(run[key] for run in named) for key in named[0]}
            for name, named in runs.items()
        }
        for name, figures in over_http(checkouts, root, count, seconds).items():
            results[name].update(figures)
        return results
    finally:
        shutil.rmtree(folder)


def rows(count: int, results: dict[str, dict[str, float]]) -> str:
    lines = [
        f"| {count:,} | {name} | {r['startup'] * 1000:.2f} ms | {r['rss']:.0f} MB | {r['us']:.0f} µs "
        f"| {r['http']:,.0f} | {r['http_cpu']:,.0f} |"
        for name, r in results.items()
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--compare", type=Path, help="another checkout, such as main's")
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--seconds", type=float, default=3.0, help="per measurement")
    parser.add_argument("--tmp", default="/dev/shm", help="where the sites are built")
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        checkout, root, count, seconds = args.child
        print(json.dumps(in_process(checkout, root, int(count), float(seconds))))
        return 0
    checkouts = {"this checkout": REPO} | (
        {f"{args.compare}": args.compare} if args.compare else {}
    )
    print(
        f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, sites in {args.tmp}, load {os.getloadavg()}"
    )
    print(
        "| articles | checkout | start-up | peak RSS | in-process CPU a request | HTTP req/s | HTTP req per worker CPU s |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|", flush=True)
    for count in (int(size) for size in args.sizes.split(",")):
        print(f"{count:,} articles:", file=sys.stderr)
        print(rows(count, measure(checkouts, count, args.seconds, args.tmp)), flush=True)
    print(f"load after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
