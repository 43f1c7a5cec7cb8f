"""The fast reading either gives up or agrees with the event walker, exactly."""

from __future__ import annotations

import random

import pytest

from ratings_api.errors import InputError
from ratings_api.fastpath import load_fast
from ratings_api.loader import Catalogue, load

CANONICAL = (
    b"# ratings\nbase_url: https://example.com\nscale: [1, 5]\narticles:\n"
    b"  7: [5, 4, 5, 5, 5, 5]  # a comment\n\n  12: {sum: 29, count: 6}\n# a note\n  31: []\n"
)


def walker_says(data: bytes) -> Catalogue | str:
    try:
        return load("ratings.yaml", data)
    except InputError as error:
        return str(error)


def assert_agrees(data: bytes) -> bool:
    """Whether the fast reading took ``data``; if it did, the walker must agree."""
    fast = load_fast("ratings.yaml", data)
    if fast is None:
        return False
    assert fast == walker_says(data), data
    return True


def test_the_canonical_layout_is_read_fast() -> None:
    assert assert_agrees(CANONICAL)
    assert load_fast("ratings.yaml", CANONICAL) == Catalogue(
        ids=[7, 12, 31],
        sums=[29, 29, 0],
        counts=[6, 6, 0],
        scale=(1, 5),
        base_url="https://example.com",
        base_url_at="ratings.yaml:2:11",
    )


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"articles:\nscale: [1, 5]\n", id="articles-null"),
        pytest.param(b"articles:\n  7: [5]\n  7: [4]\n", id="id-twice"),
        pytest.param(b"scale: [1, 5]\narticles:\n  7: [6]\n", id="out-of-scale"),
        pytest.param(b"articles:\n  7: [5]\nscale: [1, 4]\n", id="out-of-late-scale"),
        pytest.param(b"articles:\n  7: {sum: 3, count: 0}\n", id="sum-without-count"),
        pytest.param(b"articles:\n  9999999999999999999: [5]\n", id="id-too-large"),
        pytest.param(b"articles:\r\n  7: [5]\r\n", id="crlf"),
        pytest.param("articles:\n  7: [5] # \u2028  8: [1]\n".encode(), id="line-separator"),
        pytest.param(b"articles:\n  7: [5] # caf\xe9\n", id="not-utf8"),
        pytest.param(b"articles:\n  7: [5]\n    8: [4]\n", id="misaligned"),
        pytest.param(b"articles:\n  7: [5]\n  8:\n  - 4\n", id="block-list-after"),
        pytest.param(b"base_url: 'https://x.example\narticles:\n  7: [5]\n'\n", id="key-in-string"),
        pytest.param(b"articles:\n  7: [5]\narticles:\n  8: [4]\n", id="articles-twice"),
        pytest.param(
            b'base_url: "https://x.example\narticles:\n  7: [5]\n"\narticles:\n  8: [4]\n',
            id="key-in-string-then-the-key",  # the walker reads article 8 only
        ),
        pytest.param(b"articles:\n  7: [5]\n---\narticles:\n  8: [4]\n", id="two-documents"),
    ],
)
def test_unusual_files_are_left_to_the_walker(data: bytes) -> None:
    assert load_fast("ratings.yaml", data) is None


def random_value(rng: random.Random, odd: bool) -> str:
    kind = rng.random() * (1 if odd else 0.7)
    low, high = (0, 6) if odd else (1, 5)
    if kind < 0.5:
        return "[" + ", ".join(str(rng.randint(low, high)) for _ in range(rng.randint(0, 6))) + "]"
    if kind < 0.7:
        count = rng.randint(0, 5)
        return f"{{sum: {rng.randint(low, high) * count if rng.random() < 0.9 else 3}, count: {count}}}"
    return rng.choice(
        [
            "[5,4]",
            "[-1, 1]",
            "{count: 2, sum: 9}",
            "\n    - 5\n    - 4",
            "[ 5 ]",
            "~",
            "[05]",
            "[5, 4] #c",
            "[5, 4]#c",
            "[5, 4]  # c: [1]",
            '["5"]',
            "[!!int 5]",
            "&a [5]",
            "[1, 2, 3]",
        ]
    )


def random_document(rng: random.Random) -> bytes:
    """A small catalogue, half the time in the canonical layout, else with odd parts."""
    odd = rng.random() < 0.5
    indent = rng.choice(["  ", "    ", " "])
    ids = [
        rng.choice([rng.randint(1, 40), rng.randint(1, 10**6)]) for _ in range(rng.randint(0, 8))
    ]
    lines = [
        f"{indent}{'0' if odd and rng.random() < 0.1 else ''}{i}: {random_value(rng, odd)}"
        for i in ids
    ]
    for _ in range(rng.randint(0, 3)):
        lines.insert(
            rng.randint(0, len(lines)), rng.choice(["", "# note", "  # note", "\t# tab", "   "])
        )
    suffixes = ["", " # the articles", " {}", " "] if odd else ["", " # the articles"]
    scales = ["scale: [1, 5]", "scale: [0, 6]", "scale: [2, 4]", "", "scale:\n  - 1\n  - 5"]
    urls = ["base_url: https://example.com", "base_url: 'https://example.com/x'", ""]
    parts = [
        "articles:" + rng.choice(suffixes) + "\n" + "\n".join(lines),
        rng.choice(scales if odd else scales[:2] + scales[3:]),
        rng.choice([*urls, "base_url: https://example.com/#top"] if odd else urls),
    ]
    rng.shuffle(parts)
    text = "\n".join(part for part in parts if part) + rng.choice(["\n", "", "\n\n", "\n...\n"])
    if odd and rng.random() < 0.5:
        position = rng.randint(0, len(text))
        noise = rng.choice(
            ["\t", "\r", "#", ":", "[", "'", '"', " ", "\n", "\u2028", "\x85", "é", "-", "  "]
        )
        text = text[:position] + noise + text[position:]
    return text.encode()


def test_fast_and_walker_agree_on_random_documents() -> None:
    rng = random.Random(7)
    taken = 0
    for _ in range(20000):
        taken += assert_agrees(random_document(rng))
    assert 5000 < taken < 15000, taken  # both ways were exercised
