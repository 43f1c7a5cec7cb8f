"""Measure the hosts of the contract suite on one site: requests per second.

    python bench/hosts.py [--sizes 1000,19990] [--seconds 3] [--rounds 5] [--tmp /dev/shm]

For each size, a synthetic catalogue (fixed seed) is served at once by every
host of tests/hosts.py, started by the contract suite's own functions with
the configuration this repository ships: the WhiteNoise app under
``generate.py --serve`` and gunicorn, nginx, ``netlify dev`` and ``wrangler
pages dev``. Each host's processes are pinned to CPU 0 and the load
generator, wrk (Debian's, installed if missing, as root), to CPU 1; wrk
keeps 8 connections open and asks for articles chosen uniformly at random.
The hosts take turns, one slice of --seconds each, for --rounds rounds, so
that other work on the machine blurs the comparison as little as it can;
each figure is the median of its slices, and its ratio is to nginx's in the
same run.

Before the timing, 200 random articles are fetched from each host and
compared byte for byte with the files; a slice with any status other than
200 fails the run.

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
from pathlib import Path
from typing import Final

REPO: Final = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # a script in bench/: the package is one folder up

from tests.contract import Host, process_tree, request, stop  # noqa: E402
from tests.hosts import HOSTS, install_host_tools  # noqa: E402

SEED: Final = 20261122
BASELINE: Final = "nginx"
CONNECTIONS: Final = 8
SERVER_CPU: Final = 0
CLIENT_CPU: Final = 1
CHECKED: Final = 200
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


def wrk_slice(host: Host, paths: Path, script: Path, seconds: int, seed: int) -> float:
    """Requests per second over one slice; every answer must be a 200."""
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
    return float(re.search(r"Requests/sec:\s+([\d.]+)", done.stdout)[1])  # type: ignore[index]


def measure(count: int, seconds: int, rounds: int, tmp: str) -> dict[str, float]:
    work = Path(tempfile.mkdtemp(prefix="bench-hosts-", dir=tmp))
    hosts: dict[str, Host] = {}
    try:
        ratings = ratings_text(count)
        for name, start_host in HOSTS.items():
            folder = work / name.replace(" ", "_")
            folder.mkdir()
            hosts[name] = start_host(folder, ratings)
            pin(hosts[name].process.pid, SERVER_CPU)
            check_answers(hosts[name], count)
        paths = work / "paths.txt"
        paths.write_text("".join(rating_path(article_id(i)) + "\n" for i in range(count)))
        script = work / "random.lua"
        script.write_text(WRK_SCRIPT)
        slices: dict[str, list[float]] = {name: [] for name in hosts}
        for turn in range(rounds):
            for name, host in hosts.items():
                pin(host.process.pid, SERVER_CPU)  # threads started since are pinned too
                slices[name].append(wrk_slice(host, paths, script, seconds, SEED + turn))
        return {name: statistics.median(values) for name, values in slices.items()}
    finally:
        for host in hosts.values():
            stop(host.process)
        shutil.rmtree(work, ignore_errors=True)


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
    args = parser.parse_args(argv)
    ensure_wrk()
    install_host_tools()
    print(
        f"wrk, {CONNECTIONS} connections on CPU {CLIENT_CPU}; each host on CPU {SERVER_CPU}; "
        f"median of {args.rounds} slices of {args.seconds:g} s; sites in {args.tmp}\n"
    )
    print("| articles | host | requests/s | × nginx |")
    print("|---:|---|---:|---:|")
    for size in (int(text) for text in args.sizes.split(",")):
        figures = measure(size, args.seconds, args.rounds, args.tmp)
        for name, rate in figures.items():
            ratio = rate / figures[BASELINE]
            print(
                f"| {size:,} | `{name}` | {rate:,.0f} | {ratio:.{2 if ratio >= 0.1 else 4}f} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
