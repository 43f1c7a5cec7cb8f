"""A real ``python generate.py --serve`` on 127.0.0.1, on a port of the system's choosing."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final

REPO: Final = Path(__file__).resolve().parent.parent
READY_SECONDS: Final = 20.0  # generous for a loaded CI machine; a start takes about 1 s
STOP_SECONDS: Final = 10.0
SERVING: Final = re.compile(r"^Serving site/ at (http://127\.0\.0\.1:\d+)/ ", re.MULTILINE)
# Where a build takes its base URL from: a developer's shell or CI may set any of them.
BASE_URL_VARIABLES: Final = ("BASE_URL", "CONTEXT", "URL", "DEPLOY_PRIME_URL")


@dataclass(frozen=True)
class Served:
    """A running server: where it answers, the folder it serves, and its log."""

    address: str  # such as http://127.0.0.1:41234, without a trailing slash
    folder: Path  # holds ratings.yaml and site/
    log: Path  # its stdout and stderr: the build's summary, then a line per request

    @property
    def site(self) -> Path:
        return self.folder / "site"


def hermetic_environ() -> dict[str, str]:
    """This environment without the variables a build takes its base URL from."""
    return {name: value for name, value in os.environ.items() if name not in BASE_URL_VARIABLES}


@contextmanager
def serving(folder: Path, ratings: str, *options: str) -> Iterator[Served]:
    """Write ``ratings`` to ``folder/ratings.yaml`` and serve its site until the block ends."""
    (folder / "ratings.yaml").write_text(ratings, encoding="utf-8")
    log = folder / "serve.log"
    command = [
        sys.executable, "-W", "error", str(REPO / "generate.py"), "--serve", "--port", "0", *options,
    ]
    with open(log, "wb") as output:
        process = subprocess.Popen(
            command, cwd=folder, stdout=output, stderr=subprocess.STDOUT, env=hermetic_environ(),
            # Ctrl-C as in a terminal, even when the tests run in a background
            # job, whose children start with SIGINT ignored.
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
    try:
        yield Served(_address(log, process), folder, log)
    finally:
        _stop(process)


def _address(log: Path, process: subprocess.Popen[bytes]) -> str:
    deadline = time.monotonic() + READY_SECONDS
    while True:
        text = log.read_text(errors="replace")
        found = SERVING.search(text)
        if found:
            return found[1]
        if process.poll() is not None:
            raise AssertionError(f"the server exited with {process.returncode}:\n{text}")
        if time.monotonic() > deadline:
            raise AssertionError(f"not serving within {READY_SECONDS} s:\n{text}")
        time.sleep(0.02)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGINT)  # how --serve is meant to stop: it finishes a rebuild
        try:
            process.wait(STOP_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
