"""Writing the site: only what changed, each file whole, never what the generator did not make."""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Final

import pytest

from tests.contract import unmeasured_environ
from tests.trees import build, document, documents, lock_folder_of, snapshot

ROOT = Path(__file__).resolve().parent.parent
OLD_TIME = 1_000_000_000_000_000_000  # 2001, in nanoseconds: far from any build's clock
RATINGS = "  1: [5]\n  2: [4, 4]\n  3: []\n  40: {sum: 29, count: 6}\n"
Damage = Callable[[Path, Path], object]  # done to the output folder and its lock folder


def ratings_file(folder: Path, articles: str, base_url: str = "https://example.com") -> Path:
    folder.mkdir(exist_ok=True)
    path = folder / "ratings.yaml"
    path.write_text(f"base_url: {base_url}\nscale: [1, 5]\narticles:\n{articles}")
    return path


# Files of the user's in the site: kept, whatever looks like the generator's.
USERS: Final = {
    "CNAME": b"ratings.example.com\n",
    "_headers": b"/*\n  X-Frame-Options: DENY\n",
    "away/api/articles/3/rating/notes.txt": b"kept, in the folder of an article removed\n",
    "away/api/articles/drafts/index.html": b"<p>draft</p>\n",
    "away/api/articles/0099/rating/index.json": b"not an id the generator writes\n",
    "away/api/articles/9/README": b"a folder that looks like an id, without a document\n",
    "away/api/articles/10/rating/README": b"one without a document either\n",
    "away/api/articles/11": b"a file named as an article's folder\n",
}
# What --check says of a site not built, then of one whose input changed: documents first,
# then the files describing the API (article 3 leaves the front page's table and the OpenAPI
# document's examples), then removals.
CHECKED: Final = (
    "{site} is out of date: 13 to write, 0 to remove:\n  {site}/{doc1}\n  {site}/{doc2}\n"
    "  {site}/{doc3}\n  {site}/{doc40}\n  {site}/404.html\n  and 8 more\n"
    "{site} is out of date: 3 to write, 2 to remove:\n  {site}/{doc2}\n"
    "  {site}/away/api/openapi.json\n  {site}/index.html\n  {site}/{doc3}\n"
    "  {site}/.generate-1.tmp\n"
)


def test_check_names_what_a_rebuild_then_writes_and_it_writes_nothing_else(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--check writes nothing, nor the lock folder; a rebuild writes the files it named, keeps
    the user's files and the others as they were (their times too), and removes what it named;
    built again, nothing at all."""
    ratings, site = ratings_file(tmp_path, RATINGS), tmp_path / "site"
    assert build(ratings, site, "--check") == 1
    assert os.listdir(tmp_path) == ["ratings.yaml"]
    assert build(ratings, site, "--quiet") == 0
    for name, content in {**USERS, ".generate-1.tmp": b'{"article_url": "ht'}.items():
        put_file(site / name, content)
    for path in site.rglob("*"):
        os.utime(path, ns=(OLD_TIME, OLD_TIME))
    ratings_file(tmp_path, RATINGS.replace("[4, 4]", "[4, 4, 1]").replace("  3: []\n", ""))
    before = snapshot(tmp_path)
    assert build(ratings, site, "--check") == 1
    assert snapshot(tmp_path) == before

    assert build(ratings, site) == 0
    after = snapshot(site)
    assert build(ratings, site) == 0

    assert snapshot(site) == after
    changed = {
        name for name, (data, time) in after.items() if data is not None and time != OLD_TIME
    }
    assert changed == {document(2), "away/api/openapi.json", "index.html"}
    assert {name: after[name][0] for name in USERS} == USERS
    assert document(3) not in after
    out, err = capsys.readouterr()
    assert err == CHECKED.format(site=site, **{f"doc{n}": document(n) for n in (1, 2, 3, 40)})
    first, second = out.splitlines()
    assert first.startswith(f"built {site}: 3 articles; files: 3 written, 2 removed, 9 unchanged")
    assert second.startswith(f"built {site}: 3 articles; files: 0 written, 0 removed, 12 unchanged")


def tamper_in_place(site: Path, lock: Path) -> None:
    """New bytes, but the same inode, size and time: what a record of the files cannot see."""
    path = site / document(40)
    status = path.stat()
    path.write_bytes(path.read_bytes().replace(b'"4.8"', b'"9.9"'))
    os.utime(path, ns=(status.st_atime_ns, status.st_mtime_ns))


def replace_by_hand(site: Path, lock: Path) -> None:
    """As `git checkout` does: a new file renamed over the document."""
    (site / "new").write_bytes(b'{"stale": true}\n')
    (site / "new").replace(site / document(1))


def stray(article_id: int) -> Damage:
    """A document the input does not list, as an earlier build of another input left it."""
    return lambda site, _: put_file(site / document(article_id), b"{}\n")


def put_file(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def link_document(site: Path, lock: Path) -> None:
    (site / document(2)).unlink()
    (site / document(2)).symlink_to(site.parent / "outside")


def built_from(articles: str, base_url: str = "https://example.com") -> Damage:
    """The site as another input builds it."""
    return lambda site, _: build(ratings_file(site.parent / "other", articles, base_url), site)


OLD_STATE = (".generate-state", ".generate-state.tmp", ".generate-1.tmp")  # earlier versions'
# What happened to the site, and what --check then says (1: out of date).
DAMAGES: dict[str, tuple[Damage, int]] = {
    "edited-in-place": (tamper_in_place, 1),
    "replaced": (replace_by_hand, 1),
    "deleted": (lambda site, _: (site / document(3)).unlink(), 1),
    "away-deleted": (lambda site, _: shutil.rmtree(site / "away"), 1),
    "site-deleted": (lambda site, _: shutil.rmtree(site), 1),
    "stray-document": (stray(99), 1),
    "stray-document-past-today-s-largest-id": (stray(2**63 - 1), 1),
    "linked-document": (link_document, 1),
    "old-versions-state": (lambda site, _: [put_file(site / n, b"") for n in OLD_STATE], 1),
    # A killed build's temporary file, cut short, or a link there.
    "leftover": (lambda _, lock: (lock / "write.tmp").write_bytes(b'{"article_url": "ht'), 0),
    "linked-leftover": (lambda site, lock: (lock / "write.tmp").symlink_to(site / "x"), 0),
    "lock-folder-deleted": (lambda _, lock: shutil.rmtree(lock), 0),
    "lock-deleted": (lambda _, lock: (lock / "lock").unlink(), 0),
    "other-articles": (built_from("  1: [1]\n  5: [5]\n  6: []\n  2: [4, 4]\n"), 1),
    "other-base-url": (built_from(RATINGS, "https://cdn.example.org"), 1),
    # The same input in another order: the same tree.
    "other-order": (built_from("".join(reversed(RATINGS.splitlines(keepends=True)))), 0),
    # The input emptied since: no article's folder is left, nor articles/ itself.
    "input-emptied": (lambda site, _: ratings_file(site.parent, "  {}\n"), 1),
}


@pytest.mark.parametrize(("damage", "check"), DAMAGES.values(), ids=DAMAGES)
def test_a_rebuild_leaves_what_a_fresh_build_makes(
    tmp_path: Path, damage: Damage, check: int
) -> None:
    """Whatever happened to the folder, or was built there before."""
    (tmp_path / "outside").write_bytes(b"precious\n")
    ratings, site = ratings_file(tmp_path, RATINGS), tmp_path / "site"
    assert build(ratings, site, "--quiet") == 0
    damage(site, lock_folder_of(site))
    fresh = tmp_path / "fresh"
    assert build(ratings, fresh, "--quiet") == 0

    assert build(ratings, site, "--check", "--quiet") == check
    assert build(ratings, site, "--quiet") == 0
    assert build(ratings, site, "--check", "--quiet") == 0

    assert {name: data for name, (data, _) in snapshot(site).items()} == {
        name: data for name, (data, _) in snapshot(fresh).items()
    }  # empty folders too
    assert (tmp_path / "outside").read_bytes() == b"precious\n"
    assert os.listdir(lock_folder_of(site)) == ["lock"]


def test_a_write_cut_short_leaves_whole_documents(tmp_path: Path) -> None:
    """As on a full disk: the kernel writes part of a file, then refuses the rest."""
    ratings, site = ratings_file(tmp_path, "  1: [5]\n  2: [4]\n"), tmp_path / "site"
    assert build(ratings, site, "--quiet") == 0
    old = documents(site)
    # Article 1's new document fits in the limit; article 2's is longer and does not.
    ratings_file(tmp_path, "  1: [5, 5]\n  2: {sum: 40000000000000, count: 10000000000000}\n")
    limit = len((site / document(1)).read_bytes()) + 20

    done = subprocess.run(
        [sys.executable, str(ROOT / "generate.py"), "--input", str(ratings), "--output", str(site)],
        # Coverage's data file, written at exit, would meet the same limit and fail there.
        env=unmeasured_environ(),
        capture_output=True,
        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit)),
        timeout=60,
        check=False,
    )

    assert (done.returncode, done.stdout, done.stderr) == (
        2,
        b"",
        f"{site / document(2)}: cannot write: File too large\n".encode(),
    )
    assert documents(site) == {
        document(1): old[document(1)].replace(b'5, "rating_count": 1', b'10, "rating_count": 2'),
        document(2): old[document(2)],
    }
    assert len((lock_folder_of(site) / "write.tmp").read_bytes()) == limit  # the cut-off write
    assert build(ratings, site) == 0
    assert documents(site)[document(2)].endswith(
        b'"rating_sum": 40000000000000, "rating_count": 10000000000000, "rating_value": "4.0"}\n'
    )
