"""A real ``python generate.py --serve`` on 127.0.0.1, on a port of the system's choosing,
started and awaited by the contract suite's own helpers, and stopped as ``--serve`` is
meant to stop: SIGINT (it finishes a rebuild)."""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.contract import hermetic_environ, start, stop, wait_for
from tests.hosts import SERVING, serve_command

__all__ = ["Served", "hermetic_environ", "serving"]


@dataclass(frozen=True)
class Served:
    """A running server: where it answers, the folder it serves, its log and its process."""

    address: str  # such as http://127.0.0.1:41234, without a trailing slash
    site: Path  # in the folder that holds ratings.yaml
    log: Path  # its stdout and stderr: the build's summary, then a line per request
    process: subprocess.Popen[bytes]


@contextmanager
def serving(
    folder: Path, ratings: str, *options: str, command: Callable[..., list[str]] = serve_command
) -> Iterator[Served]:
    """Write ``ratings`` to ``folder/ratings.yaml`` and serve its site until the block ends.

    ``command`` makes the server's command line from ``options``.
    """
    (folder / "ratings.yaml").write_text(ratings, encoding="utf-8")
    log = folder / "serve.log"
    process = start(command(*options), folder, log)
    try:
        port = wait_for(SERVING, log, process)[1]
        yield Served(f"http://127.0.0.1:{port}", folder / "site", log, process)
    finally:
        stop(process, signal.SIGINT)
