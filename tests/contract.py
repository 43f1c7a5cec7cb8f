"""The HTTP contract's points (POINTS, with the app's answer) and each host's ``Difference`` on
one and why, both read from tests/contract-table.txt; processes, a client, the tables."""

from __future__ import annotations

import contextlib
import http.client
import io
import os
import re
import signal
import socket
import subprocess
import tempfile
import time
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NamedTuple, TypeVar
from wsgiref.util import setup_testing_defaults

from filelock import FileLock

from ratings_api.contract import CACHE_CONTROL
from ratings_api.contract import NOT_FOUND as NOT_FOUND  # test_serve.py imports it here

if TYPE_CHECKING:
    from wsgiref.types import WSGIApplication

T = TypeVar("T")
REPO: Final = Path(__file__).resolve().parent.parent
# A start takes 1 to 7 s on a quiet machine; netlify dev took 20 to 38 s on a shared
# 2-core one at a load of 6 to 7.
READY_SECONDS: Final = 90.0
STOP_SECONDS: Final = 10.0
REQUEST_SECONDS: Final = 10.0
HEAD_SECONDS: Final = 0.2  # a body sent after HEAD's headers would follow them at once
SECRET: Final = b"the file next to the site, which no URL may reach"

RATINGS: Final = """\
scale: [1, 5]
articles:
  1: [4, 5, 3, 4]
  7: [5, 4, 5, 5, 5, 5]
  12: {sum: 29, count: 6}
  31: []
  1000000: [5]
"""
ARTICLES: Final = (1, 7, 12, 31, 1000000)
# Files a user keeps in the site folder, served by the same safe lookup.
USER_FILES: Final = {
    "CNAME": b"ratings.example.com\n",
    "robots.txt": b"User-agent: *\n",
    "about/index.html": b"<!doctype html><title>About</title>\n",
    ".hidden": b"not for the web\n",
}
# Symlinks a site may hold, by mistake or by someone with write access to it:
# the file a URL names is served only if no symlink leads to it.
SYMLINKS: Final = {
    "system": "/etc",  # not "etc": the traversal checks ask for /etc/passwd
    "secret-link.txt": "../secret.txt",
    "robots-link.txt": "robots.txt",
    "mirror": "away",
    "loop": "loop",
}

NOT_RUN: Final = "not run here"  # a point no host here decides (CloudFront's)
NOT_RUN_WHY: Final = (
    "CloudFront and S3 cannot run here: the function is run in node on each request as "
    "CloudFront would pass it, and what it sends on reaches the site's folder as the bucket "
    "(tests/hosts.py); the headers S3 and CloudFront add, their ranges and conditions and "
    "CloudFront's own reading of a request are not measured"
)


@dataclass(frozen=True)
class Difference:
    """A host's documented answer on a point, and why it answers so."""

    value: object
    why: str


def value(text: str) -> object:
    """A cell of tests/contract-table.txt: a status code, or words (the contract's value named)."""
    return int(text) if text.isdigit() else text.replace("{CACHE_CONTROL}", CACHE_CONTROL)


def data_lines(path: Path) -> list[str]:
    """The lines of one of the tests' data files that hold data: a row (``a | b``) or a
    section's heading (``[name]``), not a blank line or a comment (``#``)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [line for line in lines if line and not line.startswith("#")]


def read_table() -> dict[str, dict[str, list[str]]]:
    """tests/contract-table.txt: each line's cells after the point (``point | value [| why]``),
    by point, under each name of its section's heading."""
    table: dict[str, dict[str, list[str]]] = {}
    names: list[str] = []
    for line in data_lines(REPO / "tests" / "contract-table.txt"):
        if line.startswith("["):
            names = line.strip("[]").split(", ")
        else:
            point, *cells = line.split(" | ")
            for name in names:
                table.setdefault(name, {})[point] = cells
    return table


TABLE: Final = read_table()
# The contract's points, in the order of tests/hosts-contract.md's table, and what the app answers.
POINTS: Final = {point: value(text) for point, (text,) in TABLE.pop("the app").items()}


def read_differences(hosts: Iterable[str]) -> dict[str, dict[str, Difference]]:
    """Where each of ``hosts`` answers otherwise than the app, and why: each a point, a value
    other than the app's, and a reason (test_docs.py holds the page rendered from them)."""
    assert set(TABLE) <= set(hosts), set(TABLE) - set(hosts)
    found: dict[str, dict[str, Difference]] = {name: {} for name in hosts}
    for name, points in TABLE.items():
        for point, (text, *why) in points.items():
            assert why or text == NOT_RUN, point  # the one reason for it: NOT_RUN_WHY
            found[name][point] = Difference(value(text), why[0] if why else NOT_RUN_WHY)
            assert found[name][point].value != POINTS[point], point
    return found


# What a host in this process answers (the app, the CloudFront function) to a method, a target
# and headers: a Reply, as a server would send it.
Answer = Callable[[str, bytes, Mapping[str, str]], "Reply"]


@dataclass
class Host:
    """A running server and what a check needs to know about it."""

    name: str
    port: int
    site: Path  # the folder served: expected bodies are read from it
    base_url: str  # the one the site was built with, in article_url
    process: subprocess.Popen[bytes] | None  # None: the app, called in this process
    log: Path
    differences: Mapping[str, Difference] = field(default_factory=dict)
    answer: Answer | None = None  # asked in this process, not over HTTP
    # Starts the same host again, in the same folder, for one that exits on a request:
    # at its next request, so that a host that exits on the suite's last point is not.
    restart: Callable[[], Host] | None = None
    # For a host that serves a bucket: publishes ``site`` again after a rebuild,
    # and returns once the host serves it (an edge may keep the old for ``stale_seconds``).
    publish: Callable[[], None] = lambda: None
    stale_seconds: float = 0.0
    # What else the host started (a store behind an edge), stopped after it.
    stop_also: Callable[[], None] = lambda: None
    # For an edge: how many reads the store behind it has answered, by its own count,
    # and the store's process (bench/hosts.py pins it to the edge's CPU).
    reads: Callable[[], int] = lambda: 0
    store: subprocess.Popen[bytes] | None = None
    # The methods it may be asked (a CloudFront distribution takes no other); None: any.
    methods: tuple[str, ...] | None = None

    def stop(self) -> None:
        """Stop the server, then what it stands in front of, waiting until they exit."""
        try:
            if self.process is not None:
                stop(self.process)
        finally:
            self.stop_also()

    def expect(self, point: str) -> object:
        """The contract's value at ``point``, or this host's documented difference."""
        difference = self.differences.get(point)
        return POINTS[point] if difference is None else difference.value

    def request(
        self,
        method: str,
        target: str | bytes,
        headers: Mapping[str, str] | None = None,
        **options: Any,
    ) -> Reply:
        """The host's answer to ``method`` on ``target``, sent byte for byte as no client would
        tidy it (a host in this process is asked directly); ``options``: request()'s."""
        target = target.encode() if isinstance(target, str) else target
        if self.answer is not None:
            return self.answer(method, target, headers or {})
        if self.restart and self.process and self.process.poll() is not None:
            fresh = self.restart()  # on a new port
            self.port, self.process, self.log = fresh.port, fresh.process, fresh.log
        return request(self.port, method, target, headers, **options)

    @property
    def address(self) -> str:
        """Where it answers over HTTP, such as http://127.0.0.1:41234 (no trailing slash)."""
        return f"http://127.0.0.1:{self.port}"

    def document(self, article_id: int) -> bytes:
        return (self.site / f"away/api/articles/{article_id}/rating/index.json").read_bytes()


# Processes


def hermetic_environ() -> dict[str, str]:
    """This environment without the variables a build takes its base URL from."""
    names = ("BASE_URL", "CONTEXT", "URL", "DEPLOY_PRIME_URL")
    return {name: value for name, value in os.environ.items() if name not in names}


def unmeasured_environ() -> dict[str, str]:
    """This environment without coverage's measurement of Python children (pyproject.toml),
    for a child that is not the code under test, that must not write coverage's data (on a
    full disk), or that a signal stops: an exception raised by the signal's handler inside
    coverage's tracer can leave its lock held, and the child hangs (seen here about once in
    ten runs on a loaded machine, never without coverage)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("COVERAGE_PROCESS_")}


def make_project(folder: Path, ratings: str = RATINGS) -> Path:
    """A ratings file, a site folder with the user's files and symlinks, a secret beside them.

    A ratings file the folder already holds is kept: a catalogue of its own (bench/hosts.py's,
    served by every host) in place of ``ratings``.
    """
    source = folder / "ratings.yaml"
    if not source.exists():
        source.write_text(ratings, encoding="utf-8")
    for name, body in USER_FILES.items():
        path = folder / "site" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)
    (folder / "secret.txt").write_bytes(SECRET)
    for name, target in SYMLINKS.items():
        os.symlink(target, folder / "site" / name)
    return source


def start(
    command: list[str], folder: Path, log: Path, environ: Mapping[str, str] | None = None
) -> subprocess.Popen[bytes]:
    with open(log, "wb") as output:
        return subprocess.Popen(
            command,
            cwd=folder,
            stdout=output,
            stderr=subprocess.STDOUT,
            env={**hermetic_environ(), **(environ or {})},
            # As in a terminal, SIGINT is Ctrl-C, even when the tests run in a
            # background job, which starts its children with SIGINT ignored.
            # No other way resets one signal in the child (restore_signals does not cover
            # SIGINT); the call takes no lock that another thread could hold at the fork.
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # noqa: PLW1509
        )


def wait_for(pattern: str, log: Path, process: subprocess.Popen[bytes]) -> re.Match[str]:
    """The first match of ``pattern`` in the server's output, within READY_SECONDS."""
    return wait_until(
        lambda: re.search(pattern, log.read_text(errors="replace"), re.MULTILINE), process, log
    )


def wait_until(condition: Callable[[], T | None], process: subprocess.Popen[bytes], log: Path) -> T:
    """``condition()``'s value once it holds, within READY_SECONDS, while ``process`` runs."""
    deadline = time.monotonic() + READY_SECONDS
    while not (value := condition()):
        assert process.poll() is None, f"exited with {process.returncode}:\n{log.read_text()}"
        assert time.monotonic() < deadline, f"not within {READY_SECONDS} s:\n{log.read_text()}"
        time.sleep(0.02)
    return value


def run_ok(command: list[str], **options: Any) -> subprocess.CompletedProcess[str]:
    """Run ``command`` (``options``: subprocess.run's) to its end; fail unless it exits with 0."""
    done = subprocess.run(command, capture_output=True, text=True, check=False, **options)
    assert done.returncode == 0, f"{command[:2]}: {done.returncode}\n{done.stdout}{done.stderr}"
    return done


def run_installer(script: Path, timeout: float) -> None:
    """Run one of scripts/install-*, one at a time across the suite's workers: two npm ci in
    one folder, or two apt-get, break each other; fail with its output if it fails."""
    with FileLock(Path(tempfile.gettempdir()) / "ratings-api-install.lock"):
        run_ok(["bash", str(script)], timeout=timeout)


def stop(process: subprocess.Popen[bytes], sig: int = signal.SIGTERM) -> None:
    """Stop ``process`` with ``sig``, and wait until it and what it started have exited.

    wrangler's workerd outlives wrangler for a moment. Any process still there
    after STOP_SECONDS is killed.
    """
    tree = process_tree(process.pid)
    process.send_signal(sig)  # none, to a process already reaped
    deadline = time.monotonic() + STOP_SECONDS
    # Gone, or a zombie (Z): exited. A zombie child of this process is reaped at the end.
    while tree := {pid for pid in tree if (stat(pid) or ["Z"])[0] != "Z"}:
        if time.monotonic() > deadline:
            for pid in tree:
                with contextlib.suppress(ProcessLookupError):  # it may exit meanwhile
                    os.kill(pid, signal.SIGKILL)
        time.sleep(0.02)
    process.wait()


def stat(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command's name (its state, its parent, ...), or
    None for a process gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None


def wait_answering(port: int) -> None:
    """Some servers listen before they can answer: wait until one does."""
    deadline = time.monotonic() + READY_SECONDS
    while True:
        try:
            request(port, "GET", "/")
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def process_tree(root: int) -> set[int]:
    """``root`` and its descendants, from /proc."""
    pids = [int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit()]
    parents = {pid: int(fields[1]) for pid in pids if (fields := stat(pid)) is not None}
    tree = {root}
    while more := {pid for pid, parent in parents.items() if parent in tree} - tree:
        tree |= more
    return tree


# A client


class Reply(NamedTuple):
    """An answer: its status, its headers in the order sent, its body."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes

    def header(self, name: str) -> str | None:
        """The header's value; a header sent twice is a failure, not a choice."""
        values = [value for sent, value in self.headers if sent.lower() == name.lower()]
        assert len(values) <= 1, f"{name} sent {len(values)} times: {values}"
        return values[0] if values else None


def request(
    port: int,
    method: str,
    target: str | bytes,
    headers: Mapping[str, str] | None = None,
    body: bytes | None = None,
    timeout: float = REQUEST_SECONDS,
    after_head: float = 0.0,
) -> Reply:
    """Send ``method`` for ``target`` exactly as given, with http.client's own headers.

    No client tidies the target up, and the answer is read as its headers frame it, so a
    server that keeps the connection open costs no time; after HEAD, whatever follows the
    headers (nothing, by HTTP) is read to the end, or for ``after_head`` seconds where the
    server keeps it open (workerd does): HEAD_SECONDS where a check asks for it.
    """
    target = target.encode() if isinstance(target, str) else target
    sent = {"Host": f"127.0.0.1:{port}", "Accept-Encoding": "identity", **(headers or {})}
    if body is not None or method in ("POST", "PUT"):
        sent["Content-Length"] = str(len(body or b""))
    lines = b"".join(f"{name}: {value}\r\n".encode() for name, value in sent.items())
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as connection:
        start = b"%s %s HTTP/1.1\r\n" % (method.encode(), target)
        connection.sendall(start + lines + b"Connection: close\r\n\r\n" + (body or b""))
        response = http.client.HTTPResponse(connection, method=method)
        try:
            response.begin()
            body = b"" if method == "HEAD" else response.read()
            if method == "HEAD" and after_head:
                connection.settimeout(after_head)
                with contextlib.suppress(TimeoutError):
                    while chunk := response.fp.read1(65536):
                        body += chunk
            return Reply(response.status, response.getheaders(), body)
        finally:
            response.close()


def call_app(
    app: WSGIApplication, method: str, target: bytes, headers: Mapping[str, str] | None = None
) -> Reply:
    """The app's answer to ``target``, called in this process as gunicorn calls it (PEP 3333)."""
    path, _, query = target.partition(b"?")
    environ = {
        "REQUEST_METHOD": method,
        "PATH_INFO": urllib.parse.unquote_to_bytes(path).decode("latin-1"),
        "QUERY_STRING": query.decode("latin-1"),
        "RAW_URI": target.decode("latin-1"),
        "wsgi.errors": io.StringIO(),
        **{
            f"HTTP_{name.upper().replace('-', '_')}": value
            for name, value in (headers or {}).items()
        },
    }
    setup_testing_defaults(environ)
    said: list[tuple[str, list[tuple[str, str]]]] = []
    chunks = app(environ, lambda status, sent, *_: said.append((status, sent)))
    body = b"".join(chunks)
    getattr(chunks, "close", lambda: None)()  # the file it read from
    return Reply(int(said[0][0].split()[0]), said[0][1], body)


# tests/hosts-contract.md's table


def cell(value: object) -> str:
    return str(value).replace("|", "\\|")


def contract_table(
    differences: Mapping[str, Mapping[str, Difference]],
    points: Iterable[str] = POINTS,
    head: str = "| contract line | the contract: the app (✓) |",
) -> str:
    """tests/hosts-contract.md's host × contract table (or ``points`` of it): ✓ where as the app."""
    hosts = list(differences)
    lines = [head + "".join(f" `{name}` |" for name in hosts), "|---|---|" + "---|" * len(hosts)]
    for point in points:
        row = [cell(differences[h][point].value) if point in differences[h] else "✓" for h in hosts]
        lines.append(f"| {cell(point)} | {cell(POINTS[point])} | " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def reasons_list(differences: Mapping[str, Mapping[str, Difference]]) -> str:
    """Why each host differs where it does: tests/hosts-contract.md's list under the table."""
    lines = []
    for host, points in differences.items():
        not_run = {d.why for d in points.values() if d.value == NOT_RUN}
        assert len(not_run) <= 1, f"{host}: one reason for the lines not run, not {not_run}"
        lines += [f"- `{host}`, every cell “{NOT_RUN}”: {why}" for why in not_run]  # one line
        lines += [
            f"- `{host}`, {point}: {difference.why}"
            for point, difference in points.items()
            if difference.value != NOT_RUN
        ]
    return "\n".join(lines) + "\n"
