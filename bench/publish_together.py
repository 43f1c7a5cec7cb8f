"""Publishes started together against a real store: exit codes, uploads, seconds.

    python bench/publish_together.py [--size 10000] [--publishes 3]

Starts SeaweedFS on 127.0.0.1 (tests/objectstore.py) behind the tests' counting
proxy. For each case, its publishes (``generate.py --publish``, no folder) start
at once into one prefix: first publishes of the same catalogue, first
publishes of different catalogues, then one change each. It prints each
publish's exit code and seconds, the files uploaded (PUTs of neither the state
nor the lock), the uploads the same publishes make one after another (planned
from the states they leave), whether the bucket then holds the last one's site
(``--check`` exits 0) and the requests the proxy saw.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Final

REPO: Final = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # a script in bench/: the package is one folder up

from ratings_api.bucket_state import BucketState, plan  # noqa: E402
from ratings_api.build import render_site  # noqa: E402
from ratings_api.publish import site_of  # noqa: E402
from tests.objectstore import remove_store, start_counting_proxy, start_store  # noqa: E402

BASE: Final = "https://ratings.example.com"


def catalogue(size: int, first: int = 1, bump: int = 0) -> str:
    lines = "".join(f"  {n}: [{(n + (n == bump)) % 5 + 1}]\n" for n in range(first, first + size))
    return f"base_url: {BASE}\nscale: [1, 5]\narticles:\n{lines}"


def uploads_one_after_another(sources: list[Path], before: Path | None) -> int:
    state, total = BucketState(), 0
    for number, source in enumerate([before, *sources] if before else sources):
        todo, state = plan(site_of(render_site(str(source), base_url=None, environ={})), state)
        total += todo.upload_count if before is None or number else 0
    return total


def run_case(
    name: str,
    texts: list[str],
    before: str | None,
    env: dict[str, str],
    folder: Path,
    proxy: object,
    target: str,
) -> None:
    sources = []
    for number, text in enumerate(texts):
        (folder / f"{name}-{number}.yaml").write_text(text)
        sources.append(folder / f"{name}-{number}.yaml")
    generate = [sys.executable, str(REPO / "generate.py")]
    previous = None
    if before is not None:
        previous = folder / f"{name}-before.yaml"
        previous.write_text(before)
        subprocess.run(
            [*generate, "--quiet", "--input", str(previous), "--publish", target],
            env=env,
            check=True,
        )
    proxy.requests.clear()  # type: ignore[attr-defined]
    started = time.monotonic()
    running = [
        subprocess.Popen(
            [
                *generate,
                "--quiet",
                "--input",
                str(s),
                "--publish",
                target,
                "--max-removals",
                str(10**9),
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for s in sources
    ]
    order, seconds = [], {}
    while len(order) < len(running):
        for number, process in enumerate(running):
            if number not in order and process.poll() is not None:
                order.append(number)
                seconds[number] = time.monotonic() - started
        time.sleep(0.05)
    codes = [p.returncode for p in running]
    errors = [p.stderr.read().strip() for p in running if p.stderr is not None]
    requests = list(proxy.requests)  # type: ignore[attr-defined]
    uploaded = sum(
        1
        for m, p in requests
        if m == "PUT" and not p.endswith((".ratings-api/state.gz", ".ratings-api/lock"))
    )
    serial = uploads_one_after_another([sources[n] for n in order], previous)
    check = subprocess.run(
        [*generate, "--quiet", "--check", "--input", str(sources[order[-1]]), "--publish", target],
        env=env,
        capture_output=True,
        check=False,
    )
    print(
        f"{name}: exit {codes}, seconds {[round(seconds[n], 1) for n in range(len(running))]}, "
        f"uploaded {uploaded:,} (one after another: {serial:,}), requests {len(requests):,}, "
        f"--check of the last: exit {check.returncode}",
        flush=True,
    )
    for error in filter(None, errors):
        print("  ", error.splitlines()[-1], flush=True)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--publishes", type=int, default=3)
    args = parser.parse_args()
    size, count = args.size, args.publishes
    folder = Path(tempfile.mkdtemp(prefix="publish-together-", dir="/dev/shm"))
    store = start_store(folder / "store")
    proxy = start_counting_proxy(store.endpoint)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("AWS_")},
        **store.environ(),
        "AWS_ENDPOINT_URL": proxy.endpoint,
    }
    try:
        cases = [
            ("first-same", [catalogue(size)] * count, None),
            ("first-different", [catalogue(size, 1 + n * size // 10) for n in range(count)], None),
            (
                "one-change-each",
                [catalogue(size, bump=1 + n) for n in range(count)],
                catalogue(size),
            ),
        ]
        for number, (name, texts, before) in enumerate(cases):
            bucket = f"together-{number}"
            store.create_bucket(bucket)
            run_case(name, texts, before, env, folder, proxy, f"s3://{bucket}/p")
    finally:
        proxy.stop()
        remove_store(store)
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
