"""Behaviour at scale, cheaply: no timings, only the same bytes however the site was made."""

from __future__ import annotations

import random
from pathlib import Path

from ratings_api.cli import main
from tests.trees import documents

# Thirty-odd writer batches of 256 (writer.BATCH): the paths a million articles take,
# but for the batch size, which grows only past a million (workers.PIPE_TOKENS batches).
SIZE = 8_000


def catalogue(seed: int) -> dict[int, list[int]]:
    rng = random.Random(seed)
    ids = rng.sample(range(1, 10 * SIZE), SIZE)
    return {
        article_id: [rng.randint(1, 5) for _ in range(rng.randint(0, 20))] for article_id in ids
    }


def flow_file(path: Path, articles: dict[int, list[int]]) -> Path:
    lines = "".join(
        f"  {article_id}: [{', '.join(map(str, ratings))}]\n"
        for article_id, ratings in articles.items()
    )
    path.write_text(f"base_url: https://example.com\nscale: [1, 5]\narticles:\n{lines}")
    return path


def block_file(path: Path, articles: dict[int, list[int]]) -> Path:
    """The same catalogue as PyYAML's dump would write it: the event walker reads this one."""
    lines = []
    for article_id, ratings in sorted(articles.items()):
        lines.append(f"  {article_id}:" + (" []" if not ratings else ""))
        lines += [f"  - {rating}" for rating in ratings]
    path.write_text(
        "articles:\n" + "\n".join(lines) + "\nbase_url: https://example.com\nscale:\n- 1\n- 5\n"
    )
    return path


def build(ratings: Path, site: Path) -> None:
    assert main(["--input", str(ratings), "--output", str(site), "--quiet"]) == 0


def test_a_large_site_built_in_pieces_equals_one_built_at_once(tmp_path: Path) -> None:
    articles = catalogue(seed=5)
    ids = list(articles)
    build(flow_file(tmp_path / "all.yaml", articles), tmp_path / "at-once")

    pieces = tmp_path / "pieces"
    build(flow_file(tmp_path / "half.yaml", {i: articles[i] for i in ids[: SIZE // 2]}), pieces)
    stale = {i + 10 * SIZE: [1] for i in range(1, 1001)}  # articles to be dropped later
    changed = {i: [5] for i in ids}  # every rating different
    build(flow_file(tmp_path / "changed.yaml", changed | stale), pieces)
    build(flow_file(tmp_path / "all.yaml", articles), pieces)

    expected = documents(tmp_path / "at-once")
    assert len(expected) == SIZE
    assert documents(pieces) == expected


def test_the_walker_and_the_fast_reading_build_the_same_site(tmp_path: Path) -> None:
    articles = catalogue(seed=6)

    build(flow_file(tmp_path / "flow.yaml", articles), tmp_path / "fast")
    build(block_file(tmp_path / "block.yaml", articles), tmp_path / "walked")

    assert documents(tmp_path / "walked") == documents(tmp_path / "fast")
