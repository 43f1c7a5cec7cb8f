"""A real PostgreSQL server for the tests: Debian's postgresql, on 127.0.0.1 and a free port.

Its cluster is made by initdb in a folder of its own, trusted on loopback, and the
server is stopped by an immediate shutdown, waited for until it has exited. PostgreSQL
refuses to run as root: as root, the cluster and the server belong to ``nobody``.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from tests.objectstore import free_port

USER: Final = "postgres"  # the cluster's superuser, as on a Debian server
START_TIMEOUT: Final = 60.0
STOP_TIMEOUT: Final = 30.0
UTF8: Final = ("--encoding=UTF8", "--locale=C")
# On loopback only; no Unix socket (its default folder is the system server's); no
# fsync, as the data is thrown away.
SETTINGS: Final = (
    *("-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories="),
    *("-c", "fsync=off"),
)


@dataclass
class Postgres:
    """A running server: its folder, port and process."""

    folder: Path
    port: int
    process: subprocess.Popen[bytes]

    def environ(self) -> dict[str, str]:
        """The variables that point psql, and any libpq client, at this server."""
        return {"PGHOST": "127.0.0.1", "PGPORT": str(self.port), "PGUSER": USER}

    def psql(self, *args: str, database: str = USER) -> str:
        """psql's output for ``args``, run against ``database``; AssertionError if it fails."""
        done = subprocess.run(
            [
                str(_binary("psql")),
                "--no-psqlrc",
                "--set",
                "ON_ERROR_STOP=1",
                "-d",
                database,
                *args,
            ],
            env={**os.environ, **self.environ()},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    def stop(self) -> None:
        """An immediate shutdown (SIGQUIT: no checkpoint, the data is thrown away), waited
        for until the server and its children have exited; then the folder goes."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGQUIT)
        self.process.wait(timeout=STOP_TIMEOUT)
        shutil.rmtree(self.folder, ignore_errors=True)


def _binary(name: str) -> Path:
    """A program of the newest PostgreSQL Debian installed, looked for when needed: the
    tests install it (scripts/install-test-tools) after this module is imported."""
    folders = sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: int(p.parent.name))
    if not folders:
        raise AssertionError("no /usr/lib/postgresql/*/bin: run scripts/install-test-tools")
    return folders[-1] / name


def start_postgres() -> Postgres:
    """initdb a cluster in a new folder, start its server, and wait until it answers."""
    # Not under pytest's tmp folders: those are root's alone, and nobody must own this one.
    # In memory where the machine has it, as the tests' own (conftest.py).
    memory = "/dev/shm" if os.path.isdir("/dev/shm") else None
    folder = Path(tempfile.mkdtemp(prefix="ratings-postgres-", dir=memory))
    owner = "nobody" if os.geteuid() == 0 else None
    if owner is not None:
        shutil.chown(folder, owner)
    data, log = folder / "data", folder / "server.log"
    subprocess.run(
        [str(_binary("initdb")), "-D", str(data), "-U", USER, "--auth=trust", "--no-sync", *UTF8],
        user=owner,
        cwd=folder,  # a folder its owner may enter, whoever runs the tests
        capture_output=True,
        timeout=120,
        check=True,
    )
    port = free_port()
    with log.open("wb") as output:
        process = subprocess.Popen(
            [str(_binary("postgres")), "-D", str(data), "-p", str(port), *SETTINGS],
            user=owner,
            cwd=folder,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    server = Postgres(folder, port, process)
    _wait_ready(server, log)
    return server


def _wait_ready(server: Postgres, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        done = subprocess.run(
            [str(_binary("pg_isready")), "-h", "127.0.0.1", "-p", str(server.port), "-U", USER],
            capture_output=True,
            timeout=30,
            check=False,
        )
        if done.returncode == 0:
            return
        if server.process.poll() is not None or time.monotonic() > deadline:
            said = log.read_text(errors="replace")
            server.stop()
            raise AssertionError(f"PostgreSQL did not start:\n{said}")
        time.sleep(0.1)
