"""The publish function alone, against SeaweedFS: seconds and peak memory, this checkout beside another.

    python bench/publish_core.py [--sizes 10000,100000] [--compare CHECKOUT [--compare-first]]
                                 [--tmp /dev/shm]
    python bench/publish_core.py --plan-only --sizes 200000,1000000

Starts SeaweedFS on 127.0.0.1 (tests/objectstore.py). For each size and each
checkout, a fresh Python process (that checkout on its path) makes a synthetic
catalogue in memory, calls ``publish.publish`` on it twice (first publish into
an empty bucket of its own, then a no-op) and prints the seconds of each and
the process's peak RSS (``ru_maxrss``) with the RSS before the first publish,
so the difference is the publish's own. Nothing is built or written to disk:
this measures the publish, not the command (bench/publish.py does that).

--plan-only makes no request: the seconds (untraced) and the peak traced by
tracemalloc while planning a first publish of each size, marking its files and
encoding the marks (what a publish holds besides the uploads in flight, which
are a bounded window).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.objectstore import Store, remove_store, start_store  # noqa: E402

CHILD: Final = r"""
import json, resource, sys, time
from array import array
from ratings_api import publish
from ratings_api.loader import Catalogue
from ratings_api.rating import Renderer

size, bucket = int(sys.argv[1]), sys.argv[2]
ids = array("q", range(1, size + 1))
sums = array("q", (n % 5 + 1 for n in range(1, size + 1)))
counts = array("q", [1]) * size
catalogue = Catalogue(ids, sums, counts)
site = publish.Site(catalogue, Renderer("https://ratings.example.com"), {"index.html": b"x\n"})
target = publish.parse_target(f"s3://{bucket}/p")
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
figures = {"rss_before_kb": before}
for name in ("first", "noop"):
    started = time.perf_counter()
    outcome = publish.publish(site, target)
    figures[name + "_s"] = round(time.perf_counter() - started, 2)
    figures[name + "_requests"] = outcome.requests
figures["peak_rss_kb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps(figures))
"""

PLAN_ONLY: Final = r"""
import json, sys, time, tracemalloc
from array import array
from ratings_api import publish
from ratings_api.loader import Catalogue
from ratings_api.rating import Renderer

size = int(sys.argv[1])
ids = array("q", range(1, size + 1))
sums = array("q", (n % 5 + 1 for n in range(1, size + 1)))
counts = array("q", [1]) * size
catalogue = Catalogue(ids, sums, counts)
site = publish.Site(catalogue, Renderer("https://ratings.example.com"), {"index.html": b"x\n"})
def marks():
    todo, final = publish.plan(site, publish.State())
    return len(todo.uploads), publish.encode_state(publish.marks_of(publish.State(), todo))

started = time.perf_counter()
uploads, _ = marks()
seconds = time.perf_counter() - started
tracemalloc.start()
marks()
peak = tracemalloc.get_traced_memory()[1]
print(json.dumps({"uploads": uploads, "peak_mb": round(peak / 2**20, 1),
                  "seconds": round(seconds, 2)}))
"""


def child(checkout: Path, store: Store | None, code: str, *arguments: str) -> dict[str, float]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    if store is not None:
        environ.update(store.environ())
    environ["PYTHONPATH"] = str(checkout)
    done = subprocess.run(
        [sys.executable, "-c", code, *arguments],
        env=environ,
        capture_output=True,
        text=True,
        check=True,
        cwd=checkout,
    )
    return dict(json.loads(done.stdout.splitlines()[-1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10000")
    parser.add_argument("--compare", type=Path, help="another checkout, run beside this one")
    parser.add_argument("--tmp", default="/dev/shm" if Path("/dev/shm").is_dir() else None)
    parser.add_argument("--plan-only", action="store_true")
    parser.add_argument("--compare-first", action="store_true", help="run the other one first")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    print(f"load average: {os.getloadavg()}")
    if args.plan_only:
        for size in sizes:
            print(size, child(ROOT, None, PLAN_ONLY, str(size)), flush=True)
        return 0
    checkouts = [("this", ROOT)] + ([("compare", args.compare)] if args.compare else [])
    if args.compare_first:
        checkouts.reverse()
    store = start_store(Path(tempfile.mkdtemp(dir=args.tmp, prefix="publish-core-")))
    try:
        for size in sizes:
            for label, checkout in checkouts:
                bucket = f"core-{label}-{size}"
                store.create_bucket(bucket)
                figures = child(checkout, store, CHILD, str(size), bucket)
                print(size, label, figures, f"load {os.getloadavg()[0]:.2f}", flush=True)
    finally:
        remove_store(store)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
