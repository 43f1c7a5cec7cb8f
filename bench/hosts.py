"""Measure the hosts of the contract suite on one site: requests per second.

    python bench/hosts.py [--sizes 1000,19990] [--seconds 3] [--rounds 5] [--tmp /dev/shm]
                          [--hosts nginx,"nginx → S3",...] [--patterns random,hot]

For each size, a synthetic catalogue (fixed seed) is served at once by every
host of tests/hosts.py, started by the contract suite's own functions with
the configuration this repository ships: the WhiteNoise app under
``generate.py --serve`` and gunicorn, nginx, ``netlify dev``, ``wrangler
pages dev``, and the edges in front of a published bucket (tests/hosts.py):
nginx with its cache in front of SeaweedFS, and the Worker over wrangler's
local R2. Each host's processes (and the store behind the nginx edge) are
pinned to CPU 0 and the load generator, wrk (Debian's, installed if missing,
as root), to CPU 1; wrk keeps 8 connections open and asks, by pattern, for
articles chosen uniformly at random (``random``) or for one article only
(``hot``). The hosts take turns, one slice of --seconds each, for --rounds
rounds, so that other work on the machine blurs the comparison as little as
it can; each figure is the median of its slices, and its ratio is to nginx's
for the same pattern in the same run.

For the nginx edge, the store's own count of the reads it answered (its
metrics) gives the share of requests that reached it: the cache's state. A
hot article is a warm cache (about none); random articles over a catalogue
much larger than one second of requests are a cold one (about all), since
the edge keeps a copy for 1 s.

Before the timing, 200 random articles are fetched from each host and
compared byte for byte with the files; a slice with any status other than
200 fails the run. The load average is printed before and after: the
machine is shared, and only ratios within one run count.

Linux only (/proc, sched_setaffinity). The temporary folder is removed at
the end.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

REPO: Final = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # a script in bench/: the package is one folder up

from tests.contract import Host, process_tree, request  # noqa: E402
from tests.hosts import HOSTS, install_host_tools  # noqa: E402

SEED: Final = 20261122
BASELINE: Final = "nginx"
CONNECTIONS: Final = 8
SERVER_CPU: Final = 0
CLIENT_CPU: Final = 1
CHECKED: Final = 200
PATTERNS: Final = ("random", "hot")
WRK_SCRIPT: Final = """\
-- Each request asks for one of the paths in the file given after --, at random.
local paths = {}
function init(args)
  for line in io.lines(args[1]) do paths[#paths + 1] = line end
  math.randomseed(tonumber(args[2]))
end
function request()
  return wrk.format("GET", paths[math.random(#paths)])
end
"""


def article_id(index: int) -> int:
    """Ids spread like a real catalogue's: gaps, and a few long ones."""
    return 7 * index + 1 if index % 97 else 10**15 + index


def ratings_text(count: int) -> str:
    rng = random.Random(SEED)
    lines = ["scale: [1, 5]", "articles:"]
    for index in range(count):
        ratings = rng.randint(0, 500)
        lines.append(
            f"  {article_id(index)}: {{sum: {rng.randint(ratings, 5 * ratings)}, count: {ratings}}}"
        )
    return "\n".join(lines) + "\n"


def rating_path(article: int) -> str:
    return f"/away/api/articles/{article}/rating/"


def pin(pid: int, cpu: int) -> None:
    """Pin every thread of ``pid`` and of its descendants to ``cpu``."""
    for process in process_tree(pid):
        for task in Path(f"/proc/{process}/task").glob("*"):
            try:
                os.sched_setaffinity(int(task.name), {cpu})
            except (ProcessLookupError, PermissionError):
                continue  # gone meanwhile


def check_answers(host: Host, count: int) -> None:
    rng = random.Random(SEED)
    for _ in range(CHECKED):
        article = article_id(rng.randrange(count))
        reply = request(host.port, "GET", rating_path(article))
        expected = (host.site / rating_path(article)[1:] / "index.json").read_bytes()
        assert (reply.status, reply.body) == (200, expected), (
            f"{host.name}: {article}: {reply.status}"
        )


def wrk_slice(host: Host, paths: Path, script: Path, seconds: int, seed: int) -> tuple[float, int]:
    """Requests per second over one slice, and how many were sent; every answer must be a 200."""
    done = subprocess.run(
        [
            "taskset",
            "-c",
            str(CLIENT_CPU),
            "wrk",
            "-t1",
            f"-c{CONNECTIONS}",
            f"-d{seconds}s",
            "-s",
            str(script),
            f"http://127.0.0.1:{host.port}",
            "--",
            str(paths),
            str(seed),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "Non-2xx" not in done.stdout, done.stdout
    assert "Socket errors" not in done.stdout, done.stdout
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", done.stdout)[1])  # type: ignore[index]
    sent = int(re.search(r"(\d+) requests in", done.stdout)[1])  # type: ignore[index]
    return rate, sent


@dataclass
class Figure:
    """One host and pattern: its median rate, and the share of requests that reached a store."""

    rate: float
    from_store: float | None = None


def measure(
    count: int, seconds: int, rounds: int, tmp: str, names: Sequence[str], patterns: Sequence[str]
) -> dict[tuple[str, str], Figure]:
    work = Path(tempfile.mkdtemp(prefix="bench-hosts-", dir=tmp))
    hosts: dict[str, Host] = {}
    try:
        ratings = ratings_text(count)
        for name in names:
            folder = work / name.replace(" ", "_").replace("→", "to")
            folder.mkdir()
            # The host builds its project around this catalogue (tests.contract.make_project).
            (folder / "ratings.yaml").write_text(ratings, encoding="utf-8")
            hosts[name] = HOSTS[name](folder)
            pin_host(hosts[name])
            check_answers(hosts[name], count)
        script = work / "random.lua"
        script.write_text(WRK_SCRIPT)
        paths = {
            "random": work / "random.txt",
            "hot": work / "hot.txt",
        }
        paths["random"].write_text("".join(rating_path(article_id(i)) + "\n" for i in range(count)))
        paths["hot"].write_text(rating_path(article_id(count // 2)) + "\n")
        rates: dict[tuple[str, str], list[float]] = {}
        sent: dict[tuple[str, str], int] = {}
        reads: dict[tuple[str, str], int] = {}
        for turn in range(rounds):
            for pattern in patterns:
                for name, host in hosts.items():
                    key = (name, pattern)
                    pin_host(host)  # threads started since
                    before = host.reads()
                    rate, requests = wrk_slice(host, paths[pattern], script, seconds, SEED + turn)
                    rates.setdefault(key, []).append(rate)
                    sent[key] = sent.get(key, 0) + requests
                    if host.store is not None:
                        reads[key] = reads.get(key, 0) + host.reads() - before
        return {
            key: Figure(statistics.median(values), reads[key] / sent[key] if key in reads else None)
            for key, values in rates.items()
        }
    finally:
        for host in hosts.values():
            host.stop()
        shutil.rmtree(work, ignore_errors=True)


def pin_host(host: Host) -> None:
    assert host.process is not None, host.name  # every host of HOSTS runs as a process
    pin(host.process.pid, SERVER_CPU)
    if host.store is not None:
        pin(host.store.pid, SERVER_CPU)  # the edge's work includes its store's


def ensure_wrk() -> None:
    if shutil.which("wrk"):
        return
    subprocess.run(["apt-get", "install", "-y", "-q", "--no-install-recommends", "wrk"], check=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--sizes", default="1000,19990")
    parser.add_argument("--seconds", type=int, default=3, help="per slice")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tmp", default="/dev/shm", help="where the sites are built")
    parser.add_argument("--hosts", default=",".join(HOSTS), help="which, by name (nginx first)")
    parser.add_argument("--patterns", default=",".join(PATTERNS))
    args = parser.parse_args(argv)
    names = args.hosts.split(",")
    patterns = args.patterns.split(",")
    unknown = [name for name in names if name not in HOSTS] + [
        pattern for pattern in patterns if pattern not in PATTERNS
    ]
    if unknown or BASELINE not in names:
        parser.error(f"unknown: {unknown}; the hosts must include {BASELINE}")
    ensure_wrk()
    install_host_tools()
    print(
        f"wrk, {CONNECTIONS} connections on CPU {CLIENT_CPU}; each host on CPU {SERVER_CPU}; "
        f"median of {args.rounds} slices of {args.seconds:g} s; sites in {args.tmp}"
    )
    print(f"load average before: {Path('/proc/loadavg').read_text().strip()}\n")
    print("| articles | articles asked | host | requests/s | × nginx | reached the store |")
    print("|---:|---|---|---:|---:|---:|")
    for size in (int(text) for text in args.sizes.split(",")):
        figures = measure(size, args.seconds, args.rounds, args.tmp, names, patterns)
        for (name, pattern), figure in figures.items():
            ratio = figure.rate / figures[(BASELINE, pattern)].rate
            store = "" if figure.from_store is None else f"{figure.from_store:.1%}"
            print(
                f"| {size:,} | {pattern} | `{name}` | {figure.rate:,.0f} "
                f"| {ratio:.{2 if ratio >= 0.1 else 4}f} | {store} |",
                flush=True,
            )
    print(f"\nload average after: {Path('/proc/loadavg').read_text().strip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
