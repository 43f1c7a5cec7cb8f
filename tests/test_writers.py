"""The writer processes, the lock, interrupts, links and strays: the build as a neighbour."""

from __future__ import annotations

import fcntl
import io
import mmap
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from contextlib import redirect_stderr
from pathlib import Path

import pytest

from ratings_api.build import load_catalogue
from ratings_api.cli import main
from ratings_api.errors import InputError
from ratings_api.loader import Catalogue
from ratings_api.rating import Renderer
from ratings_api.workers import cgroup_cpus
from ratings_api.writer import sync_site
from tests.trees import documents, read_tree, snapshot, state_of

ROOT = Path(__file__).resolve().parent.parent
ARTICLES = Path("away/api/articles")
OLD, NEW = "https://old.example", "https://new.example"


def document(article_id: int) -> Path:
    return ARTICLES / str(article_id) / "rating" / "index.json"


def ratings_file(path: Path, ids: range | list[int], base_url: str = OLD) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    articles = "".join(f"  {n}: [{n % 5 + 1}]\n" for n in ids)
    path.write_text(f"base_url: {base_url}\nscale: [1, 5]\narticles:\n{articles}")
    return path


def build(ratings: Path, site: Path, *extra: str) -> int:
    return main(["--input", str(ratings), "--output", str(site), "--quiet", *extra])


def generate(
    *args: str, cwd: Path | None = None, start_new_session: bool = False
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, str(ROOT / "generate.py"), *args],
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cwd,
        start_new_session=start_new_session,
    )


def catalogue(ids: range) -> Catalogue:
    return Catalogue(ids=list(ids), sums=[n % 5 + 1 for n in ids], counts=[1 for _ in ids])


class PidRenderer(Renderer):
    """Notes, in a file per process, each document it renders: who really writes."""

    def __init__(self, base_url: str, folder: Path) -> None:
        super().__init__(base_url)
        self.folder = folder

    def __call__(self, article_id: int, total: int, count: int) -> bytes:
        with open(self.folder / str(os.getpid()), "a") as file:
            file.write(f"{article_id}\n")
        # Slow enough that no writer can take every batch before the other has started.
        time.sleep(0.001)
        return super().__call__(article_id, total, count)


class KillingRenderer(Renderer):
    """A writer dies at one article, as the kernel's OOM killer would do it."""

    def __init__(self, base_url: str, victim: int) -> None:
        super().__init__(base_url)
        self.victim = victim
        self.test_process = os.getpid()

    def __call__(self, article_id: int, total: int, count: int) -> bytes:
        if article_id == self.victim:
            # Never the test run itself, should the build have written in this process.
            assert os.getpid() != self.test_process, "the build wrote without forking"
            os.kill(os.getpid(), signal.SIGKILL)
        return super().__call__(article_id, total, count)


def run_alone(body: Callable[[Path], None], tmp_path: Path) -> None:
    """``body(tmp_path)`` in a fresh interpreter, where no other test's thread runs.

    Beside a thread a build writes in its own process (see below), and the threads
    of servers that earlier tests started may outlive them, waiting on a client's
    kept-alive connection: a test of the writer processes runs where there are none.
    """
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        f"from tests.test_writers import {body.__name__} as body\n"
        "body(Path(sys.argv[1]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, ""), done.stderr


# --- the writer processes --------------------------------------------------


def test_two_processes_write_the_documents(tmp_path: Path) -> None:
    """In a fresh interpreter: this one may run other tests' server threads (see below)."""
    pids = tmp_path / "pids"
    pids.mkdir()
    script = (
        "import sys\n"
        "from ratings_api.rating import Renderer\n"
        "from ratings_api.writer import sync_site\n"
        "from tests.test_writers import PidRenderer, catalogue\n"
        "from pathlib import Path\n"
        "ids = range(1, 1001)\n"
        "print(sync_site(sys.argv[1], catalogue(ids), PidRenderer(sys.argv[3], Path(sys.argv[2])),"
        " jobs=2).written)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path / "site"), str(pids), OLD],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    sync_site(str(tmp_path / "alone"), catalogue(range(1, 1001)), Renderer(OLD), jobs=1)

    assert (done.returncode, done.stdout, done.stderr) == (0, "1000\n", "")
    writers = {int(path.name): path.read_text().split() for path in pids.iterdir()}
    assert len(writers) == 2
    assert sorted(int(n) for rendered in writers.values() for n in rendered) == list(range(1, 1001))
    assert documents(tmp_path / "site") == documents(tmp_path / "alone")


def test_the_catalogue_the_writers_share_is_in_shared_memory() -> None:
    """Not in the heap, whose pages would count whole in each forked writer's memory."""
    catalogue = load_catalogue("ratings.yaml", b"articles:\n  7: [5, 4]\n  3: {sum: 9, count: 2}\n")

    columns = (catalogue.ids, catalogue.sums, catalogue.counts)
    assert [list(column) for column in columns] == [[7, 3], [9, 9], [2, 2]]
    for column in columns:
        assert isinstance(column, memoryview)
        assert isinstance(column.obj, mmap.mmap)
    large = load_catalogue(
        "ratings.yaml", b"articles:\n  7: {sum: 9223372036854775808, count: 1}\n"
    )
    assert large.sums == [2**63]  # past 64 bits: the lists as read


def test_with_other_threads_running_the_build_does_not_fork(tmp_path: Path) -> None:
    """Forking a process that runs threads (--serve's) would copy their locks as they are."""
    pids = tmp_path / "pids"
    pids.mkdir()
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        sync_site(str(tmp_path / "site"), catalogue(range(1, 1001)), PidRenderer(OLD, pids), jobs=2)
    finally:
        stop.set()
        other.join()

    assert [path.name for path in pids.iterdir()] == [str(os.getpid())]


class FailingRenderer(Renderer):
    def __call__(self, article_id: int, total: int, count: int) -> bytes:
        if article_id == 600:
            raise ValueError("a bug")
        return super().__call__(article_id, total, count)


def test_a_bug_in_a_writer_is_raised_with_its_traceback(tmp_path: Path) -> None:
    run_alone(a_bug_in_a_writer, tmp_path)


def a_bug_in_a_writer(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError) as error:
        sync_site(str(tmp_path / "site"), catalogue(range(1, 1001)), FailingRenderer(OLD), jobs=2)

    assert str(error.value).startswith("a writer process failed:\nTraceback (most recent call")
    assert str(error.value).endswith("ValueError: a bug\n")


def test_check_of_a_site_without_its_articles_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site, ratings = tmp_path / "site", ratings_file(tmp_path / "ratings.yaml", [7])
    assert build(ratings, site) == 0
    shutil.rmtree(site / "away")
    capsys.readouterr()

    assert build(ratings, site, "--check") == 1

    assert capsys.readouterr().err.startswith(
        f"{site} is out of date: 3 to write, 0 to remove:\n  {site / document(7)}\n"
    )


def test_no_cgroup_file_means_no_quota(tmp_path: Path) -> None:
    assert cgroup_cpus(str(tmp_path / "missing"), str(tmp_path)) is None


def test_one_job_writes_in_this_process(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    pids.mkdir()

    sync_site(str(tmp_path / "site"), catalogue(range(1, 1001)), PidRenderer(OLD, pids), jobs=1)

    assert [path.name for path in pids.iterdir()] == [str(os.getpid())]


def test_a_writer_that_fails_stops_the_build_with_one_line(tmp_path: Path) -> None:
    run_alone(a_writer_that_fails, tmp_path)


def a_writer_that_fails(tmp_path: Path) -> None:
    site, ratings = tmp_path / "site", ratings_file(tmp_path / "ratings.yaml", range(1, 1001))
    assert build(ratings, site) == 0
    (site / document(700)).unlink()
    (site / document(700)).mkdir()  # a rename over it fails
    ratings_file(ratings, range(1, 1001), NEW)

    with redirect_stderr(io.StringIO()) as errors:
        assert build(ratings, site, "--jobs", "2") == 2

    assert errors.getvalue() == f"{site / document(700)}: cannot write: Is a directory\n"
    assert not (state_of(site) / "record").exists()


def test_a_writer_killed_is_noticed(tmp_path: Path) -> None:
    run_alone(a_writer_killed, tmp_path)


def a_writer_killed(tmp_path: Path) -> None:
    site = tmp_path / "site"

    with pytest.raises(InputError) as error:
        sync_site(str(site), catalogue(range(1, 1001)), KillingRenderer(OLD, 600), jobs=2)

    assert str(error.value) == (
        f"{site}: a writer process was killed by SIGKILL; build again to finish"
    )
    assert sync_site(str(site), catalogue(range(1, 1001)), Renderer(OLD), jobs=2).written > 0
    assert len(documents(site)) == 1000


def write_cgroup(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


@pytest.mark.parametrize(
    ("proc", "files", "cpus"),
    [
        ("0::/ci/job\n", {"ci/job/cpu.max": "max 100000\n"}, None),
        ("0::/ci/job\n", {"ci/job/cpu.max": "150000 100000\n"}, 2),
        ("0::/ci/job\n", {"ci/job/cpu.max": "400000 100000\n", "ci/cpu.max": "100000 100000\n"}, 1),
        ("0::/\n", {}, None),
        (
            "3:cpu,cpuacct:/docker/x\n0::/\n",
            {
                "cpu,cpuacct/docker/x/cpu.cfs_quota_us": "300000\n",
                "cpu,cpuacct/docker/x/cpu.cfs_period_us": "100000\n",
            },
            3,
        ),
        (
            "3:cpu,cpuacct:/\n",
            {"cpu,cpuacct/cpu.cfs_quota_us": "-1\n", "cpu,cpuacct/cpu.cfs_period_us": "100000\n"},
            None,
        ),
    ],
    ids=["v2-max", "v2-quota", "v2-parent", "v2-none", "v1-quota", "v1-unlimited"],
)
def test_cgroup_cpu_quotas_are_read(
    tmp_path: Path, proc: str, files: dict[str, str], cpus: int | None
) -> None:
    root = write_cgroup(tmp_path / "cgroup", files)
    (tmp_path / "cgroup").mkdir(exist_ok=True)
    (tmp_path / "self-cgroup").write_text(proc)

    assert cgroup_cpus(str(tmp_path / "self-cgroup"), str(root)) == cpus


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("0", "expected a whole number, 1 or more, found '0'"),
        ("two", "expected a whole number, found 'two'"),
        ("-1", "expected a whole number, found '-1'"),
    ],
)
@pytest.mark.parametrize("option", ["--jobs", "--publish-workers"])
def test_jobs_must_be_a_positive_number(
    capsys: pytest.CaptureFixture[str], option: str, value: str, expected: str
) -> None:
    with pytest.raises(SystemExit) as exit:
        main([option, value])

    assert exit.value.code == 2
    assert capsys.readouterr().err.endswith(f"generate.py: error: argument {option}: {expected}\n")


# --- one build at a time ---------------------------------------------------


def hold_lock(site: Path, pid: int) -> int:
    """Take the build lock of ``site`` as a build of process ``pid`` would."""
    state_of(site).mkdir(exist_ok=True)
    fd = os.open(state_of(site) / "lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.ftruncate(fd, 0)
    os.write(fd, b"%d\n" % pid)
    return fd


def read_line(stream: object) -> bytes:
    assert hasattr(stream, "readline")
    return stream.readline()  # type: ignore[no-any-return]


@pytest.mark.parametrize("check", [False, True], ids=["build", "check"])
def test_a_second_build_waits_for_the_first(tmp_path: Path, check: bool) -> None:
    site, ratings = tmp_path / "site", ratings_file(tmp_path / "ratings.yaml", range(1, 11))
    assert build(ratings, site) == 0
    ratings_file(ratings, range(1, 11), NEW)
    before = snapshot(site)
    lock = hold_lock(site, 4242)
    try:
        process = generate("--input", str(ratings), "--output", str(site), *(["--check"] * check))
        assert (
            read_line(process.stderr)
            == f"{site}: waiting for the build in process 4242 to finish\n".encode()
        )
        time.sleep(0.3)
        assert process.poll() is None
        assert snapshot(site) == before
    finally:
        os.close(lock)
    _, stderr = process.communicate(timeout=60)

    assert (process.returncode, stderr) == ((1, stderr) if check else (0, b""))
    if not check:
        assert NEW.encode() in (site / document(1)).read_bytes()


def test_builds_started_together_leave_one_inputs_tree(tmp_path: Path) -> None:
    """Two CI jobs on one workspace: never a mixture, never a listed article without its file."""
    first = ratings_file(tmp_path / "a.yaml", range(1, 2001), OLD)
    second = ratings_file(tmp_path / "b.yaml", range(1000, 2501), NEW)
    expected = []
    for name, ratings in (("expected-a", first), ("expected-b", second)):
        assert build(ratings, tmp_path / name) == 0
        expected.append(read_tree(tmp_path / name))
    site = tmp_path / "site"
    outcomes = set()
    for round in range(4):
        inputs = (first, second) if round % 2 == 0 else (second, first)
        processes = [
            generate("--input", str(ratings), "--output", str(site), "--quiet")
            for ratings in inputs
        ]
        results = [process.communicate(timeout=120) for process in processes]
        assert [process.returncode for process in processes] == [0, 0], results
        tree = read_tree(site)
        assert tree in expected, f"round {round}: a mixture of both inputs"
        outcomes.add(expected.index(tree))
    assert outcomes  # each round ended in one input's tree


def test_a_killed_build_leaves_no_lock(tmp_path: Path) -> None:
    site, ratings = tmp_path / "site", ratings_file(tmp_path / "ratings.yaml", range(1, 10001))
    process = generate(
        "--input", str(ratings), "--output", str(site), "--jobs", "2", start_new_session=True
    )
    try:
        while not (site / document(1)).exists() and process.poll() is None:
            time.sleep(0.01)
        os.killpg(process.pid, signal.SIGKILL)
    finally:
        process.communicate(timeout=60)
    assert process.returncode == -signal.SIGKILL, "the build finished before it could be killed"

    fd = os.open(state_of(site) / "lock", os.O_RDONLY)
    try:
        deadline = time.monotonic() + 10  # the killed writers' exits, on a busy machine
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                assert time.monotonic() < deadline, "the lock outlived the killed build"
                time.sleep(0.05)
    finally:
        os.close(fd)
    assert build(ratings, site) == 0
    assert len(documents(site)) == 10000


# --- interrupts ------------------------------------------------------------


@pytest.mark.parametrize(
    ("jobs", "number", "group"),
    [
        ("2", signal.SIGINT, True),  # Ctrl-C: the terminal signals the whole process group
        ("1", signal.SIGINT, True),
        ("2", signal.SIGTERM, False),  # kill PID, a CI timeout: the build's own process only
    ],
    ids=["ctrl-c-processes", "ctrl-c-one-process", "sigterm-processes"],
)
def test_an_interrupt_stops_the_build_at_once(
    tmp_path: Path, jobs: str, number: signal.Signals, group: bool
) -> None:
    site, ratings = tmp_path / "site", ratings_file(tmp_path / "ratings.yaml", range(1, 6001))
    assert build(ratings, site) == 0
    old = documents(site)
    ratings_file(ratings, range(1, 6001), NEW)
    process = generate(
        "--input", str(ratings), "--output", str(site), "--jobs", jobs, start_new_session=True
    )
    try:
        while OLD.encode() in (site / document(1)).read_bytes() and process.poll() is None:
            time.sleep(0.005)  # until the rewrite has begun
        (os.killpg if group else os.kill)(process.pid, number)
        sent = time.monotonic()
        stdout, stderr = process.communicate(timeout=60)
        stopped = time.monotonic() - sent
    finally:
        if process.poll() is None:
            process.kill()

    assert (process.returncode, stdout, stderr) == (
        128 + number,
        b"",
        (
            f"{site}: build interrupted by {number.name}; each file is whole, old or new: "
            "build again to finish\n"
        ).encode(),
    )
    assert stopped < 5, f"{stopped:.1f} s to stop"  # "within a second", on a shared machine
    after = documents(site)
    time.sleep(0.3)
    assert documents(site) == after, "a writer went on after the build stopped"
    rewritten = [name for name in old if after[name] != old[name]]
    for name in rewritten:
        assert after[name] == old[name].replace(OLD.encode(), NEW.encode()), name
    assert 0 < len(rewritten) < len(old), "the build was not cut short"
    assert main(["--input", str(ratings), "--output", str(site), "--check", "--quiet"]) == 1
    assert build(ratings, site) == 0
    assert main(["--input", str(ratings), "--output", str(site), "--check", "--quiet"]) == 0


# --- the output folder holds what is published, and only that ----------------


def test_the_same_input_gives_the_same_tree_byte_for_byte(tmp_path: Path) -> None:
    first = ratings_file(tmp_path / "a.yaml", range(1, 600), OLD)
    second = ratings_file(tmp_path / "b.yaml", range(300, 900), NEW)
    site = tmp_path / "site"
    assert build(first, tmp_path / "fresh") == 0
    assert build(first, site) == 0
    assert build(second, site) == 0

    assert build(first, site) == 0

    assert read_tree(site) == read_tree(tmp_path / "fresh")
    assert sorted(os.listdir(tmp_path)) == [
        ".fresh.generate",
        ".site.generate",
        "a.yaml",
        "b.yaml",
        "fresh",
        "site",
    ]


def test_a_deleted_output_is_built_again_whole_despite_its_record(tmp_path: Path) -> None:
    site, ratings = tmp_path / "site", ratings_file(tmp_path / "ratings.yaml", range(1, 600))
    assert build(ratings, site) == 0
    expected = read_tree(site)
    shutil.rmtree(site)

    assert build(ratings, site) == 0

    assert read_tree(site) == expected
    assert build(ratings, site, "--check") == 0


def test_the_state_of_dot_is_beside_it(tmp_path: Path) -> None:
    site, ratings = tmp_path / "site", ratings_file(tmp_path / "ratings.yaml", [7])
    site.mkdir()

    process = generate("--input", str(ratings), "--output", ".", "--quiet", cwd=site)

    assert process.communicate(timeout=60) == (b"", b"")
    assert (tmp_path / ".site.generate" / "record").is_file()
    assert not [name for name in os.listdir(site) if name.startswith(".")]


def test_the_root_of_the_file_system_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ratings = ratings_file(tmp_path / "ratings.yaml", [7])

    assert build(ratings, Path("/")) == 2

    assert capsys.readouterr().err == (
        "/: the root of the file system cannot be the output folder\n"
    )
    assert not Path("/away").exists()


def test_a_mount_point_is_refused_as_the_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """/dev/shm is a mount point: beside it is another file system (--check writes nothing)."""
    ratings = ratings_file(tmp_path / "ratings.yaml", [7])
    assert os.stat("/dev/shm").st_dev != os.stat("/dev").st_dev

    assert build(ratings, Path("/dev/shm"), "--check") == 2

    assert capsys.readouterr().err == (
        "/dev/shm: a mount point: the build keeps its state beside the output folder, in "
        "/dev/.shm.generate, on the same file system; build into a folder inside the mount "
        "instead\n"
    )


def test_check_writes_nothing_in_the_state_folder_either(tmp_path: Path) -> None:
    site, ratings = tmp_path / "site", ratings_file(tmp_path / "ratings.yaml", range(1, 600))
    assert build(ratings, site) == 0
    ratings_file(ratings, range(1, 600), NEW)
    before = (snapshot(site), snapshot(state_of(site)))

    assert build(ratings, site, "--check") == 1

    assert (snapshot(site), snapshot(state_of(site))) == before


def test_a_stray_document_is_found_by_check_and_removed_by_the_build(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As a hand edit or a `git checkout` of an old site/ leaves one, the record up to date."""
    site, ratings = tmp_path / "site", ratings_file(tmp_path / "ratings.yaml", range(1, 4))
    assert build(ratings, site) == 0
    expected = read_tree(site)
    (site / document(99)).parent.mkdir(parents=True)
    (site / document(99)).write_bytes(b'{"id": 99}\n')

    assert build(ratings, site, "--check") == 1
    assert build(ratings, site) == 0
    assert build(ratings, site, "--check") == 0

    assert read_tree(site) == expected
    assert capsys.readouterr().err == (
        f"{site} is out of date: 0 to write, 1 to remove:\n  {site / document(99)}\n"
    )


# --- links: never followed to write, truncate or remove ----------------------


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder outside the output, with files a build must never touch."""
    folder = tmp_path / "outside"
    (folder / "rating").mkdir(parents=True)
    (folder / "rating" / "index.json").write_bytes(b"precious\n")
    (folder / "file").write_bytes(b"precious\n")
    return folder


def untouched(folder: Path) -> bool:
    return read_tree(folder) == {"file": b"precious\n", "rating/index.json": b"precious\n"}


@pytest.mark.parametrize("change", ["rewrite", "remove"])
def test_a_linked_article_folder_is_an_error(
    tmp_path: Path, outside: Path, change: str, capsys: pytest.CaptureFixture[str]
) -> None:
    site, ratings = tmp_path / "site", ratings_file(tmp_path / "ratings.yaml", [1, 2])
    assert build(ratings, site) == 0
    for path in sorted((site / ARTICLES / "2").rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()
    (site / ARTICLES / "2").rmdir()
    (site / ARTICLES / "2").symlink_to(outside)
    ratings_file(ratings, [1, 2] if change == "rewrite" else [1], NEW)

    assert build(ratings, site) == 2

    assert capsys.readouterr().err == (
        f"{site / ARTICLES / '2'}: is a symbolic link: the build follows none where it writes; "
        "remove it\n"
    )
    assert untouched(outside)


def test_a_linked_document_is_replaced_by_the_file(tmp_path: Path, outside: Path) -> None:
    site, ratings = tmp_path / "site", ratings_file(tmp_path / "ratings.yaml", [1, 2])
    assert build(ratings, site) == 0
    expected = read_tree(site)
    (site / document(2)).unlink()
    (site / document(2)).symlink_to(outside / "file")

    assert build(ratings, site, "--check") == 1
    assert build(ratings, site) == 0

    assert not (site / document(2)).is_symlink()
    assert read_tree(site) == expected
    assert untouched(outside)


@pytest.mark.parametrize("name", ["write-0.tmp", "write-1.tmp", "record", "record.tmp"])
def test_a_linked_state_file_is_not_followed(tmp_path: Path, outside: Path, name: str) -> None:
    site, ratings = tmp_path / "site", ratings_file(tmp_path / "ratings.yaml", range(1, 1001))
    assert build(ratings, site) == 0
    (state_of(site) / name).unlink(missing_ok=True)
    (state_of(site) / name).symlink_to(outside / "file")
    ratings_file(ratings, range(1, 1001), NEW)

    assert build(ratings, site, "--jobs", "2") == 0

    assert untouched(outside)
    assert NEW.encode() in (site / document(1000)).read_bytes()


@pytest.mark.parametrize(
    "link", ["away", "away/api/articles", ".site.generate"], ids=["away", "articles", "state"]
)
def test_a_linked_folder_the_build_needs_is_an_error(
    tmp_path: Path, outside: Path, link: str, capsys: pytest.CaptureFixture[str]
) -> None:
    site, ratings = tmp_path / "site", ratings_file(tmp_path / "ratings.yaml", [1, 2])
    site.mkdir()
    path = tmp_path / link if link.startswith(".") else site / link
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(outside)

    assert build(ratings, site) == 2

    assert capsys.readouterr().err == (
        f"{path}: is a symbolic link: the build follows none where it writes; remove it\n"
    )
    assert untouched(outside)


def test_an_interrupt_while_opening_folders_closes_each_descriptor_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C raises between any two lines: right after a close, the way out must not close
    it again (that EBADF replaced the interrupt, and the build exited 2 instead of 130)."""
    import ratings_api.writer as writer

    closed: list[int] = []
    real_close = os.close

    def close_then_interrupt(fd: int) -> None:
        real_close(fd)
        closed.append(fd)
        if len(closed) == 1:
            raise KeyboardInterrupt

    root = os.open(tmp_path, os.O_RDONLY | os.O_DIRECTORY)
    monkeypatch.setattr(writer.os, "close", close_then_interrupt)
    try:
        with pytest.raises(KeyboardInterrupt):
            writer._open_folders(root, str(tmp_path), "7/rating", create=True)
    finally:
        monkeypatch.undo()
        os.close(root)

    assert len(closed) == len(set(closed)) == 2  # the folder 7, then 7/rating: once each
    assert (tmp_path / "7" / "rating").is_dir()
