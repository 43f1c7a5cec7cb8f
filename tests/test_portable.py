"""The generator runs where the docs say: Linux, macOS and Windows.

Every name the package reads from the system's modules is on a list of names macOS has, and
the build (``--serve``: tests/test_serve.py) runs in an interpreter without what macOS's and
Windows's Pythons lack (``O_DIRECTORY``, ``O_NOFOLLOW``, ``fcntl``: Windows's
``msvcrt.locking`` is played by ``flock``).
"""

from __future__ import annotations

import ast
import fcntl
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Final

from tests.contract import READY_SECONDS, REPO
from tests.test_user_errors import run
from tests.test_writers import LINK, ratings_file
from tests.trees import build, lock_folder_of, read_tree, tree_diff

MODULES: Final = ("os", "signal", "fcntl", "mmap", "select", "socket", "time")
# Every name the package reads from those modules directly, each available on
# Linux and macOS alike (the docs say "Unix", or nothing, and macOS has the call).
# Windows lacks fcntl: build_lock.py uses it on every other system.
PORTABLE: Final = {
    "os": {
        *("O_CREAT", "O_EXCL", "O_RDONLY", "O_RDWR", "O_WRONLY"),
        *("SEEK_SET", "close", "environ", "fstat", "ftruncate", "getpid", "lseek", "lstat"),
        *("makedirs", "mkdir", "open", "path", "read", "readlink", "replace", "rmdir"),
        *("scandir", "stat", "stat_result", "strerror", "unlink", "write"),
    },
    "signal": {"SIGINT", "SIGTERM", "Signals", "getsignal", "signal"},
    "fcntl": {"LOCK_EX", "LOCK_NB", "flock"},
    "socket": {"gethostname"},  # the lock's holder, named
    # clock_gettime: Unix; lock.clock() calls it only where CLOCK_BOOTTIME (Linux) is.
    "time": {"clock_gettime", "monotonic", "perf_counter", "sleep"},
}
# Names read only through getattr or hasattr, each with its fallback where it is missing.
WITH_FALLBACK: Final = {
    ("os", "O_NOFOLLOW"),  # not on Windows: a folder is checked with lstat before a write
    ("os", "O_BINARY"),  # Windows only: elsewhere there is no text mode to leave
    ("time", "CLOCK_BOOTTIME"),  # Linux only: the monotonic clock elsewhere
}
# Names this Python has on Linux that macOS's or Windows's lacks (the docs say "Availability:
# Linux", or Linux and some BSDs, or Unix), of the kind a build could reach for.
MISSING: Final = {
    "os": (
        *("sched_getaffinity", "sched_setaffinity", "posix_fallocate", "posix_fadvise"),
        *("pipe2", "memfd_create", "eventfd", "splice", "copy_file_range", "getrandom"),
        *("pidfd_open", "getxattr", "setxattr", "O_PATH", "O_TMPFILE", "O_DIRECT"),
        *("O_NOATIME", "O_LARGEFILE", "RWF_HIPRI", "RWF_NOWAIT", "RWF_DSYNC", "RWF_SYNC"),
        *("O_DIRECTORY", "O_NOFOLLOW", "O_CLOEXEC", "O_NONBLOCK", "fork", "pread", "pwrite"),
        *("getuid", "killpg", "sync", "fchmod", "fchown", "mkfifo"),
    ),
    "signal": (
        *("SIGRTMIN", "SIGRTMAX", "SIGPWR", "sigtimedwait", "sigwaitinfo", "SIGKILL", "SIGHUP"),
        *("SIGQUIT", "pthread_sigmask", "SIG_BLOCK"),
    ),
    "select": ("epoll", "EPOLLIN", "EPOLLOUT", "EPOLLEXCLUSIVE", "EPOLLRDHUP", "EPOLLET"),
    "socket": ("SOCK_CLOEXEC", "SOCK_NONBLOCK", "SO_BINDTODEVICE", "TCP_QUICKACK", "TCP_CORK"),
    "time": ("CLOCK_BOOTTIME", "CLOCK_TAI"),
}
# What a fresh interpreter takes out before it runs generate.py, then Windows's lock played
# by flock. asyncio and subprocess are imported first: they take Windows's own paths when
# they find msvcrt.
WITHOUT: Final = """\
import errno, fcntl, importlib, os, runpy, stat, sys, types
import asyncio, subprocess
for module, names in {names!r}.items():
    for name in names:
        if hasattr(importlib.import_module(module), name):
            delattr(importlib.import_module(module), name)
flock = fcntl.flock
def locking(fd, mode, size):
    assert (mode, size, os.lseek(fd, 0, os.SEEK_CUR)) == (msvcrt.LK_NBLCK, 1, 32)
    try:
        flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise OSError(errno.EACCES, os.strerror(errno.EACCES)) from None
msvcrt = types.SimpleNamespace(locking=locking, LK_NBLCK=2)
sys.modules["msvcrt"] = msvcrt
sys.modules["fcntl"] = None  # "import fcntl" raises ImportError
os.supports_dir_fd = set()
sys.platform = "win32"
sys.path.insert(0, {repo!r})
{then}
sys.argv[0] = {script!r}
runpy.run_path({script!r}, run_name="__main__")
"""


def test_every_call_the_package_makes_is_one_macos_and_windows_have() -> None:
    """The names the package reads from MODULES: directly, and through getattr/hasattr."""
    direct: dict[str, set[str]] = {}
    guarded = set()
    for path in [*(REPO / "ratings_api").glob("*.py"), REPO / "generate.py"]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            match node:
                case ast.Attribute(value=ast.Name(id=module), attr=name) if module in MODULES:
                    direct.setdefault(module, set()).add(name)
                case ast.Call(
                    func=ast.Name(id="getattr" | "hasattr"),
                    args=[ast.Name(id=module), ast.Constant(value=str(name)), *_],
                ) if module in MODULES:
                    guarded.add((module, name))

    # A new name: look up its availability in the Python docs, then list it.
    assert (direct, guarded) == (PORTABLE, WITH_FALLBACK)
    assert [m for m, names in PORTABLE.items() if names & set(MISSING.get(m, ()))] == []


def on_windows(*args: str, then: str = "") -> list[str]:
    """generate.py in a fresh interpreter without what macOS's and Windows's Pythons lack,
    then ``args``; the code ``then`` runs just before generate.py."""
    script = str(REPO / "generate.py")
    code = WITHOUT.format(names=MISSING, repo=str(REPO), script=script, then=then)
    return [sys.executable, "-W", "error", "-c", code, *args]


def hold_lock(site: Path, pid: bytes) -> int:
    """Take the build lock of ``site`` as a build would, ``pid`` not yet written or written."""
    lock_folder_of(site).mkdir(exist_ok=True)
    fd = os.open(lock_folder_of(site) / "lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.ftruncate(fd, 0)
    os.write(fd, pid)
    return fd


def waited(tmp_path: Path, holder: bytes, *args: str) -> tuple[int, str, str]:
    """``on_windows(*args)`` in ``tmp_path``, started while ``holder`` holds site/'s build lock
    (its process id written, or not yet), released once it says it waits: as ``run`` does, its
    exit code, stdout and stderr."""
    lock = hold_lock(tmp_path / "site", holder)
    try:
        pipe = subprocess.PIPE
        process = subprocess.Popen(
            on_windows(*args), cwd=tmp_path, stdout=pipe, stderr=pipe, text=True
        )
        assert process.stderr is not None
        waiting = process.stderr.readline()
        time.sleep(0.2)
        assert process.poll() is None  # still waiting
    finally:
        os.close(lock)
    stdout, stderr = process.communicate(timeout=READY_SECONDS)
    return process.returncode, stdout, waiting + stderr


def test_the_build_runs_without_what_macos_and_windows_lack(tmp_path: Path) -> None:
    """A build waits for the build in process 4242, then builds, and --check for a build that
    has not written its process id yet, each through Windows's lock; a link is refused."""
    ratings = ratings_file(tmp_path / "ratings.yaml", range(1, 601), "https://ratings.example.com")
    assert build(ratings, tmp_path / "expected", "--quiet") == 0
    code, stdout, stderr = waited(tmp_path, b"4242\n")
    assert (code, stderr) == (0, "site: waiting for the build in process 4242 to finish\n")
    assert stdout.startswith("built site: 600 articles; files: 609 written, 0 removed, 0 unchanged")
    tree, expected = read_tree(tmp_path / "site"), read_tree(tmp_path / "expected")
    assert tree == expected, tree_diff(tree, expected)
    said = (0, "site is up to date: 600 articles\n", "site: waiting for another build to finish\n")
    assert waited(tmp_path, b"", "--check") == said
    (tmp_path / "site/away/api/articles/7").rename(tmp_path / "moved")
    (tmp_path / "site/away/api/articles/7").symlink_to(tmp_path / "moved")
    said = f"site/away/api/articles/7: {LINK}\n"
    assert run(tmp_path, command=on_windows("--check")) == (2, "", said)
