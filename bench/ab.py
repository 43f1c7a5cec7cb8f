"""A/B: another checkout's reader or app against this one's, taking turns.

    python bench/ab.py reader /path/to/other/checkout [--sizes 100000,1000000] [--repeat 5]
    python bench/ab.py serve /path/to/other/checkout SITE [--repeat 15]

``reader`` writes run.py's catalogue (seed 20261122) of each size to --dir
(tmpfs by default) and, taking turns, reads it with each checkout's code in a
process of its own: the whole reading a build or a publish pays (the fast path
and the walker's check), then the event walker alone, each with the process's
peak memory. ``serve`` calls each ``create_app(SITE)`` directly with a WSGI
environ, 2,400 GETs of article documents a round, taking turns in one process.
Taking turns lets both share the machine's mood of the moment; the load
average is printed before and after.
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, Final

ROOT: Final = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.run import make_catalogue  # noqa: E402
from ratings_api import server  # noqa: E402

SEED: Final = 20261122
# Run in each checkout: before this one, build.load_catalogue read, loader.load walked.
READ: Final = """
import resource, sys, time
from ratings_api import loader
how, path = sys.argv[1:]
data = open(path, "rb").read()
if hasattr(loader, "load_strict"):
    run = {"read": loader.load, "walker": loader.load_strict}[how]
else:
    from ratings_api.build import load_catalogue
    run = {"read": load_catalogue, "walker": loader.load}[how]
started = time.perf_counter()
run(path, data)
seconds = time.perf_counter() - started
print(seconds, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""


def main(argv: Sequence[str] | None = None) -> int:
    command = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    command.add_argument("what", choices=("reader", "serve"))
    command.add_argument("other", type=Path, help="the other checkout")
    command.add_argument("site", nargs="?", help="serve: a built site")
    command.add_argument("--repeat", type=int)
    command.add_argument("--sizes", default="100000,1000000")
    command.add_argument("--dir", default="/dev/shm", type=Path)
    args = command.parse_args(argv)
    print("load before:", _load())
    if args.what == "reader":
        for size in map(int, args.sizes.split(",")):
            _readers(size, {"other": args.other, "this": ROOT}, args.dir, args.repeat or 5)
        print("load after:", _load())
        return 0
    module = _other(args.other, "server")
    apps = {"other": module.create_app(args.site), "this": server.create_app(args.site)}
    runs = {name: _requests(app) for name, app in apps.items()}
    times = _turns(runs, args.repeat or 15, 2400)
    unit, scale = "µs a request", 1e6
    for name, values in times.items():
        print(
            f"{name:6} median {statistics.median(values) * scale:9.3f} {unit}"
            f"  fastest {min(values) * scale:9.3f}"
        )
    ratio = statistics.median(times["this"]) / statistics.median(times["other"])
    print(f"this / other, medians: {ratio:.3f}")
    print("load after:", _load())
    return 0


def _readers(size: int, checkouts: dict[str, Path], folder: Path, repeat: int) -> None:
    """Each checkout's reading of one catalogue, taking turns: medians of time and memory."""
    path = folder / f"ab-ratings-{size}.yaml"
    make_catalogue(size, SEED, path)
    runs: dict[tuple[str, str], list[tuple[float, float]]] = {}
    try:
        for _ in range(repeat):
            for how in ("read", "walker"):
                for name, checkout in checkouts.items():
                    done = subprocess.run(
                        [sys.executable, "-c", READ, how, str(path)],
                        cwd=checkout,
                        env={"PYTHONPATH": str(checkout), "PATH": "/usr/bin:/bin"},
                        capture_output=True,
                        text=True,
                        check=True,
                    )
                    seconds, peak = map(float, done.stdout.split())
                    runs.setdefault((how, name), []).append((seconds, peak))
    finally:
        path.unlink()
    for (how, name), values in runs.items():
        median = statistics.median(seconds for seconds, _ in values)
        peak = max(peak for _, peak in values)
        print(f"{size:>9,} {how:6} {name:5} median {median:6.2f} s  peak {peak:4.0f} MB")


def _load() -> str:
    return Path("/proc/loadavg").read_text().strip()


def _other(checkout: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        f"other_{name}", checkout / "ratings_api" / f"{name}.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _requests(app: Any) -> Callable[[], None]:
    paths = [f"/away/api/articles/{i}/rating/" for i in range(1, 13)] * 200

    def run() -> None:
        for path in paths:
            environ = {"REQUEST_METHOD": "GET", "PATH_INFO": path, "wsgi.errors": io.StringIO()}
            result = app(environ, lambda status, headers: None)
            for _ in result:
                pass
            if hasattr(result, "close"):
                result.close()

    return run


def _turns(runs: dict[str, Callable[[], object]], repeat: int, per: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeat):
        for name, run in runs.items():
            started = time.perf_counter()
            run()
            times[name].append((time.perf_counter() - started) / per)
    return times


if __name__ == "__main__":
    raise SystemExit(main())
