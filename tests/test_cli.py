"""The command line as users meet it: options, base URL, messages, docs in step."""

from __future__ import annotations

import contextlib
import os
import pty
import re
import signal
import subprocess
import sys
from pathlib import Path
from subprocess import PIPE
from typing import Final

import pytest

from ratings_api.build import Result
from ratings_api.cli import BUG, main, parser
from ratings_api.writer import Changes
from tests.contract import unmeasured_environ
from tests.test_user_errors import KEYS, PUBLISH, run
from tests.trees import documents

ROOT = Path(__file__).resolve().parent.parent


GOOD: Final = "base_url: https://example.com\narticles:\n  7: [5]\n"


NETLIFY: Final = {"CONTEXT": "production", "URL": "https://netlify.example"}
PREVIEW: Final = "https://deploy-preview-4--ratings.netlify.app"
PREVIEWS: Final = {"URL": "https://ratings.netlify.app", "DEPLOY_PRIME_URL": PREVIEW}
NO_BASE_URL: Final = (
    "ratings.yaml: no base URL to build article_url from: set base_url in ratings.yaml, "
    "the BASE_URL environment variable, or --base-url"
)


BOTH: Final = {"BASE_URL": "https://env.example", **NETLIFY}
SCHEME: Final = "the base URL must start with http:// or https://, found "
FTP: Final = "ftp://netlify.example"
# id: (base_url in the file, the environment, --base-url, the base URL built with or the error)
BASE_URLS: Final = {
    "the-option-wins": (True, BOTH, "https://option.example/", "https://option.example"),
    "the-variable-wins-over-the-file": (True, BOTH, None, "https://env.example"),
    "empty-is-unset": (True, {"BASE_URL": ""}, None, "https://file.example"),
    "the-file-wins-over-netlify": (True, NETLIFY, None, "https://file.example"),
    "netlify-production": (False, {"CONTEXT": "production", **PREVIEWS}, None, PREVIEWS["URL"]),
    "netlify-deploy-preview": (False, {"CONTEXT": "deploy-preview", **PREVIEWS}, None, PREVIEW),
    "netlify-branch-deploy": (False, {"CONTEXT": "branch-deploy", **PREVIEWS}, None, PREVIEW),
    "url-alone-is-not-netlify": (False, {"URL": "https://somewhere.example"}, None, NO_BASE_URL),
    # Each context reads one variable: the other one, set, is not taken instead.
    "production-without-url": (False, {**PREVIEWS, **NETLIFY, "URL": ""}, None, NO_BASE_URL),
    "preview-without-its-url": (
        False,
        {"CONTEXT": "deploy-preview", "DEPLOY_PRIME_URL": "", "URL": PREVIEW},
        None,
        NO_BASE_URL,
    ),
    "no-host": (False, {}, "https://", "--base-url: the base URL has no host, found 'https://'"),
    "netlify-ftp": (
        False,
        {**NETLIFY, "URL": FTP},
        None,
        f"URL (Netlify, CONTEXT=production): {SCHEME}'{FTP}'",
    ),
}


@pytest.mark.parametrize("name", list(BASE_URLS))
def test_the_base_url_comes_from_the_first_place_that_gives_one(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    in_file, environ, option, expected = BASE_URLS[name]
    base_url = "base_url: https://file.example\n" if in_file else ""
    monkeypatch.chdir(tmp_path)
    Path("ratings.yaml").write_text(f"{base_url}articles:\n  7: [5]\n")
    for variable, value in environ.items():
        monkeypatch.setenv(variable, value)

    code = main(["--base-url", option] if option else [])

    if expected.startswith("http"):
        assert code == 0
        document = Path("site/away/api/articles/7/rating/index.json").read_bytes()
        assert document.startswith(f'{{"article_url": "{expected}/away/api/articles/7/"'.encode())
    else:
        assert (code, capsys.readouterr().err) == (2, expected + "\n")
        assert not Path("site").exists()


# id: (standard input, the options besides --input -, the line on stdout or stderr)
STDIN: Final = {
    "yaml": (GOOD, [], "built site: 1 article; files: 10 written, "),
    "csv": (
        "article_id,rating\n7,5\n",
        ["--format", "csv", "--base-url", "https://x.example"],
        "built site: 1 article; files: 10 written, ",
    ),
    "a-mistake": (
        "articles:\n  7: [x]\n",
        [],
        "<stdin>:2:7: article 7: a rating must be an integer, found 'x'\n",
    ),
}


@pytest.mark.parametrize("name", list(STDIN))
def test_input_dash_reads_yaml_or_csv_from_standard_input(name: str, tmp_path: Path) -> None:
    """In a pipe: no progress, the summary or the one line of a mistake, no traceback."""
    text, options, line = STDIN[name]
    code, stdout, stderr = run(tmp_path, "--input", "-", *options, stdin=text)
    if code == 0:
        assert (stdout[: len(line)], stderr) == (line, "")
    else:
        assert (code, stdout, stderr) == (2, "", line)
    assert (tmp_path / "site/away/api/articles/7/rating/index.json").exists() == (code == 0)


def test_the_committed_site_is_up_to_date(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(ROOT)

    assert main(["--check"]) == 0, capsys.readouterr().err


def test_the_pages_show_the_help_and_a_message_as_they_are() -> None:
    """docs/cli.md shows --help; docs/input.md the message of a base URL with no host, as
    test_the_base_url_comes_from_the_first_place_that_gives_one asserts it (and every
    error of the cases is on docs/troubleshooting.md: tests/test_docs.py)."""
    assert f"```text\n{parser().format_help()}```" in (ROOT / "docs/cli.md").read_text()
    no_host = BASE_URLS["no-host"][3]
    assert f"```text\n{no_host}\n```" in (ROOT / "docs/input.md").read_text()


def test_readme_opens_with_the_two_commands_and_ci_runs_the_test_one() -> None:
    commands = re.findall(
        r"```sh\n(.*)\n```", (ROOT / "README.md").read_text().split("\n## ", 1)[0]
    )
    assert len(commands) == 2
    build, test = commands
    assert build.endswith("generate.py --serve")
    assert test.endswith("python -m pytest --real-world --cov -n 4")
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert ci[-1] == test


@pytest.mark.parametrize("how", ["progress", "quiet", "ctrl-c"])
def test_progress_shows_on_a_terminal_unless_quiet(tmp_path: Path, how: str) -> None:
    """generate.py with stderr on a pseudo-terminal: what the terminal gets, and stdout;
    Ctrl-C's line replaces the progress line, not appended to it."""
    size = 40_000 if how == "ctrl-c" else 1000
    lines = "".join(f"  {n}: [5]\n" for n in range(1, size + 1))
    (tmp_path / "ratings.yaml").write_text(f"base_url: https://example.com\narticles:\n{lines}")
    quiet = ["--quiet"] * (how == "quiet")
    command = [sys.executable, ROOT / "generate.py", "--output", "s", *quiet]
    env = unmeasured_environ() if how == "ctrl-c" else None  # stopped by a signal

    leader, follower = pty.openpty()
    with subprocess.Popen(command, cwd=tmp_path, stdout=PIPE, stderr=follower, env=env) as process:
        os.close(follower)
        chunks = []
        with contextlib.suppress(OSError):  # EIO: the process closed the terminal
            while chunk := os.read(leader, 4096):
                chunks.append(chunk)
                if how == "ctrl-c" and len(chunks) == 1:
                    process.send_signal(signal.SIGINT)
        stdout = process.communicate(timeout=60)[0]
    os.close(leader)
    terminal = b"".join(chunks)

    if how == "ctrl-c":
        said = "s: build interrupted by SIGINT; each file is whole, old or new: build again"
        assert (process.returncode, stdout) == (130, b"")
        assert terminal.endswith(f"\r\x1b[K{said} to finish\r\n\r\x1b[K".encode()), terminal
        return
    assert (process.returncode, len(documents(tmp_path / "s"))) == (0, 1000)
    if how == "quiet":
        assert (stdout, terminal) == (b"", b"")
        return
    assert stdout.startswith(b"built s: 1,000 articles; files: 1,009 written")
    assert terminal.endswith(b"\rwriting: 1,000 of 1,000 articles (100%)\r\x1b[K"), terminal
    reports = terminal.removesuffix(b"\r\x1b[K").split(b"\r")[1:]
    assert all(re.fullmatch(rb"writing: [\d,]+ of 1,000 articles \(\d+%\)", r) for r in reports)


def test_the_summary_line_belongs_to_the_build_result() -> None:
    result = Result(1_000_000, Changes(written=3, removed=1, unchanged=999_998))

    assert result.summary("site", 2.0) == (
        "built site: 1,000,000 articles; files: 3 written, 1 removed, 999,998 unchanged "
        "in 2.00 s (500,000 articles/s)"
    )
    assert Result(1, Changes()).summary("public", 0.0) == (
        "built public: 1 article; files: 0 written, 0 removed, 0 unchanged in 0.00 s (- articles/s)"
    )


# Exit codes: 0 done or current, 1 only "differs" (--check's, as a process's status:
# test_limits.py), 2 the user's mistake or the store's refusal, 3 a bug. A bug is
# injected from outside the code under test: a sitecustomize module, which the
# interpreter runs before generate.py.
SITECUSTOMIZE: Final = {
    "a-bug-of-ours": (
        "import ratings_api.writer\n"
        "def sync_site(*args, **kwargs):\n"
        "    raise RuntimeError('injected')\n"
        "ratings_api.writer.sync_site = sync_site\n"
    ),
    # A real panic of obstore's, synchronous: pyo3's PanicException, a BaseException.
    "a-panic": (
        "import os, obstore, obstore.store, ratings_api.writer\n"
        "def sync_site(*args, **kwargs):\n"
        "    os.environ['AWS_ENDPOINT_URL'] = ''\n"
        "    store = obstore.store.S3Store('b', config={'region': 'r'}, skip_signature=True)\n"
        "    obstore.get(store, 'k')\n"
        "ratings_api.writer.sync_site = sync_site\n"
    ),
    # The same panic in a publish's coroutine: pyo3-async-runtimes' RustPanic, an Exception.
    "a-panic-while-publishing": (
        "import os, obstore.store\n"
        "real = obstore.store.S3Store\n"
        "def S3Store(*args, **kwargs):\n"
        "    os.environ['AWS_ENDPOINT_URL'] = ''\n"
        "    kwargs['config'].pop('endpoint', None)\n"
        "    return real(*args, **kwargs)\n"
        "obstore.store.S3Store = S3Store\n"
    ),
}
NOWHERE: Final = {  # a publish to AWS, through a proxy that is not there: nothing answers
    **KEYS,
    "AWS_ENDPOINT_URL": "",  # what a CI variable never defined arrives as
    "HTTPS_PROXY": "http://127.0.0.1:9",
    "NO_PROXY": "",
}
# id: (options, environment, the sitecustomize, the exit code, stderr or its last line)
EXIT_CODES: Final = {
    "a-bug": ([], {}, "a-bug-of-ours", 3, "RuntimeError: injected"),
    "a-panic": ([], {}, "a-panic", 3, "pyo3_runtime.PanicException: "),
    "nothing-answers": (
        [*PUBLISH],
        NOWHERE,
        None,
        2,
        "s3://ratings/v1: cannot reach https://s3.us-east-1.amazonaws.com (AWS_ENDPOINT_URL)",
    ),
    "a-panic-while-publishing": (
        [*PUBLISH],
        NOWHERE,
        "a-panic-while-publishing",
        3,
        "pyo3_async_runtimes.RustPanic: rust future panicked: unknown error",
    ),
}


@pytest.mark.parametrize("name", list(EXIT_CODES))
def test_each_exit_code_means_one_thing(name: str, tmp_path: Path) -> None:
    options, environ, injected, code, said = EXIT_CODES[name]
    ratings = tmp_path / "ratings.yaml"
    ratings.write_text(GOOD)
    assert main(["--input", str(ratings), "--output", str(tmp_path / "site")]) == 0  # 0: built
    if injected:
        (tmp_path / "sitecustomize.py").write_text(SITECUSTOMIZE[injected])
        environ = {**environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"}

    returncode, _, stderr = run(tmp_path, *options, environ=environ)

    if code == 2:
        assert (returncode, stderr) == (2, said + "\n")
    else:  # the line first (after a panic's own report), then the traceback
        lines = stderr.splitlines()
        assert returncode == 3, stderr
        assert lines[lines.index(BUG) + 1] == "Traceback (most recent call last):", stderr
        assert lines[-1].startswith(said), stderr
