"""Whole output trees as data, for exact comparisons with readable failures."""

from __future__ import annotations

import difflib
import os
from pathlib import Path

from ratings_api.cli import main
from ratings_api.rating import ARTICLES_PATH


def read_tree(root: Path, under: str = "") -> dict[str, bytes]:
    """Every file below ``root`` (or ``root / under``) by its path from ``root``, in order:
    all of them, as the build keeps its lock and temporary file outside (``lock_folder_of``).

    A link to a file is read through; a link to a folder is not followed. Plain ``os``
    calls: pathlib's ``rglob`` took seconds for the tests' 6,000-article trees.
    """
    tree: dict[str, bytes] = {}
    folders = [under] if os.path.isdir(os.path.join(root, under)) else []
    while folders:
        folder = folders.pop()
        with os.scandir(os.path.join(root, folder)) as entries:
            for entry in entries:
                name = f"{folder}/{entry.name}" if folder else entry.name
                if entry.is_dir(follow_symlinks=False):
                    folders.append(name)
                elif entry.is_file():
                    with open(entry.path, "rb") as file:
                        tree[name] = file.read()
    return dict(sorted(tree.items()))


def document(article_id: int) -> str:
    """An article's document, by its path from the output folder."""
    return f"{ARTICLES_PATH}/{article_id}/rating/index.json"


def lock_folder_of(root: Path) -> Path:
    """The folder of the build lock of the output folder ``root``: beside it, as the docs say."""
    return root.parent / f".{root.name}.generate"


def build(ratings: Path, site: Path, *options: str) -> int:
    """The command line's exit code, building ``site`` from the file ``ratings``."""
    return main(["--input", str(ratings), "--output", str(site), *options])


def built(folder: Path, ratings: str, *options: str) -> Path:
    """``ratings`` written to ``folder``/ratings.yaml, and ``folder``/site built from it."""
    (folder / "ratings.yaml").write_text(ratings, encoding="utf-8")
    assert build(folder / "ratings.yaml", folder / "site", "--quiet", *options) == 0
    return folder / "site"


def documents(root: Path) -> dict[str, bytes]:
    """The articles' documents only: the files that describe the API have tests of their own."""
    return read_tree(root, ARTICLES_PATH)


def snapshot(root: Path) -> dict[str, tuple[bytes | None, int]]:
    """Every file and folder below ``root`` with its bytes and modification time."""
    return {
        str(path.relative_to(root)): (
            path.read_bytes() if path.is_file() else None,
            os.stat(path).st_mtime_ns,
        )
        for path in sorted(root.rglob("*"))
    }


def tree_diff(actual: dict[str, bytes], expected: dict[str, bytes]) -> str:
    """A unified diff of two trees, each line shown with its file's path."""

    def lines(tree: dict[str, bytes]) -> list[str]:
        return [
            f"{name}: {line}"
            for name in tree
            for line in tree[name].decode(errors="replace").splitlines()
        ]

    return "\n".join(
        difflib.unified_diff(lines(expected), lines(actual), "expected", "actual", lineterm="")
    )
