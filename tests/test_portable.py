"""The generator runs where the docs say: every system call it makes exists on macOS too.

No Mac runs these tests. What this machine can show: the calls the package
makes are all on a list of calls macOS has (the Python docs' "Availability"
notes; a new call fails the audit until it is looked up), and a build, a
``--check``, a ``--jobs 2`` build and ``--serve`` answering a request all
work in a fresh interpreter from which the names macOS's Python lacks have
been taken out (as the Windows test in test_packaging.py does in-process),
with pipes as small as macOS's and its open(2) error for a symlink.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Final

import pytest

from ratings_api.build import build
from ratings_api.workers import cgroup_cpus, process_cpus
from tests.contract import READY_SECONDS, REPO, hermetic_environ, request
from tests.served import serving
from tests.trees import read_tree, tree_diff

MODULES: Final = ("os", "signal", "fcntl", "mmap", "select", "socket", "time")
# Every name the package reads from those modules directly, each available on
# Linux and macOS alike (the docs say "Unix", or nothing, and macOS has the call).
PORTABLE: Final = {
    "os": {
        *("O_CLOEXEC", "O_CREAT", "O_DIRECTORY", "O_EXCL", "O_NOFOLLOW"),
        *("O_RDONLY", "O_RDWR", "O_WRONLY", "WIFSIGNALED", "WTERMSIG", "_exit", "close"),
        *("cpu_count", "environ", "fdopen", "fork", "fstat", "ftruncate", "getpid"),
        *("getppid", "kill", "lstat", "makedirs", "mkdir", "open", "path", "pipe", "pread"),
        *("pwrite", "read", "replace", "rmdir", "scandir", "stat", "stat_result"),
        *("strerror", "supports_dir_fd", "unlink", "waitpid", "waitstatus_to_exitcode"),
        "write",
    },
    "signal": {
        *("SIGINT", "SIGKILL", "SIGTERM", "SIG_BLOCK", "SIG_DFL", "SIG_SETMASK", "Signals"),
        *("SIG_IGN", "getsignal", "pthread_sigmask", "raise_signal", "signal"),
    },
    "fcntl": {"LOCK_EX", "LOCK_NB", "LOCK_SH", "flock"},
    "mmap": {"mmap"},
    "select": {"select"},
    "time": {"monotonic", "perf_counter"},
}
# Names read only through getattr or hasattr, each with its fallback where it is missing.
WITH_FALLBACK: Final = {
    ("os", "process_cpu_count"),  # Python 3.13: else sched_getaffinity, else cpu_count
    ("os", "sched_getaffinity"),  # Linux only: else cpu_count
}
# Names this Python has on Linux that macOS's lacks: the docs say "Availability:
# Linux" (or Linux and some BSDs), or the call is one macOS's C library has not.
NOT_ON_MACOS: Final = {
    "os": (
        *("sched_getaffinity", "sched_setaffinity", "sched_getscheduler"),
        *("sched_setscheduler", "sched_getparam", "sched_setparam", "sched_rr_get_interval"),
        *("posix_fallocate", "posix_fadvise", "pipe2", "memfd_create", "eventfd"),
        *("eventfd_read", "eventfd_write", "splice", "copy_file_range", "getrandom"),
        *("pidfd_open", "getresuid", "getresgid", "setresuid", "setresgid", "getxattr"),
        *("setxattr", "listxattr", "removexattr", "O_PATH", "O_TMPFILE", "O_DIRECT"),
        *("O_NOATIME", "O_LARGEFILE", "RWF_HIPRI", "RWF_NOWAIT", "RWF_DSYNC", "RWF_SYNC"),
        "RWF_APPEND",
    ),
    "signal": (
        *("SIGRTMIN", "SIGRTMAX", "SIGPWR", "SIGSTKFLT", "SIGCLD", "SIGPOLL"),
        *("sigtimedwait", "sigwaitinfo", "pidfd_send_signal"),
    ),
    "fcntl": (
        *("F_GETPIPE_SZ", "F_SETPIPE_SZ", "F_OFD_GETLK", "F_OFD_SETLK", "F_OFD_SETLKW"),
        *("F_ADD_SEALS", "F_GET_SEALS", "F_SEAL_SEAL", "F_NOTIFY", "F_SETLEASE"),
        *("F_GETLEASE", "F_SETSIG", "F_GETSIG", "LOCK_MAND"),
    ),
    "mmap": (
        *("MAP_POPULATE", "MAP_DENYWRITE", "MAP_EXECUTABLE", "MAP_STACK", "MADV_DONTFORK"),
        *("MADV_DOFORK", "MADV_HUGEPAGE", "MADV_NOHUGEPAGE", "MADV_REMOVE", "MADV_HWPOISON"),
        *("MADV_MERGEABLE", "MADV_UNMERGEABLE", "MADV_DONTDUMP", "MADV_DODUMP"),
    ),
    "select": (
        *("epoll", "EPOLLIN", "EPOLLOUT", "EPOLLEXCLUSIVE", "EPOLLRDHUP", "EPOLLET"),
        *("EPOLLONESHOT", "EPOLL_CLOEXEC"),
    ),
    "socket": (
        *("SOCK_CLOEXEC", "SOCK_NONBLOCK", "SO_BINDTODEVICE", "TCP_QUICKACK", "TCP_CORK"),
        *("TCP_USER_TIMEOUT", "AF_PACKET", "AF_NETLINK", "SO_PEERCRED"),
    ),
    "time": ("CLOCK_BOOTTIME", "CLOCK_TAI"),
}
# What a fresh interpreter takes out or changes before it runs a script: macOS's
# Python, without the names above, with two things of macOS's kernel (pipes that
# hold 16 KiB before they grow, where Linux's hold 64 KiB; open(2) refusing a symlink
# with O_NOFOLLOW as ELOOP even with O_DIRECTORY, where Linux says ENOTDIR), and
# counting the writer processes it forks.
MACOS: Final = """\
import atexit, errno, fcntl, importlib, os, stat, sys
pipe, shrink = os.pipe, getattr(fcntl, "F_SETPIPE_SZ", None)
def macos_pipe():
    fds = pipe()
    if shrink is not None:
        fcntl.fcntl(fds[1], shrink, 16384)
    return fds
os.pipe = macos_pipe
open_ = os.open
def macos_open(path, flags, mode=0o777, *, dir_fd=None):
    if flags & os.O_NOFOLLOW:
        try:
            link = stat.S_ISLNK(os.stat(path, dir_fd=dir_fd, follow_symlinks=False).st_mode)
        except OSError:
            link = False
        if link:
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), path)
    return open_(path, flags, mode, dir_fd=dir_fd)
os.open = macos_open
os.supports_dir_fd.add(macos_open)
for module, names in {names!r}.items():
    for name in names:
        if hasattr(importlib.import_module(module), name):
            delattr(importlib.import_module(module), name)
forks, fork = [], os.fork
def counted_fork():
    pid = fork()
    if pid:
        forks.append(pid)
    return pid
os.fork = counted_fork
atexit.register(lambda: print(f"writer processes forked: {{len(forks)}}", file=sys.stderr))
"""
# Then the script (generate.py) as `python SCRIPT` runs it, with the arguments after -c.
RUN: Final = """\
import runpy, sys
sys.path.insert(0, {repo!r})
sys.argv[0] = {script!r}
runpy.run_path({script!r}, run_name="__main__")
"""
# Every batch number a pipe may have to hold, handed out to two writers.
EVERY_BATCH: Final = """\
from ratings_api.workers import PIPE_TOKENS, run_processes
def work(number, next_batch):
    taken = []
    while (batch := next_batch()) is not None:
        taken.append(batch)
    return taken
taken = run_processes(2, PIPE_TOKENS, work, lambda: None, 1.0, "site")
print(PIPE_TOKENS, sorted(taken[0] + taken[1]) == list(range(PIPE_TOKENS)))
"""
ARTICLES: Final = range(1, 601)  # over two batches of 256: a build forks a writer for each


def used_names() -> tuple[dict[str, set[str]], set[tuple[str, str]]]:
    """The names the package reads from MODULES: directly, and through getattr/hasattr."""
    direct: dict[str, set[str]] = {}
    guarded: set[tuple[str, str]] = set()
    for path in [*sorted((REPO / "ratings_api").glob("*.py")), REPO / "generate.py"]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in MODULES
            ):
                direct.setdefault(node.value.id, set()).add(node.attr)
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "hasattr")
                and isinstance(node.args[0], ast.Name)
                and node.args[0].id in MODULES
                and isinstance(node.args[1], ast.Constant)
            ):
                guarded.add((node.args[0].id, node.args[1].value))
    return direct, guarded


def pairs(names: Mapping[str, Iterable[str]]) -> set[tuple[str, str]]:
    return {(module, name) for module, listed in names.items() for name in listed}


def test_every_call_the_package_makes_is_one_macos_has() -> None:
    direct, guarded = used_names()

    used, listed = pairs(direct), pairs(PORTABLE)
    # A new name: look up its availability in the Python docs, then list it.
    assert (used - listed, listed - used) == (set(), set())
    assert guarded == WITH_FALLBACK
    missing = pairs(NOT_ON_MACOS)
    assert not listed & missing
    assert {("os", "sched_getaffinity"), ("os", "O_PATH")} <= missing  # the fallbacks run


def python(setup: str, *args: str, script: Path = REPO / "generate.py") -> list[str]:
    """A fresh interpreter that runs ``setup``, then ``script`` with ``args``."""
    code = setup + RUN.format(repo=str(REPO), script=str(script))
    return [sys.executable, "-W", "error", "-c", code, *args]


def macos_command(*args: str, script: Path = REPO / "generate.py") -> list[str]:
    names = {module: list(names) for module, names in NOT_ON_MACOS.items()}
    return python(MACOS.format(names=names), *args, script=script)


def macos_serve(*options: str) -> list[str]:
    return macos_command("--serve", "--port", "0", *options)


def run(command: list[str], folder: Path) -> tuple[int, str, str]:
    done = subprocess.run(
        command,
        cwd=folder,
        capture_output=True,
        text=True,
        env=hermetic_environ(),
        timeout=READY_SECONDS,
        check=False,  # the exit code is asserted
    )
    return done.returncode, done.stdout, done.stderr


def run_macos(
    folder: Path, *args: str, script: Path = REPO / "generate.py"
) -> tuple[int, str, str]:
    return run(macos_command(*args, script=script), folder)


def ratings(folder: Path, rating: int) -> Path:
    articles = "".join(f"  {n}: [{rating}]\n" for n in ARTICLES)
    path = folder / "ratings.yaml"
    path.write_text(
        f"base_url: https://ratings.example.com\nscale: [1, 5]\narticles:\n{articles}",
        encoding="utf-8",
    )
    return path


def built_elsewhere(tmp_path: Path, input_path: Path) -> dict[str, bytes]:
    expected = tmp_path / "expected"
    build(str(input_path), str(expected), base_url=None, environ={})
    return read_tree(expected)


def default_writers() -> int:
    """The writers a build of ARTICLES forks without sched_getaffinity: by cpu_count and quota."""
    quota = cgroup_cpus()
    cpus = min(os.cpu_count() or 1, quota if quota is not None else sys.maxsize, 3)
    return cpus if cpus > 1 else 0  # one writer writes in-process


def test_build_check_jobs_and_serve_without_what_macos_lacks(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    first = built_elsewhere(tmp_path / "first", ratings(project, 4))

    code, out, err = run_macos(project)
    assert (code, err) == (0, f"writer processes forked: {default_writers()}\n")
    assert out.startswith("built site: 600 articles; files: 608 written, 0 removed, 0 unchanged")
    assert read_tree(project / "site") == first, tree_diff(read_tree(project / "site"), first)

    assert run_macos(project, "--check") == (
        0,
        "site is up to date: 600 articles\n",
        f"writer processes forked: {default_writers()}\n",
    )

    second = built_elsewhere(tmp_path / "second", ratings(project, 2))
    code, out, err = run_macos(project, "--jobs", "2")
    assert (code, err) == (0, "writer processes forked: 2\n")
    assert out.startswith("built site: 600 articles; files: 602 written, 0 removed, 6 unchanged")
    assert read_tree(project / "site") == second, tree_diff(read_tree(project / "site"), second)

    text = (project / "ratings.yaml").read_text(encoding="utf-8")
    with serving(project, text, command=macos_serve) as served:
        port = int(served.address.rsplit(":", 1)[1])
        reply = request(port, "GET", "/away/api/articles/7/rating/")
    assert reply.status == 200
    assert reply.headers["Content-Type"] == "application/json"
    assert reply.body == second["away/api/articles/7/rating/index.json"]


def test_every_batch_fits_in_a_macos_pipe_before_a_writer_reads(tmp_path: Path) -> None:
    # All are written before the first writer is forked: one more would wait for ever.
    script = tmp_path / "every_batch.py"
    script.write_text(EVERY_BATCH, encoding="utf-8")

    assert run_macos(tmp_path, script=script) == (
        0,
        "4096 True\n",
        "writer processes forked: 2\n",
    )


@pytest.mark.parametrize(
    "link",
    [".site.generate", "site/away", "site/away/api/articles/7"],
    ids=["state", "away", "article"],
)
def test_a_linked_folder_is_named_as_on_linux(tmp_path: Path, link: str) -> None:
    ratings(tmp_path, 4)
    (tmp_path / "outside").mkdir()
    (tmp_path / link).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / link).symlink_to(tmp_path / "outside")
    # The state folder is shown by its real path, the site's files as the user named them.
    shown = tmp_path / link if link.startswith(".") else link

    assert run_macos(tmp_path, "--quiet") == (
        2,
        "",
        (
            f"{shown}: is a symbolic link: the build follows none where it writes; remove it\n"
            "writer processes forked: 0\n"
        ),
    )
    assert not any((tmp_path / "outside").iterdir())


@pytest.mark.parametrize(
    ("present", "expected"),
    [
        ({"process_cpu_count": lambda: 3, "sched_getaffinity": lambda _: {0}}, 3),
        ({"process_cpu_count": lambda: None}, 1),
        ({"sched_getaffinity": lambda _: {0, 5}}, 2),
        ({}, os.cpu_count() or 1),
    ],
    ids=["python-3.13", "undetermined", "linux-before-3.13", "macos-before-3.13"],
)
def test_the_cpus_come_from_what_the_system_offers(
    monkeypatch: pytest.MonkeyPatch, present: dict[str, object], expected: int
) -> None:
    for name in ("process_cpu_count", "sched_getaffinity"):
        monkeypatch.delattr(os, name, raising=False)
    for name, call in present.items():
        monkeypatch.setattr(os, name, call, raising=False)

    assert process_cpus() == expected


@pytest.mark.parametrize(
    ("proc", "files"),
    [
        ("not a cgroup line\n0::/ci\n", {"ci/cpu.max": "max 100000\n"}),
        ("0::/ci\n", {"ci/cpu.max": "lots 100000\n"}),
        ("3:cpu:/ci\n", {"cpu/ci/cpu.cfs_quota_us": "x\n", "cpu/ci/cpu.cfs_period_us": "1\n"}),
    ],
    ids=["no-colons", "v2-not-a-number", "v1-not-a-number"],
)
def test_a_cgroup_file_not_as_linux_writes_it_is_no_quota(
    tmp_path: Path, proc: str, files: dict[str, str]
) -> None:
    for name, text in files.items():
        (tmp_path / "cgroup" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "cgroup" / name).write_text(text)
    (tmp_path / "self-cgroup").write_text(proc)

    assert cgroup_cpus(str(tmp_path / "self-cgroup"), str(tmp_path / "cgroup")) is None
