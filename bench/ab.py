"""A/B in one process: another checkout's fast reader or app against this one's.

    python bench/ab.py reader /path/to/other/checkout [--repeat 7]
    python bench/ab.py serve /path/to/other/checkout SITE [--repeat 15]

``reader`` times ``load_fast`` of each on the same 1M-article catalogue
(run.py's, seed 20261122) written to --dir (tmpfs by default), taking turns;
``serve`` calls each ``create_app(SITE)`` directly with a WSGI environ, 2,400
GETs of article documents a round, taking turns. Taking turns in one process
lets both share the machine's mood of the moment; the load average is
printed before and after. The other checkout's module is loaded from its
file, beside this checkout's package (it imports this one's other modules).
"""

from __future__ import annotations

import argparse
import importlib.util
import io
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, Final

ROOT: Final = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.run import make_catalogue  # noqa: E402
from ratings_api import fastpath, server  # noqa: E402

SIZE: Final = 1_000_000
SEED: Final = 20261122


def main(argv: Sequence[str] | None = None) -> int:
    command = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    command.add_argument("what", choices=("reader", "serve"))
    command.add_argument("other", type=Path, help="the other checkout")
    command.add_argument("site", nargs="?", help="serve: a built site")
    command.add_argument("--repeat", type=int)
    command.add_argument("--dir", default="/dev/shm", type=Path)
    args = command.parse_args(argv)
    print("load before:", _load())
    if args.what == "reader":
        module = _other(args.other, "fastpath")
        path = args.dir / f"ab-ratings-{SIZE}.yaml"
        make_catalogue(SIZE, SEED, path)
        data = path.read_bytes()
        try:
            runs = {
                "other": lambda: module.load_fast(str(path), data),
                "this": lambda: fastpath.load_fast(str(path), data),
            }
            times = _turns(runs, args.repeat or 7, 1)
        finally:
            path.unlink()
        unit, scale = "s", 1.0
    else:
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
