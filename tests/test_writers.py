"""The build as a neighbour: other builds, kills and interrupts, links, where its lock goes."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Final

import pytest

from tests.contract import unmeasured_environ
from tests.trees import build, document, documents, lock_folder_of, read_tree

ROOT = Path(__file__).resolve().parent.parent
OLD, NEW = "https://old.example", "https://new.example"
LINK = "is a symbolic link: the build follows none where it writes; remove it"


def ratings_file(path: Path, ids: range | list[int], base_url: str = OLD) -> Path:
    articles = "".join(f"  {n}: [{n % 5 + 1}]\n" for n in ids)
    path.write_text(f"base_url: {base_url}\nscale: [1, 5]\narticles:\n{articles}")
    return path


def generate(
    ratings: Path, site: Path, *extra: str, measured: bool = True
) -> subprocess.Popen[bytes]:
    """``python generate.py`` in a process group of its own, as a terminal starts it; not
    ``measured`` by coverage for a build that a signal stops (``unmeasured_environ``)."""
    command = [sys.executable, str(ROOT / "generate.py"), "--input", str(ratings), "--output"]
    environ = dict(os.environ) if measured else unmeasured_environ()
    pipe = subprocess.PIPE
    return subprocess.Popen(
        [*command, str(site), *extra], stdout=pipe, stderr=pipe, start_new_session=True, env=environ
    )


def test_builds_started_together_leave_one_inputs_tree(tmp_path: Path) -> None:
    """Two CI jobs on one workspace: never a mixture, never a listed article without its file."""
    inputs = [
        ratings_file(tmp_path / "a.yaml", range(1, 3001), OLD),
        ratings_file(tmp_path / "b.yaml", range(1000, 4001), NEW),
    ]
    expected = []
    for number, ratings in enumerate(inputs):
        assert build(ratings, tmp_path / f"expected-{number}") == 0
        expected.append(read_tree(tmp_path / f"expected-{number}"))
    site = tmp_path / "site"
    for turn in (inputs, inputs[::-1]):
        processes = [generate(ratings, site, "--quiet") for ratings in turn]
        assert [process.communicate(timeout=60) for process in processes] == [(b"", b"")] * 2
        assert read_tree(site) in expected  # the tree of the one that took the lock second


# SIGKILL: no last word, whatever was renamed into place stays. Ctrl-C: the terminal signals
# the whole process group. SIGTERM (kill PID, a CI timeout): the build's own process only.
@pytest.mark.parametrize(
    "number", [signal.SIGKILL, signal.SIGINT, signal.SIGTERM], ids=["kill", "ctrl-c", "sigterm"]
)
def test_a_stopped_build_stops_at_once_and_leaves_whole_documents(
    tmp_path: Path, number: signal.Signals
) -> None:
    site, ratings = tmp_path / "site", ratings_file(tmp_path / "ratings.yaml", range(1, 6001))
    assert build(ratings, site) == 0
    ratings_file(ratings, range(1, 6001), NEW)
    old = documents(site)
    process = generate(ratings, site, measured=False)
    # Stopped once it has rewritten some documents, but not all (it goes in order).
    while OLD.encode() in (site / document(200)).read_bytes() and process.poll() is None:
        time.sleep(0.001)
    assert process.poll() is None, "the build finished before it could be stopped"
    (os.killpg if number == signal.SIGINT else os.kill)(process.pid, number)
    sent = time.monotonic()
    stdout, stderr = process.communicate(timeout=60)

    assert time.monotonic() - sent < 5  # "at once", on a shared machine
    said = (
        f"{site}: build interrupted by {number.name}; each file is whole, old or new: "
        "build again to finish\n"
    )
    assert (process.returncode, stdout, stderr.decode()) == (
        (-number, b"", "") if number == signal.SIGKILL else (128 + number, b"", said)
    )
    now = documents(site)  # each document whole, old or new; some of each
    assert now.keys() == old.keys()
    new = {name for name in old if now[name] != old[name]}
    assert [now[name] for name in new] == [
        old[name].replace(OLD.encode(), NEW.encode()) for name in new
    ]
    assert 0 < len(new) < len(old)
    with open(lock_folder_of(site) / "lock") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # the kernel released it at once
    assert build(ratings, site) == 0
    assert build(ratings, site, "--check") == 0
    assert os.listdir(lock_folder_of(site)) == ["lock"]


# Where the build writes, what the test puts there: a link (of its folders, an article's and a
# stale one's, and the lock's) or a folder, where a file goes.
LINKS: Final = [
    *("site/away", "site/away/api/articles", "site/away/api/articles/1"),
    *("site/away/api/articles/1/rating", "site/away/api/articles/9"),
    *("site/away/api/articles/9/rating", ".site.generate", ".site.generate/lock"),
]
FOLDERS: Final = ["site/away/api/articles/1/rating/index.json", "site/index.html"]


@pytest.mark.parametrize("path", [*LINKS, *FOLDERS])
def test_a_link_or_a_folder_where_the_build_writes_is_an_error(
    tmp_path: Path, path: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """An article 1 rewritten, an article 9 removed; a link leads to a folder outside that
    holds both, untouched."""
    outside = tmp_path / "outside"
    (outside / "rating").mkdir(parents=True)
    (outside / "rating" / "index.json").write_bytes(b"precious\n")
    site, ratings = tmp_path / "site", ratings_file(tmp_path / "ratings.yaml", [1, 9])
    assert build(ratings, site, "--quiet") == 0
    where = tmp_path / path
    os.rename(where, tmp_path / "moved")  # the build's own folder or file, set aside
    if path in LINKS:
        where.symlink_to(outside / where.name if where.name in ("rating", "lock") else outside)
    else:
        where.mkdir()
    ratings_file(ratings, [1], NEW)

    assert build(ratings, site, "--quiet") == 2

    said = LINK if path in LINKS else "cannot write: Is a directory"
    assert capsys.readouterr().err == f"{where}: {said}\n"
    assert read_tree(outside) == {"rating/index.json": b"precious\n"}


def test_the_lock_folder_is_beside_the_output_folder_so_a_mount_point_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Beside ``.`` too: the output holds only what is published. /dev/shm is a mount point:
    beside it is another file system. (The root: test_user_errors.py.)"""
    ratings = ratings_file(tmp_path / "ratings.yaml", [7])
    assert build(ratings, tmp_path / "named", "--quiet") == 0
    (tmp_path / "dot").mkdir()
    monkeypatch.chdir(tmp_path / "dot")
    assert build(ratings, Path("."), "--quiet") == 0
    shm = sorted(os.listdir("/dev/shm"))

    assert build(ratings, Path("/dev/shm"), "--check") == 2

    assert sorted(os.listdir("/dev/shm")) == shm
    assert capsys.readouterr().err == (
        "/dev/shm: a mount point: the build keeps its lock and temporary file beside the "
        "output folder, in /dev/.shm.generate, on the same file system; build into a "
        "folder inside the mount instead\n"
    )
    assert read_tree(tmp_path / "dot") == read_tree(tmp_path / "named")
    listed = sorted(os.listdir(tmp_path))
    assert listed == [".dot.generate", ".named.generate", "dot", "named", "ratings.yaml"]
