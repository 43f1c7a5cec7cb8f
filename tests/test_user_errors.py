"""Whatever a user can get wrong ends in one line on stderr and exit 2, never a traceback
(--serve's watcher, which survives a failed rebuild: tests/test_serve.py)."""

from __future__ import annotations

import http.server
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Final

import pytest

from ratings_api.cli import main
from tests.contract import READY_SECONDS, hermetic_environ

ROOT: Final = Path(__file__).resolve().parent.parent
GOOD: Final = "articles:\n  7: [5]\n"
UNREADABLE: Final = "the base URL cannot be read as a URL"
UNCAST: Final = "Port could not be cast to integer value as 'http'"


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


# Each mistake: the options, and the one line it gets (with ratings.yaml holding GOOD,
# but where FILES and ENVIRON say otherwise; {port}: one the test holds).
# docs/troubleshooting.md shows each line with its fix, at port 8000 (tests/docs_pages.py).
MISTAKES: Final[dict[str, tuple[list[str], str]]] = {
    **{
        name: (["--base-url", url], f"--base-url: {UNREADABLE} ({reason}), found '{url}'")
        for name, url, reason in [
            ("ipv6-unclosed", "http://[::1", "Invalid IPv6 URL"),
            ("port-out-of-range", "https://x.example:99999", "Port out of range 0-65535"),
            ("port-not-a-number", "https://x.example:http", UNCAST),
        ]
    },
    "port-0": (
        ["--base-url", "https://x.example:0"],
        (
            "--base-url: the base URL's port must be a number from 1 to 65535, "
            "found 'https://x.example:0'"
        ),
    ),
    "ipv6-variable": (
        [],
        f"BASE_URL (environment): {UNREADABLE} (Invalid IPv6 URL), found 'http://[fe80::1%eth0'",
    ),
    "ipv6-in-the-file": (
        [],
        f"ratings.yaml:1:11: base_url: {UNREADABLE} (Invalid IPv6 URL), found 'http://[::1'",
    ),
    **{
        f"input-{case}": (["--input", name], f"{name}: cannot read: {reason}")
        for case, name, reason in [
            ("a-folder", ".", "Is a directory"),
            ("missing", "missing.yaml", "No such file or directory"),
            ("a-symlink-loop", "loop.yaml", "Too many levels of symbolic links"),
            ("a-socket", "socket.yaml", "No such device or address"),
            ("unreadable", "/proc/self/mem", "Input/output error"),
            ("name-too-long", "x" * 300, "File name too long"),
        ]
    },
    "scale-with-yaml": (
        ["--scale", "1..5"],
        "--scale goes only with a CSV input: a YAML input sets scale in the file",
    ),
    "csv-no-base-url": (
        ["--format", "csv"],
        (
            "no base URL to build article_url from: set the BASE_URL environment variable, "
            "or --base-url"
        ),
    ),
    "output-a-file": (["--output", "ratings.yaml"], "ratings.yaml: cannot write: Not a directory"),
    # With --check, which would write nothing had it been taken.
    "output-the-root": (
        ["--output", "/", "--check", "--base-url", "https://x.example"],
        "/: the root of the file system cannot be the output folder",
    ),
    "serve-port-out-of-range": (
        ["--serve", "--port", "70000"],
        "--port 70000: a port is a number from 0 to 65535",
    ),
    "serve-host-idna": (
        ["--serve", "--host", "bücher..example", "--port", "0"],
        "--host bücher..example: not a host name (label empty or too long)",
    ),
    "serve-bad-host": (
        ["--serve", "--host", "no such host", "--port", "0"],
        "cannot serve at no such host:0: Name or service not known",
    ),
    "serve-port-in-use": (
        ["--serve", "--port", "{port}"],
        "cannot serve at 127.0.0.1:{port}: Address already in use",
    ),
    # --serve starts from a good build or not at all.
    "serve-input-missing": (
        ["--serve", "--port", "0", "--input", "missing.yaml"],
        "missing.yaml: cannot read: No such file or directory",
    ),
}
ENVIRON: Final = {"ipv6-variable": {"BASE_URL": "http://[fe80::1%eth0"}}
FILES: Final = {
    "ipv6-in-the-file": "base_url: 'http://[::1'\n" + GOOD,
    "output-a-file": "base_url: https://x.example\n" + GOOD,
    "csv-no-base-url": "article_id,rating\n7,5\n",
}


SCALE: Final = "argument --scale: expected LOW..HIGH, integers, low < high, found '{}'"
WHOLE: Final = "argument {}: expected a whole number{}, found '{}'"
# Each option misused, as typed, and the line after argparse's usage and "generate.py: error: ".
MISUSED: Final = {
    "--check --serve": "--check and --serve do not go together",
    "--serve --publish s3://b/p": "--publish and --serve do not go together",
    "--serve --input -": "--serve watches a file: it cannot serve standard input (--input -)",
    **{f"--scale {value}": SCALE.format(value) for value in ("1-5", "5..1", "10..9", "1..x")},
    **{
        f"{option} {value}": WHOLE.format(option, within, value)
        for option, value, within in [
            ("--publish-workers", "0", " from 1 to 256"),
            ("--publish-workers", "3000000", " from 1 to 256"),
            ("--publish-workers", "two", ""),
            ("--publish-workers", "-1", ""),
            # Digits, but not ASCII ones: int() refuses some and reads others.
            ("--max-removals", "²", ""),
            ("--lock-timeout", "٣", ""),
            ("--port", "\uff18\uff10\uff10\uff10", ""),  # fullwidth 8000
        ]
    },
}


@pytest.mark.parametrize("name", [*MISTAKES, *MISUSED])
def test_a_user_mistake_is_one_line_and_exit_2(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An option misused: argparse's usage first."""
    args, message = MISTAKES.get(name) or (name.split(" "), MISUSED[name])
    (tmp_path / "ratings.yaml").write_text(FILES.get(name, GOOD), encoding="utf-8")
    os.symlink("loop.yaml", tmp_path / "loop.yaml")
    monkeypatch.chdir(tmp_path)
    for variable, value in ENVIRON.get(name, {}).items():
        monkeypatch.setenv(variable, value)
    with socket.socket(socket.AF_UNIX) as listening, socket.socket() as taken:
        listening.bind("socket.yaml")
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        try:
            code = main([arg.replace("{port}", port) for arg in args])
        except SystemExit as exit:  # argparse's
            code = exit.code
    out, err = capsys.readouterr()
    said = err if name in MISTAKES else err.rpartition("generate.py: error: ")[2]
    assert (code, out, said) == (2, "", message.replace("{port}", port) + "\n")
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

    def log_message(self, format: str, *args: object) -> None:
        del format, args


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
