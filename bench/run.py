"""Benchmark the build against the machine's floor, and against its peers.

    python bench/run.py --sizes 10000,100000,1000000 --repeat 3 [--peers frozen-flask,hugo]

For each size it writes a synthetic catalogue (seeded: the same file every
run), then, in each repetition, side by side so that all share the machine's
mood of the moment:

- the floor: libyaml's C parser walking the file's events (``yaml.parse``),
  plus a C program that only does mkdir, mkdir, open, write, close per
  document (bench/floor_writer.c), writing the very bytes the build writes,
  in one process;
- the build: a fresh one, the same pinned to one CPU (``taskset -c 0``), a
  no-op rebuild, a rebuild after one rating more, and ``--check`` on the
  result, each as ``python generate.py`` in a process of its own, with its
  wall time and the peak resident memory of all its processes together (a
  sampler adds up the RSS of the build and any process it forks every 20 ms);
- with ``--compare DIR``, the same builds with another checkout's
  ``generate.py`` (such as the main branch's), for an A/B in the same run;
- peers, if asked for (at sizes up to --peer-max): bench/peers.py.

It prints medians and ratios. Trees are deleted as soon as they are measured:
a tmpfs has few inodes (this machine's /dev/shm has 3.1M; 1M articles take
3M). Run it on tmpfs (the default) or on a disk left quiet, and say which. On
a disk, ``--defer-deletion`` only renames each tree aside and deletes them all
once everything is measured: a disk creates files several times slower for
minutes after a mass deletion, which would otherwise fall on whichever tree
is written next.
"""

from __future__ import annotations

import argparse
import functools
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from ratings_api.loader import load as load_catalogue  # noqa: E402
from ratings_api.rating import ARTICLES_PATH, Renderer  # noqa: E402

BASE_URL: Final = "https://ratings.example.com"
PARSE_FLOOR: Final = (
    "import sys, yaml\n"
    "parser = yaml.CSafeLoader(open(sys.argv[1], 'rb').read())\n"
    "while parser.get_event() is not None:\n"
    "    pass\n"
)

SAMPLE_EVERY: Final = 0.02  # seconds between two memory samples


@dataclass(frozen=True)
class Run:
    seconds: float
    peak_mb: float  # the sum over the build's processes, at its highest


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
    rows = []
    try:
        for size in sizes:
            rows.append(_measure_size(size, args, work, writer, peers))
            print(_table(rows[-1:]), f"# load average: {load_average()}", sep="\n", file=sys.stderr)
    finally:
        remove_deferred()
    print(_table(rows))
    print(_goals_table(rows))
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
    command.add_argument(
        "--compare", default="", help="another checkout whose generate.py runs side by side"
    )
    command.add_argument(
        "--skip",
        default="",
        help="comma-separated: one-cpu (costs a tree made and deleted: on a disk, minutes at 1M)",
    )
    command.add_argument(
        "--defer-deletion",
        action="store_true",
        help="on a disk: set each tree aside (a rename) and delete them all at the end, so that "
        "no measured tree is written right after a mass deletion (needs room for them all)",
    )
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
        f"Python {sys.version.split()[0]}; load average: {load_average()}"
    )


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


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
    with open(target, "wb") as whole:
        whole.writelines(
            b"%d " % article[0] + render(*article)
            for article in zip(catalogue.ids, catalogue.sums, catalogue.counts, strict=True)
        )


# --- running and timing ----------------------------------------------------


def timed(command: list[str], stdin: Path | None = None) -> Run:
    """Run ``command``, which must succeed; its wall time and peak resident memory.

    The memory is that of the process and all its descendants together,
    sampled (ru_maxrss is one process's peak, and a forked writer's counts
    apart), and at least the peak of the largest single process.
    """
    with open(stdin or os.devnull, "rb") as source:
        started = time.perf_counter()
        process = subprocess.Popen(command, stdin=source, stdout=subprocess.DEVNULL)
        sampler = MemorySampler(process.pid)
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - started
        sampler.stop()
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed with {process.returncode}")
    return Run(seconds, max(sampler.peak_kb, usage.ru_maxrss) / 1024)


class MemorySampler:
    """The largest sum of resident memory over a process and its descendants, every 20 ms."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak_kb = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._done.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._done.wait(SAMPLE_EVERY):
            self.peak_kb = max(self.peak_kb, sum(map(_rss_kb, _descendants(self.pid))))


def _descendants(pid: int) -> list[int]:
    pids = [pid]
    for parent in pids:  # grows as it goes
        try:
            for task in os.listdir(f"/proc/{parent}/task"):
                with open(f"/proc/{parent}/task/{task}/children") as file:
                    pids += [int(child) for child in file.read().split()]
        except OSError:
            continue  # gone meanwhile
    return pids


def _rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as file:
            for line in file:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


DEFERRED: list[Path] = []  # trees set aside by remove_tree with --defer-deletion


def remove_tree(path: Path, *, defer: bool = False) -> None:
    """Delete ``path``; with ``defer``, only rename it, for ``remove_deferred`` at the end.

    A disk creates files several times slower for minutes after a mass
    deletion: on a disk, a tree measured after another's deletion would pay
    for it. A rename within the file system costs nothing.
    """
    if not path.exists():
        return
    if defer:
        aside = path.with_name(f"{path.name}.deleted-{len(DEFERRED)}")
        path.rename(aside)
        DEFERRED.append(aside)
        return
    subprocess.run(["rm", "-rf", str(path)], check=True)


def remove_deferred() -> None:
    while DEFERRED:
        remove_tree(DEFERRED.pop())


def _compile_floor_writer(work: Path) -> Path:
    binary = work / "floor_writer"
    subprocess.run(
        ["cc", "-O2", "-o", str(binary), str(ROOT / "bench" / "floor_writer.c")], check=True
    )
    return binary


def generate(ratings: Path, output: Path, *extra: str, checkout: Path = ROOT) -> list[str]:
    return [
        sys.executable,
        str(checkout / "generate.py"),
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
class Builds:
    full: list[Run] = field(default_factory=list)
    one_cpu: list[Run] = field(default_factory=list)
    noop: list[Run] = field(default_factory=list)
    change: list[Run] = field(default_factory=list)
    check: list[Run] = field(default_factory=list)


@dataclass
class Row:
    size: int
    parse: list[Run]
    write: list[Run]
    builds: Builds
    compared: Builds | None
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
    compare = Path(args.compare).resolve() if args.compare else None
    compared = None if compare is None else Builds()
    row = Row(size, [], [], Builds(), compared, {name: [] for name in prepared})
    site, floor = work / "site", work / "floor"
    skip = set(args.skip.split(","))
    defer = args.defer_deletion
    for repetition in range(args.repeat):
        print(f"# {size:,} articles, run {repetition + 1} of {args.repeat}", file=sys.stderr)
        # A disk creates files slower for a while after a mass deletion: the
        # floor and the builds take turns at coming first, right after one.
        sides: list[Callable[[], None]] = [
            functools.partial(_floor_side, row, ratings, documents, writer, floor, defer),
            functools.partial(_build_side, row.builds, ratings, changed, site, ROOT, skip, defer),
        ]
        if compare is not None and compared is not None:
            sides.append(
                functools.partial(
                    _build_side, compared, ratings, changed, site, compare, skip, defer
                )
            )
        for side in sides if repetition % 2 == 0 else reversed(sides):
            side()
        for name, (command, output) in prepared.items():
            row.peers[name].append(timed(command))
            remove_tree(output)
    return row


def _floor_side(
    row: Row, ratings: Path, documents: Path, writer: Path, floor: Path, defer: bool
) -> None:
    row.parse.append(timed([sys.executable, "-c", PARSE_FLOOR, str(ratings)]))
    (floor / ARTICLES_PATH).mkdir(parents=True)
    row.write.append(timed([str(writer), str(floor / ARTICLES_PATH)], stdin=documents))
    remove_tree(floor, defer=defer)


def _build_side(
    builds: Builds,
    ratings: Path,
    changed: Path,
    site: Path,
    checkout: Path,
    skip: set[str],
    defer: bool,
) -> None:
    """A fresh build, one on one CPU, a no-op, one change and --check, with ``checkout``."""
    if "one-cpu" in skip:
        builds.one_cpu.append(Run(float("nan"), 0))
    else:
        command = ["taskset", "-c", "0", *generate(ratings, site, checkout=checkout)]
        builds.one_cpu.append(timed(command))
        _remove_site(site, defer)
    builds.full.append(timed(generate(ratings, site, checkout=checkout)))
    builds.noop.append(timed(generate(ratings, site, checkout=checkout)))
    builds.change.append(timed(generate(changed, site, checkout=checkout)))
    builds.check.append(timed(generate(changed, site, "--check", checkout=checkout)))
    _remove_site(site, defer)


def _remove_site(site: Path, defer: bool = False) -> None:
    """The output folder and the build's state beside it."""
    remove_tree(site, defer=defer)
    remove_tree(site.with_name(f".{site.name}.generate"), defer=defer)


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
    stage("render every document", lambda: [render(*article) for article in articles])
    stage("write a fresh tree", lambda: sync_site(str(site), catalogue, render))
    stage("no-op: read every document back", lambda: sync_site(str(site), catalogue, render))
    _remove_site(site)
    return "\n".join(lines)


# --- the tables ------------------------------------------------------------


def median(runs: list[Run]) -> float:
    return statistics.median(run.seconds for run in runs)


def spread(runs: list[Run]) -> str:
    """The median of ``runs`` and, for more than one, their spread: ``2.61 s (2.55-2.70)``."""
    seconds = [run.seconds for run in runs]
    between = f" ({min(seconds):.2f}-{max(seconds):.2f})" if len(seconds) > 1 else ""
    return f"{statistics.median(seconds):.2f} s{between}"


def peak(runs: list[Run]) -> float:
    return max(run.peak_mb for run in runs)


def _floor(row: Row) -> float:
    """The single-process floor: parse, then write."""
    return median(row.parse) + median(row.write)


def _table(rows: list[Row]) -> str:
    lines = [
        (
            "| articles | build | parse floor | write floor | floor | fresh build | ÷ floor "
            "| one CPU | ÷ floor | peak MB | no-op | ÷ fresh | one change | --check |"
        ),
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        floor = _floor(row)
        for name, builds in _labelled(row):
            full, one_cpu, noop = median(builds.full), median(builds.one_cpu), median(builds.noop)
            lines.append(
                f"| {row.size:,} | {name} | {median(row.parse):.2f} s | {median(row.write):.2f} s "
                f"| {floor:.2f} s | {spread(builds.full)} | {full / floor:.2f} "
                f"| {one_cpu:.2f} s | {one_cpu / floor:.2f} "
                f"| {peak(builds.full + builds.noop + builds.one_cpu):.0f} "
                f"| {spread(builds.noop)} | {noop / full:.2f} | {spread(builds.change)} "
                f"| {spread(builds.check)} |"
            )
    return "\n".join(lines)


def _labelled(row: Row) -> list[tuple[str, Builds]]:
    named = [("this", row.builds)]
    if row.compared is not None:
        named.append(("compared", row.compared))
    return named


GOALS: Final = (
    ("fresh build ÷ single-process floor", "≤ 1.25"),
    ("no-op rebuild ÷ fresh build", "≤ 0.5"),
    ("peak MB, all processes together", "≤ 150 at 100,000"),
)


def _goals_table(rows: list[Row]) -> str:
    lines = ["| articles | goal | wanted | measured |", "|---:|---|---|---:|"]
    for row in rows:
        builds = row.builds
        full = median(builds.full)
        measured = (
            f"{full / _floor(row):.2f}",
            f"{median(builds.noop) / full:.2f}",
            f"{peak(builds.full + builds.noop + builds.one_cpu):.0f}",
        )
        for (goal, wanted), figure in zip(GOALS, measured, strict=True):
            lines.append(f"| {row.size:,} | {goal} | {wanted} | {figure} |")
        if row.compared is not None:
            for label, this, other in (
                ("no-op", builds.noop, row.compared.noop),
                ("one change", builds.change, row.compared.change),
                ("full build", builds.full, row.compared.full),
            ):
                lines.append(
                    f"| {row.size:,} | {label} ÷ the compared checkout's | ≤ 1 "
                    f"| {median(this) / median(other):.2f} |"
                )
    return "\n".join(lines)


def _peer_table(rows: list[Row]) -> str:
    lines = [
        "| articles | generate.py | µs/article | peer | peer's time | µs/article | peer ÷ generate.py |",
        "|---:|---:|---:|---|---:|---:|---:|",
    ]
    for row in rows:
        ours = median(row.builds.full)
        for name, runs in row.peers.items():
            theirs = median(runs)
            lines.append(
                f"| {row.size:,} | {ours:.2f} s | {ours / row.size * 1e6:.0f} | {name} "
                f"| {theirs:.2f} s | {theirs / row.size * 1e6:.0f} | {theirs / ours:.1f} |"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
