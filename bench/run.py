"""Benchmark the build against the machine's floor, and against its peers.

    python bench/run.py --sizes 10000,100000,1000000 --repeat 3 [--peers frozen-flask,hugo]

For each size it writes a synthetic catalogue (seeded: the same file every
run), then, in each repetition, side by side so that all share the machine's
mood of the moment:

- the floor: libyaml's C parser walking the file's events (``yaml.parse``),
  plus a C program that only does mkdir, mkdir, open, write, close per
  document (bench/floor_writer.c), writing the very bytes the build writes;
- the build: a fresh one, a no-op rebuild, a rebuild after one rating more,
  and ``--check`` on the result, each as ``python generate.py`` in a process
  of its own, with its wall time and peak memory (ru_maxrss);
- peers, if asked for (at sizes up to --peer-max): bench/peers.py.

It prints medians and ratios. Trees are deleted as soon as they are measured:
a tmpfs has few inodes (this machine's /dev/shm has 3.1M; 1M articles take
3M). Run it on tmpfs (the default) or on a disk left quiet, and say which.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ratings_api.build import load_catalogue  # noqa: E402
from ratings_api.rating import ARTICLES_PATH, Renderer  # noqa: E402

BASE_URL: Final = "https://ratings.example.com"
PARSE_FLOOR: Final = (
    "import sys, yaml\n"
    "parser = yaml.CSafeLoader(open(sys.argv[1], 'rb').read())\n"
    "while parser.get_event() is not None:\n"
    "    pass\n"
)


@dataclass(frozen=True)
class Run:
    seconds: float
    peak_mb: float


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    sizes = [int(size) for size in args.sizes.split(",")]
    peers = [name for name in args.peers.split(",") if name]
    work = Path(args.dir)
    work.mkdir(parents=True, exist_ok=True)
    print(_machine(work))
    if args.stages:
        for size in sizes:
            print(_stages(size, args.seed, work))
        return 0
    writer = _compile_floor_writer(work)
    rows = [_measure_size(size, args, work, writer, peers) for size in sizes]
    print(_table(rows))
    peer_rows = [row for row in rows if row.peers]
    if peer_rows:
        print(_peer_table(peer_rows))
    return 0


def _parser() -> argparse.ArgumentParser:
    command = argparse.ArgumentParser(description="Benchmark generate.py against its floor.")
    command.add_argument("--sizes", default="10000,100000,1000000")
    command.add_argument("--repeat", type=int, default=3)
    command.add_argument(
        "--dir", default="/dev/shm/ratings-bench", help="where to build (default: tmpfs)"
    )
    command.add_argument("--seed", type=int, default=20261122)
    command.add_argument("--peers", default="", help="comma-separated: frozen-flask,hugo")
    command.add_argument(
        "--peer-max", type=int, default=100_000, help="largest size peers are run at"
    )
    command.add_argument(
        "--stages",
        action="store_true",
        help="instead, time the stages of a fresh build and a no-op, in this process",
    )
    return command


def _machine(work: Path) -> str:
    mounts = Path("/proc/mounts").read_text().splitlines()
    best = max(
        (line.split() for line in mounts if str(work.resolve()).startswith(line.split()[1])),
        key=lambda fields: len(fields[1]),
    )
    return (
        f"# {work} on {best[2]} ({best[1]}); {os.cpu_count()} cores; "
        f"Python {sys.version.split()[0]}; generate.py's writers: "
        f"{min(4, os.cpu_count() or 1)}"
    )


# --- the catalogue ---------------------------------------------------------


def make_catalogue(size: int, seed: int, path: Path) -> None:
    """``size`` articles with 1 to 20 ratings each, one article a line, ids 1..size."""
    rng = random.Random(seed)
    with open(path, "w") as file:
        file.write(f"base_url: {BASE_URL}\nscale: [1, 5]\narticles:\n")
        for article_id in range(1, size + 1):
            ratings = ", ".join(str(rng.randint(1, 5)) for _ in range(rng.randint(1, 20)))
            file.write(f"  {article_id}: [{ratings}]\n")


def one_rating_more(source: Path, target: Path, article_id: int) -> None:
    text = source.read_text()
    line = f"\n  {article_id}: ["
    at = text.index(line) + len(line)
    target.write_text(text[:at] + "5, " + text[at:])


def write_documents(ratings: Path, target: Path) -> None:
    """'<id> <document>' lines: what the floor writer writes."""
    catalogue = load_catalogue(str(ratings), ratings.read_bytes())
    render = Renderer(BASE_URL)
    with open(target, "wb") as file:
        file.writelines(
            b"%d " % article_id + render(article_id, total, count)
            for article_id, total, count in zip(
                catalogue.ids, catalogue.sums, catalogue.counts, strict=True
            )
        )


# --- running and timing ----------------------------------------------------


def timed(command: list[str], stdin: Path | None = None) -> Run:
    """Run ``command``, which must succeed; its wall time and peak resident memory."""
    with open(stdin or os.devnull, "rb") as source:
        started = time.perf_counter()
        process = subprocess.Popen(command, stdin=source, stdout=subprocess.DEVNULL)
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed with {process.returncode}")
    return Run(seconds, usage.ru_maxrss / 1024)


def remove_tree(path: Path) -> None:
    if path.exists():
        subprocess.run(["rm", "-rf", str(path)], check=True)


def _compile_floor_writer(work: Path) -> Path:
    binary = work / "floor_writer"
    subprocess.run(
        ["cc", "-O2", "-o", str(binary), str(ROOT / "bench" / "floor_writer.c")], check=True
    )
    return binary


def generate(ratings: Path, output: Path, *extra: str) -> list[str]:
    return [
        sys.executable,
        str(ROOT / "generate.py"),
        "--input",
        str(ratings),
        "--output",
        str(output),
        "--base-url",
        BASE_URL,
        "--quiet",
        *extra,
    ]


@dataclass
class Row:
    size: int
    parse: list[Run]
    write: list[Run]
    full: list[Run]
    noop: list[Run]
    change: list[Run]
    check: list[Run]
    peers: dict[str, list[Run]]


def _measure_size(
    size: int, args: argparse.Namespace, work: Path, writer: Path, peers: list[str]
) -> Row:
    ratings = work / f"ratings-{size}.yaml"
    changed = work / f"ratings-{size}-changed.yaml"
    documents = work / f"documents-{size}.txt"
    make_catalogue(size, args.seed, ratings)
    one_rating_more(ratings, changed, size // 2 + 1)
    write_documents(ratings, documents)
    prepared = _prepare_peers(peers, ratings, work, size) if peers and size <= args.peer_max else {}
    row = Row(size, [], [], [], [], [], [], {name: [] for name in prepared})
    site, floor = work / "site", work / "floor"
    for repetition in range(args.repeat):
        print(f"# {size:,} articles, run {repetition + 1} of {args.repeat}", file=sys.stderr)
        # A disk creates files slower for a while after a mass deletion: the
        # floor and the build take turns at coming first, right after one.
        sides = [_floor_side, _build_side]
        for side in sides if repetition % 2 == 0 else reversed(sides):
            side(row, ratings, changed, documents, writer, floor, site)
        for name, (command, output) in prepared.items():
            row.peers[name].append(timed(command))
            remove_tree(output)
    return row


def _floor_side(
    row: Row, ratings: Path, changed: Path, documents: Path, writer: Path, floor: Path, site: Path
) -> None:
    row.parse.append(timed([sys.executable, "-c", PARSE_FLOOR, str(ratings)]))
    (floor / ARTICLES_PATH).mkdir(parents=True)
    row.write.append(timed([str(writer), str(floor / ARTICLES_PATH)], stdin=documents))
    remove_tree(floor)


def _build_side(
    row: Row, ratings: Path, changed: Path, documents: Path, writer: Path, floor: Path, site: Path
) -> None:
    row.full.append(timed(generate(ratings, site)))
    row.noop.append(timed(generate(ratings, site)))
    row.change.append(timed(generate(changed, site)))
    row.check.append(timed(generate(changed, site, "--check")))
    remove_tree(site)


def _prepare_peers(
    names: list[str], ratings: Path, work: Path, size: int
) -> dict[str, tuple[list[str], Path]]:
    from bench.peers import PEERS  # only runs with --peers

    catalogue = load_catalogue(str(ratings), ratings.read_bytes())
    articles = list(zip(catalogue.ids, catalogue.sums, catalogue.counts, strict=True))
    cache = ROOT / "bench" / "out" / "peers"
    cache.mkdir(parents=True, exist_ok=True)
    prepared = {}
    for name in names:
        peer = PEERS[name]
        peer.install(cache)
        peer_work = work / f"peer-{name}-{size}"
        remove_tree(peer_work)
        peer_work.mkdir()
        prepared[name] = (peer.prepare(articles, peer_work, BASE_URL, cache), peer_work / "out")
    return prepared


# --- where the time goes --------------------------------------------------


def _stages(size: int, seed: int, work: Path) -> str:
    """Each stage of a fresh build and of a no-op, timed on its own."""
    from ratings_api.record import RECORD_NAME
    from ratings_api.writer import sync_site

    ratings, site = work / f"ratings-{size}.yaml", work / "site"
    make_catalogue(size, seed, ratings)
    lines = [f"{size:,} articles:"]

    def stage(name: str, work: Callable[[], object]) -> object:
        started = time.perf_counter()
        result = work()
        lines.append(f"  {name:<34} {time.perf_counter() - started:6.2f} s")
        return result

    data = stage("read the file", ratings.read_bytes)
    catalogue = stage("parse and validate (fast path)", lambda: load_catalogue(str(ratings), data))
    stage(
        "libyaml's event parse, for scale",
        lambda: subprocess.run([sys.executable, "-c", PARSE_FLOOR, str(ratings)], check=True),
    )
    render = Renderer(BASE_URL)
    articles = list(zip(catalogue.ids, catalogue.sums, catalogue.counts, strict=True))
    stage(
        "render every document (in the writers)", lambda: [render(*article) for article in articles]
    )
    stage("write a fresh tree", lambda: sync_site(str(site), catalogue, render))
    stage("no-op: one stat an article (record)", lambda: sync_site(str(site), catalogue, render))
    (site / RECORD_NAME).unlink()
    stage("no-op without the record: read all", lambda: sync_site(str(site), catalogue, render))
    remove_tree(site)
    return "\n".join(lines)


# --- the tables ------------------------------------------------------------


def median(runs: list[Run]) -> float:
    return statistics.median(run.seconds for run in runs)


def peak(runs: list[Run]) -> float:
    return max(run.peak_mb for run in runs)


def _table(rows: list[Row]) -> str:
    lines = [
        (
            "| articles | parse floor | write floor | floor | full build | × floor | peak MB "
            "| no-op | ÷ full | one change | ÷ full | --check | ÷ no-op |"
        ),
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        floor = median(row.parse) + median(row.write)
        full, noop = median(row.full), median(row.noop)
        change, check = median(row.change), median(row.check)
        lines.append(
            f"| {row.size:,} | {median(row.parse):.2f} s | {median(row.write):.2f} s "
            f"| {floor:.2f} s | {full:.2f} s | {full / floor:.2f} | {peak(row.full + row.noop):.0f} "
            f"| {noop:.2f} s | {noop / full:.0%} | {change:.2f} s | {change / full:.0%} "
            f"| {check:.2f} s | {check / noop:.2f} |"
        )
    return "\n".join(lines)


def _peer_table(rows: list[Row]) -> str:
    lines = [
        "| articles | generate.py | µs/article | peer | peer's time | µs/article | peer ÷ generate.py |",
        "|---:|---:|---:|---|---:|---:|---:|",
    ]
    for row in rows:
        ours = median(row.full)
        for name, runs in row.peers.items():
            theirs = median(runs)
            lines.append(
                f"| {row.size:,} | {ours:.2f} s | {ours / row.size * 1e6:.0f} | {name} "
                f"| {theirs:.2f} s | {theirs / row.size * 1e6:.0f} | {theirs / ours:.1f} |"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
