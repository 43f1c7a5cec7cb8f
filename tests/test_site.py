"""Writing the site: incremental, atomic, never touching what it did not make."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ratings_api.cli import main
from ratings_api.loader import Catalogue
from ratings_api.rating import Renderer
from ratings_api.state import TMP_NAME
from ratings_api.writer import OLD_STATE_NAME, sync_site
from tests.trees import documents, read_tree, snapshot, state_of

ROOT = Path(__file__).resolve().parent.parent
OLD_TIME = 1_000_000_000_000_000_000  # 2001, in nanoseconds: far from any build's clock
ARTICLES = Path("away/api/articles")
LEFTOVER = "write-1.tmp"  # as a killed build's second writer leaves it, in its state folder
OLD_LEFTOVER = ".generate-1.tmp"  # as earlier versions left it, in the output folder
ONE_ARTICLE = Catalogue(ids=[7], sums=[5], counts=[1])
RENDER = Renderer("https://example.com")


def document(article_id: int) -> Path:
    return ARTICLES / str(article_id) / "rating" / "index.json"


def ratings_file(tmp_path: Path, articles: str, base_url: str = "https://example.com") -> Path:
    tmp_path.mkdir(exist_ok=True)
    path = tmp_path / "ratings.yaml"
    path.write_text(f"base_url: {base_url}\nscale: [1, 5]\narticles:\n{articles}")
    return path


def build(path: Path, output: Path, *extra: str) -> int:
    return main(["--input", str(path), "--output", str(output), *extra])


def age_all(root: Path) -> None:
    for path in root.rglob("*"):
        os.utime(path, ns=(OLD_TIME, OLD_TIME))


def test_rebuild_rewrites_only_what_changed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = tmp_path / "site"
    ratings = ratings_file(tmp_path, "  1: [5]\n  2: [4, 4]\n  3: []\n")
    assert build(ratings, site) == 0
    age_all(site)
    ratings_file(tmp_path, "  1: [5]\n  2: [4, 4, 1]\n  3: []\n")
    capsys.readouterr()

    assert build(ratings, site) == 0

    # Article 2's document, and the front page, whose table of the best rated changed.
    assert capsys.readouterr().out.startswith(
        f"built {site}: 3 articles; files: 2 written, 0 removed, 9 unchanged in "
    )
    times = {path: (site / path).stat().st_mtime_ns for path in map(document, (1, 2, 3))}
    assert times[document(1)] == times[document(3)] == OLD_TIME
    assert times[document(2)] != OLD_TIME
    assert (
        (site / document(2))
        .read_bytes()
        .endswith(b'"rating_sum": 9, "rating_count": 3, "rating_value": "3.0"}\n')
    )


def test_rebuild_with_nothing_changed_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = tmp_path / "site"
    ratings = ratings_file(tmp_path, "  1: [5]\n  2: [4, 4]\n")
    assert build(ratings, site) == 0
    age_all(site)
    before = snapshot(site)
    capsys.readouterr()

    assert build(ratings, site) == 0

    after = snapshot(site)
    assert after == before
    assert "; files: 0 written, 0 removed, 10 unchanged in " in capsys.readouterr().out


def test_a_new_base_url_rewrites_every_document(tmp_path: Path) -> None:
    site = tmp_path / "site"
    ratings = ratings_file(tmp_path, "  1: [5]\n")
    assert build(ratings, site) == 0

    assert build(ratings, site, "--base-url", "https://cdn.example.org") == 0

    assert (
        (site / document(1))
        .read_bytes()
        .startswith(b'{"article_url": "https://cdn.example.org/away/api/articles/1/"')
    )


def test_articles_no_longer_listed_are_removed_with_their_folders(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = tmp_path / "site"
    ratings = ratings_file(tmp_path, "  1: [5]\n  2: [4]\n  30: [3]\n")
    assert build(ratings, site) == 0
    ratings_file(tmp_path, "  2: [4]\n")
    capsys.readouterr()

    assert build(ratings, site) == 0

    assert " 2 removed, " in capsys.readouterr().out
    assert sorted(os.listdir(site / ARTICLES)) == ["2"]


def test_files_the_generator_did_not_make_are_kept(tmp_path: Path) -> None:
    site = tmp_path / "site"
    ratings = ratings_file(tmp_path, "  7: [5]\n  8: [4]\n")
    assert build(ratings, site) == 0
    users = {
        "CNAME": b"ratings.example.com\n",
        "_headers": b"/*\n  X-Frame-Options: DENY\n",
        "away/api/articles/7/rating/notes.txt": b"kept\n",
        "away/api/articles/drafts/index.html": b"<p>draft</p>\n",
        "away/api/articles/0099/rating/index.json": b"not an id the generator writes\n",
        "away/api/articles/9/README": b"a folder that looks like an id, without a document\n",
    }
    for name, content in users.items():
        (site / name).parent.mkdir(parents=True, exist_ok=True)
        (site / name).write_bytes(content)
    ratings_file(tmp_path, "  8: [4]\n")

    assert build(ratings, site) == 0

    tree = read_tree(site)
    assert {name: tree.get(name) for name in users} == users
    assert str(document(7)) not in tree


def test_an_empty_catalogue_removes_the_article_folders_but_not_the_users_files(
    tmp_path: Path,
) -> None:
    site = tmp_path / "site"
    ratings = ratings_file(tmp_path, "  7: [5]\n")
    assert build(ratings, site) == 0
    (site / "CNAME").write_text("ratings.example.com\n")
    ratings_file(tmp_path, "  {}\n")

    assert build(ratings, site) == 0

    assert sorted(os.listdir(site)) == [
        "404.html",
        "CNAME",
        "_redirects",
        "assets",
        "away",
        "index.html",
    ]
    assert sorted(os.listdir(site / "away/api")) == ["embed.js", "openapi.json"]


def test_builds_are_deterministic_whatever_the_order(tmp_path: Path) -> None:
    articles = ["  3: [1, 2]\n", "  1: {sum: 29, count: 6}\n", "  2: []\n", "  40: [5, 5, 4]\n"]
    first = ratings_file(tmp_path / "a", "".join(articles))
    second = ratings_file(tmp_path / "b", "".join(reversed(articles)))

    assert build(first, tmp_path / "site-a") == 0
    assert build(second, tmp_path / "site-b") == 0
    assert build(first, tmp_path / "site-c") == 0

    trees = [read_tree(tmp_path / name) for name in ("site-a", "site-b", "site-c")]
    assert len(documents(tmp_path / "site-a")) == 4
    assert trees[0] == trees[1] == trees[2]


def test_check_reports_a_missing_site(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ratings = ratings_file(tmp_path, "  1: [5]\n  2: [4]\n")
    site = tmp_path / "site"

    assert build(ratings, site, "--check") == 1

    assert capsys.readouterr().err == (
        f"{site} is out of date: 10 to write, 0 to remove:\n"
        f"  {site / document(1)}\n"
        f"  {site / document(2)}\n"
        f"  {site / '404.html'}\n"
        f"  {site / '_redirects'}\n"
        f"  {site / 'assets/front-page.css'}\n"
        f"  and 5 more\n"
    )
    assert not site.exists()
    assert not state_of(site).exists()  # not even the build's state folder


def test_check_passes_on_a_fresh_build(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ratings = ratings_file(tmp_path, "  1: [5]\n  2: [4]\n")
    site = tmp_path / "site"
    assert build(ratings, site) == 0
    capsys.readouterr()

    assert build(ratings, site, "--check") == 0

    assert capsys.readouterr().out == f"{site} is up to date: 2 articles\n"


def test_check_names_edited_stale_and_leftover_files_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = tmp_path / "site"
    ratings = ratings_file(tmp_path, "  1: [5]\n  2: [4]\n  3: [3]\n")
    assert build(ratings, site) == 0
    (site / document(2)).write_text('{"edited": true}\n')
    ratings_file(tmp_path, "  1: [5]\n  2: [4]\n")
    (site / OLD_LEFTOVER).write_bytes(b'{"article_url": "ht')
    before = snapshot(site)
    capsys.readouterr()

    assert build(ratings, site, "--check") == 1

    # The documents first, then the files describing the API (article 3
    # leaves the front page's table and the OpenAPI document's examples).
    assert capsys.readouterr().err == (
        f"{site} is out of date: 3 to write, 2 to remove:\n"
        f"  {site / document(2)}\n"
        f"  {site / 'away/api/openapi.json'}\n"
        f"  {site / 'index.html'}\n"
        f"  {site / document(3)}\n"
        f"  {site / OLD_LEFTOVER}\n"
    )
    assert snapshot(site) == before


def test_check_names_at_most_five_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ratings = ratings_file(tmp_path, "".join(f"  {n}: [5]\n" for n in range(1, 9)))

    assert build(ratings, tmp_path / "site", "--check") == 1

    message = capsys.readouterr().err.splitlines()
    assert message[0] == f"{tmp_path / 'site'} is out of date: 16 to write, 0 to remove:"
    assert message[1:6] == [f"  {tmp_path / 'site' / document(n)}" for n in range(1, 6)]
    assert message[6:] == ["  and 11 more"]


def test_a_build_consumes_the_leftover_of_a_killed_build(tmp_path: Path) -> None:
    site = tmp_path / "site"
    ratings = ratings_file(tmp_path, "  1: [5]\n")
    assert build(ratings, site) == 0
    (state_of(site) / LEFTOVER).write_bytes(b'{"article_url": "ht')

    assert build(ratings, site) == 0

    assert sorted(documents(site)) == [str(document(1))]
    assert sorted(os.listdir(state_of(site))) == ["lock", "record"]


def test_a_build_removes_the_state_earlier_versions_kept_in_the_output(tmp_path: Path) -> None:
    site = tmp_path / "site"
    ratings = ratings_file(tmp_path, "  1: [5]\n")
    assert build(ratings, site) == 0
    expected = read_tree(site)
    for name in (".generate-state", ".generate-state.tmp", OLD_LEFTOVER):
        (site / name).write_bytes(b"ratings-api build record 1\n")

    assert build(ratings, site) == 0

    assert read_tree(site) == expected
    assert not [name for name in os.listdir(site) if OLD_STATE_NAME.fullmatch(name)]


def limit_file_size(size: int) -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))


def run_generate(*args: str, measured: bool = True, **options: object) -> subprocess.Popen[bytes]:
    environ = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    if not measured:
        # Coverage starts in every Python child (pyproject.toml) unless these are unset.
        environ = {k: v for k, v in environ.items() if not k.startswith("COVERAGE_PROCESS_")}
    return subprocess.Popen(
        [sys.executable, str(ROOT / "generate.py"), *args],
        env=environ,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **options,
    )


def test_a_write_cut_short_leaves_whole_documents(tmp_path: Path) -> None:
    """As on a full disk: the kernel writes part of a file, then refuses the rest."""
    site = tmp_path / "site"
    ratings = ratings_file(tmp_path, "  1: [5]\n  2: [4]\n")
    assert build(ratings, site) == 0
    old = documents(site)
    # Article 1's new document fits in the limit; article 2's is longer and does not.
    ratings_file(tmp_path, "  1: [5, 5]\n  2: {sum: 40000000000000, count: 10000000000000}\n")
    limit = len((site / document(1)).read_bytes()) + 20

    process = run_generate(
        "--input",
        str(ratings),
        "--output",
        str(site),
        # Coverage's data file, written at exit, would meet the same limit and fail there.
        measured=False,
        preexec_fn=lambda: limit_file_size(limit),
    )
    stdout, stderr = process.communicate(timeout=60)

    assert (process.returncode, stdout) == (2, b"")
    assert stderr == f"{site / document(2)}: cannot write: File too large\n".encode()
    tree = documents(site)
    assert tree[str(document(1))].endswith(
        b'"rating_sum": 10, "rating_count": 2, "rating_value": "5.0"}\n'
    )
    assert tree[str(document(2))] == old[str(document(2))]
    assert not [path for path in site.iterdir() if path.name.startswith(".")]
    leftovers = [path for path in state_of(site).iterdir() if TMP_NAME.fullmatch(path.name)]
    assert len(leftovers) == 1
    assert (
        len(leftovers[0].read_bytes()) == limit
    )  # the cut-off write went to a temporary file only

    assert build(ratings, site) == 0
    tree = documents(site)
    assert sorted(tree) == [str(document(1)), str(document(2))]
    assert tree[str(document(2))].endswith(
        b'"rating_sum": 40000000000000, "rating_count": 10000000000000, "rating_value": "4.0"}\n'
    )


def test_a_build_killed_midway_leaves_whole_documents(tmp_path: Path) -> None:
    site = tmp_path / "site"
    articles = "".join(f"  {n}: [{n % 5 + 1}]\n" for n in range(1, 10001))
    ratings = ratings_file(tmp_path, articles, base_url="https://old.example")
    assert build(ratings, site) == 0
    old = documents(site)
    ratings_file(tmp_path, articles, base_url="https://new.example")
    process = run_generate("--input", str(ratings), "--output", str(site), start_new_session=True)
    probe = site / document(1)
    try:
        while b"old.example" in probe.read_bytes() and process.poll() is None:
            pass  # until the rewrite has begun
        os.killpg(process.pid, signal.SIGKILL)  # the build and its writer processes
    finally:
        process.communicate(timeout=60)
    assert process.returncode == -signal.SIGKILL, "the build finished before it could be killed"

    tree = documents(site)
    rewritten = 0
    for name, content in old.items():
        if tree[name] != content:
            assert tree[name] == content.replace(b"old.example", b"new.example"), name
            rewritten += 1
    assert 0 < rewritten < len(old)
    assert build(ratings, site) == 0
    assert documents(site) == {
        name: content.replace(b"old.example", b"new.example") for name, content in old.items()
    }


def test_an_unwritable_output_is_an_error_without_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ratings = ratings_file(tmp_path, "  1: [5]\n")
    (tmp_path / "file").write_text("not a folder\n")

    assert build(ratings, tmp_path / "file" / "site") == 2

    assert (
        capsys.readouterr().err == f"{tmp_path / 'file' / 'site'}: cannot write: Not a directory\n"
    )


def test_a_missing_input_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert build(tmp_path / "missing.yaml", tmp_path / "site") == 2

    assert (
        capsys.readouterr().err
        == f"{tmp_path / 'missing.yaml'}: cannot read: No such file or directory\n"
    )
    assert not (tmp_path / "site").exists()


def test_other_generated_files_are_written_only_when_they_change(tmp_path: Path) -> None:
    site = tmp_path / "site"
    extras = {"_redirects": b"/* /404.html 404\n", "away/api/openapi.json": b"{}\n"}

    first = sync_site(str(site), ONE_ARTICLE, RENDER, extras=extras)
    age_all(site)
    second = sync_site(
        str(site), ONE_ARTICLE, RENDER, extras={**extras, "_redirects": b"changed\n"}
    )

    assert (first.written, first.unchanged) == (3, 0)
    assert (second.written, second.unchanged) == (1, 2)
    assert (site / "_redirects").read_bytes() == b"changed\n"
    assert (site / "away/api/openapi.json").stat().st_mtime_ns == OLD_TIME
    assert sorted(os.listdir(state_of(site))) == ["lock", "record"]


def test_check_names_missing_generated_files(tmp_path: Path) -> None:
    changes = sync_site(
        str(tmp_path / "site"), ONE_ARTICLE, RENDER, extras={"_redirects": b"x\n"}, dry_run=True
    )

    assert (changes.written, changes.examples) == (
        2,
        [str(tmp_path / "site" / document(7)), str(tmp_path / "site/_redirects")],
    )
    assert not (tmp_path / "site").exists()
