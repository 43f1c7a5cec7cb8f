"""The build's record: what lets an unchanged article cost one stat, and only that."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from ratings_api.cli import main
from ratings_api.record import MAGIC, RECORD_NAME, Record, read_record
from tests.trees import read_tree, state_of

DOCUMENT = "away/api/articles/{}/rating/index.json"


def ratings_file(folder: Path, articles: str) -> Path:
    path = folder / "ratings.yaml"
    path.write_text(f"base_url: https://example.com\nscale: [1, 5]\narticles:\n{articles}")
    return path


def build(ratings: Path, site: Path, *extra: str) -> int:
    return main(["--input", str(ratings), "--output", str(site), "--quiet", *extra])


def record_of(site: Path) -> Record | None:
    fd = os.open(state_of(site), os.O_RDONLY)
    try:
        return read_record(fd)
    finally:
        os.close(fd)


def test_the_record_holds_each_article_and_its_file(tmp_path: Path) -> None:
    site = tmp_path / "site"
    assert (
        build(ratings_file(tmp_path, "  7: [5, 4]\n  3: []\n  12: {sum: 29, count: 6}\n"), site)
        == 0
    )

    record = record_of(site)

    assert record is not None
    assert record.stamp == "1 https://example.com"
    assert (record.ids.tolist(), record.sums.tolist(), record.counts.tolist()) == (
        [7, 3, 12],
        [9, 0, 29],
        [2, 0, 6],
    )
    for place, article_id in enumerate(record.ids):
        status = os.stat(site / DOCUMENT.format(article_id))
        assert (record.inodes[place], record.times[place], record.sizes[place]) == (
            status.st_ino,
            status.st_mtime_ns,
            status.st_size,
        )


def tamper_in_place(path: Path, content: bytes) -> None:
    """Change a file's bytes but not its inode, size or time: what the record cannot see."""
    status = os.stat(path)
    assert len(content) == status.st_size
    with open(path, "r+b") as file:
        file.write(content)
    os.utime(path, ns=(status.st_atime_ns, status.st_mtime_ns))


def test_with_a_record_unchanged_documents_are_not_even_read(tmp_path: Path) -> None:
    site = tmp_path / "site"
    ratings = ratings_file(tmp_path, "  7: [5, 4]\n")
    assert build(ratings, site) == 0
    path = site / DOCUMENT.format(7)
    tampered = path.read_bytes().replace(b'"4.5"', b'"9.9"')
    tamper_in_place(path, tampered)

    assert build(ratings, site) == 0
    assert build(ratings, site, "--check") == 0

    assert path.read_bytes() == tampered  # the record vouched for it: proof it was not read
    (state_of(site) / RECORD_NAME).unlink()
    assert build(ratings, site, "--check") == 1  # without the record, every document is read
    assert build(ratings, site) == 0
    assert b'"4.5"' in path.read_bytes()


def test_a_document_replaced_on_disk_is_caught_despite_the_record(tmp_path: Path) -> None:
    """As `git checkout` does: a new file (another inode and time) renamed over the old."""
    site = tmp_path / "site"
    ratings = ratings_file(tmp_path, "  7: [5, 4]\n  8: [3]\n")
    assert build(ratings, site) == 0
    expected = read_tree(site)
    path = site / DOCUMENT.format(7)
    replacement = path.with_name("new")
    replacement.write_bytes(b'{"stale": true}\n')
    replacement.replace(path)
    (site / DOCUMENT.format(8)).unlink()

    assert build(ratings, site, "--check") == 1
    assert build(ratings, site) == 0

    assert read_tree(site) == expected


def test_with_a_record_dropped_articles_are_removed(tmp_path: Path) -> None:
    site = tmp_path / "site"
    assert build(ratings_file(tmp_path, "  1: [5]\n  2: [4]\n  3: [3]\n"), site) == 0
    assert record_of(site) is not None

    assert build(ratings_file(tmp_path, "  3: [3]\n  1: [5]\n"), site) == 0

    assert sorted(os.listdir(site / "away/api/articles")) == ["1", "3"]
    assert record_of(site).ids.tolist() == [3, 1]


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda data: data[:-1], id="truncated"),
        pytest.param(lambda data: b"something else\n" + data, id="foreign"),
        pytest.param(lambda data: data.replace(b"\n2\n", b"\nx\n", 1), id="bad-count"),
        pytest.param(lambda data: data.replace(b"\n2\n", b"\n-1\n", 1), id="negative-count"),
        pytest.param(lambda data: data + bytes(8), id="longer"),
        pytest.param(lambda data: data[: data.index(b"\n", len(MAGIC)) + 1], id="head-cut"),
    ],
)
def test_a_damaged_record_is_ignored(tmp_path: Path, damage: Callable[[bytes], bytes]) -> None:
    site = tmp_path / "site"
    ratings = ratings_file(tmp_path, "  1: [5]\n  2: [4]\n")
    assert build(ratings, site) == 0
    expected = read_tree(site)
    (site / DOCUMENT.format(1)).write_bytes(b"edited\n")
    record = state_of(site) / RECORD_NAME
    record.write_bytes(damage(record.read_bytes()))

    assert record_of(site) is None
    assert build(ratings, site) == 0

    assert read_tree(site) == expected
    assert record_of(site) is not None


def test_a_record_made_for_another_base_url_is_not_used(tmp_path: Path) -> None:
    site = tmp_path / "site"
    ratings = ratings_file(tmp_path, "  1: [5]\n")
    assert build(ratings, site) == 0

    assert build(ratings, site, "--base-url", "https://cdn.example.org") == 0

    assert (
        (site / DOCUMENT.format(1))
        .read_bytes()
        .startswith(b'{"article_url": "https://cdn.example.org/away/api/articles/1/"')
    )
    assert record_of(site).stamp == "1 https://cdn.example.org"


def test_a_build_that_fails_leaves_no_record(tmp_path: Path) -> None:
    site = tmp_path / "site"
    ratings = ratings_file(tmp_path, "  1: [5]\n")
    assert build(ratings, site) == 0
    (site / DOCUMENT.format(1)).unlink()
    (site / DOCUMENT.format(1)).mkdir()  # the document cannot be written now

    assert build(ratings, site) == 2

    assert not (state_of(site) / RECORD_NAME).exists()


def test_numbers_past_64_bits_build_without_a_record(tmp_path: Path) -> None:
    site = tmp_path / "site"
    ratings = tmp_path / "ratings.yaml"
    ratings.write_text(
        "base_url: https://example.com\narticles:\n  1: {sum: 100000000000000000000, count: 30000000000000000000}\n"
    )

    assert build(ratings, site) == 0
    assert build(ratings, site) == 0

    assert not (state_of(site) / RECORD_NAME).exists()
    assert b'"rating_value": "3.3"' in (site / DOCUMENT.format(1)).read_bytes()
