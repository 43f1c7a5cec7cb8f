"""Whatever a user can get wrong ends in one line on stderr and exit 2, never a traceback
(--serve's watcher, which survives a failed rebuild: tests/test_serve.py)."""

from __future__ import annotations

import http.server
import os
import re
import shlex
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Final

import pytest

from ratings_api.cli import main, parser
from tests.contract import READY_SECONDS, data_lines, hermetic_environ

ROOT: Final = Path(__file__).resolve().parent.parent
GOOD: Final = "articles:\n  7: [5]\n"


def run(
    folder: Path,
    *args: str,
    environ: dict[str, str] | None = None,
    stdin: str = "",
    command: list[str] | None = None,
) -> tuple[int, str, str]:
    """generate.py (or ``command``) in a pipe, with ``args``: its exit code, stdout and stderr."""
    done = subprocess.run(
        [*(command or [sys.executable, "-W", "error", str(ROOT / "generate.py")]), *args],
        cwd=folder,
        input=stdin,
        capture_output=True,
        text=True,
        env={**hermetic_environ(), **(environ or {})},
        timeout=READY_SECONDS,
        check=False,
    )
    return done.returncode, done.stdout, done.stderr


USAGE: Final = "generate.py: error: "  # the start of a line argparse prints after its usage


def _mistakes() -> dict[str, tuple[list[str], str]]:
    """tests/cases/mistakes.txt, by name: each mistake's arguments and its line."""
    rows = [line.split(" | ") for line in data_lines(ROOT / "tests/cases/mistakes.txt")]
    return {name: (shlex.split(arguments), said) for name, arguments, said in rows}


EVERY_MISTAKE: Final = _mistakes()
# Those docs/troubleshooting.md shows, each with its fix (tests/docs_pages.py).
MISTAKES: Final = {name: row for name, row in EVERY_MISTAKE.items() if not row[1].startswith(USAGE)}


@pytest.mark.parametrize("name", list(EVERY_MISTAKE))
def test_a_user_mistake_is_one_line_and_exit_2(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An option argparse refuses: its usage line first."""
    words, line = EVERY_MISTAKE[name]
    monkeypatch.chdir(tmp_path)
    Path("ratings.yaml").write_text(GOOD, encoding="utf-8")
    Path("ratings.csv").write_text("article_id,rating\n7,5\n", encoding="utf-8")
    os.symlink("loop.yaml", "loop.yaml")
    with socket.socket(socket.AF_UNIX) as listening, socket.socket() as taken:
        listening.bind("socket.yaml")
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        args = [word.replace("{port}", port) for word in words]
        while args and re.match("[A-Z_]+=", args[0]):  # a variable, as a shell reads it
            monkeypatch.setenv(*args.pop(0).split("=", 1))
        try:
            code = main(args)
        except SystemExit as exit:  # argparse's
            code = exit.code
    usage = parser().format_usage() if line.startswith(USAGE) else ""
    said = usage + line.replace("{port}", port) + "\n"
    assert (code, *capsys.readouterr()) == (2, "", said)
    assert not (tmp_path / "site").exists()


# A store that answers: each request gets the status and an S3 error body whose Message
# quotes a key, which no line may show.
class _Failing(http.server.BaseHTTPRequestHandler):
    answer: tuple[int, str] = (500, "InternalError")

    def _answer(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        status, code = self.answer
        body = (
            f"<?xml version='1.0' encoding='UTF-8'?>\n<Error><Code>{code}</Code>"
            "<Message>at key v1/.ratings-api/state.gz</Message><Resource>/ratings</Resource>"
            "</Error>"
        ).encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _answer  # noqa: N815  (http.server names)


KEYS: Final = {
    "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
    "AWS_SECRET_ACCESS_KEY": "secret-4d1f",
    "AWS_REGION": "us-east-1",
}
PUBLISH: Final = ("--publish", "s3://ratings/v1")
STORE: Final = "s3://ratings/v1: http://{host}:{port}"


Answer = tuple[str, tuple[int, str] | None, str]


def answered(host: str, status: int, reason: str, code: str, verb: str = "failed") -> Answer:
    """A store at ``host`` that answers ``status`` and ``code``, and the line that says so."""
    return (host, (status, code), f"{STORE} {verb}: it answered {status} {reason} ({code})")


# id: (the store's host, its answer or None for nothing listening, the line)
STORE_ANSWERS: Final[dict[str, Answer]] = {
    "server-error": answered("127.0.0.1", 500, "Internal Server Error", "InternalError"),
    "slow-down": answered("127.0.0.1", 503, "Service Unavailable", "SlowDown"),
    "full": answered("127.0.0.1", 507, "Insufficient Storage", "XMinioStorageFull", "is full"),
    "over-quota": answered(
        "127.0.0.1", 400, "Bad Request", "XMinioAdminBucketQuotaExceeded", "is full"
    ),
    "ipv6-server-error": answered("[::1]", 500, "Internal Server Error", "InternalError"),
    "ipv6-nothing-answers": (
        "[::1]",
        None,
        "s3://ratings/v1: cannot reach http://{host}:{port} (AWS_ENDPOINT_URL)",
    ),
}


@pytest.mark.real_world
@pytest.mark.parametrize("name", list(STORE_ANSWERS))
def test_a_store_that_answered_says_what_it_answered(name: str, tmp_path: Path) -> None:
    """'cannot reach' only when nothing answered; no line quotes the answer's body."""
    host, answer, line = STORE_ANSWERS[name]
    family = {"address_family": socket.AF_INET6 if host == "[::1]" else socket.AF_INET}
    kind = type("Store", (http.server.ThreadingHTTPServer,), family)
    store = kind((host.strip("[]"), 0), type("Answer", (_Failing,), {"answer": answer}))
    port = store.server_address[1]
    if answer is None:
        store.server_close()  # the port, free: nothing answers there
    else:
        threading.Thread(target=store.serve_forever, daemon=True).start()
    (tmp_path / "ratings.yaml").write_text(GOOD, encoding="utf-8")
    environ = {**KEYS, "AWS_ENDPOINT_URL": f"http://{host}:{port}"}
    try:
        done = run(tmp_path, *PUBLISH, "--base-url", "https://x.example", environ=environ)
    finally:
        if answer is not None:
            store.shutdown()
            store.server_close()
    assert done == (2, "", line.format(host=host, port=port) + "\n")
