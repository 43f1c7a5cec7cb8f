"""The peak memory of a command and all its descendants together, RSS and PSS.

    python bench/memory.py python generate.py --input ratings.yaml --output site

Samples every 20 ms. The sum of RSS counts a page shared by several processes
(a forked writer's copy-on-write view of the catalogue) once per process; the
sum of PSS (proportional set size) splits each shared page among its sharers,
so it is what the processes cost the machine together.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Final

SAMPLE_EVERY: Final = 0.02  # seconds


def descendants(pid: int) -> list[int]:
    """``pid`` and every process below it, as /proc shows them now."""
    pids = [pid]
    for parent in pids:  # grows as it goes
        try:
            for task in Path(f"/proc/{parent}/task").iterdir():
                pids += [int(child) for child in (task / "children").read_text().split()]
        except OSError:
            continue  # gone meanwhile
    return pids


def memory_kb(pid: int) -> tuple[int, int]:
    """The process's RSS and PSS in KiB, or zeros if it is gone."""
    rss = pss = 0
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Rss:"):
                rss = int(line.split()[1])
            elif line.startswith("Pss:"):
                pss = int(line.split()[1])
    except OSError:
        pass
    return rss, pss


def main(argv: Sequence[str] | None = None) -> int:
    command = list(sys.argv[1:] if argv is None else argv)
    # The command's output passes through (bench/publish.py reads its summary), then this line.
    process = subprocess.Popen(command)
    peak_rss = peak_pss = most = 0
    at_peak: list[int] = []  # each process's RSS when their sum was highest
    while process.poll() is None:
        pids = descendants(process.pid)
        sizes = [memory_kb(pid) for pid in pids]
        if sum(rss for rss, _ in sizes) > peak_rss:
            peak_rss = sum(rss for rss, _ in sizes)
            at_peak = [rss for rss, _ in sizes if rss]
        peak_pss = max(peak_pss, sum(pss for _, pss in sizes))
        most = max(most, len(pids))
        time.sleep(SAMPLE_EVERY)
    load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    sys.stdout.flush()
    print(
        f"exit {process.returncode}; peak RSS sum {peak_rss / 1024:.0f} MB "
        f"({' + '.join(f'{rss / 1024:.0f}' for rss in at_peak)}), "
        f"peak PSS sum {peak_pss / 1024:.0f} MB, processes {most}; load average {load}"
    )
    return process.returncode


if __name__ == "__main__":
    raise SystemExit(main())
