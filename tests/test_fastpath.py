"""Two readers, one verdict: the fast reading gives up, or agrees with the walker exactly."""

from __future__ import annotations

import csv
import io
import random
from collections.abc import Callable
from typing import Any, Final

from ratings_api import csvinput
from ratings_api.errors import InputError
from ratings_api.loader import Catalogue, load_fast, load_strict

USUAL: Final = (
    b"# ratings\nbase_url: https://example.com\nscale: [1, 5]\narticles:\n"
    b"  7: [5, 4, 5, 5, 5, 5]  # a comment\n\n  12: {sum: 29, count: 6}\n# a note\n  31: []\n"
)


def reading(read: Callable[..., Catalogue], *args: Any) -> Catalogue | str:
    """What ``read`` makes of an input: a catalogue or one line, never another exception."""
    try:
        return read(*args)
    except InputError as error:
        return str(error)


def taken_alike(data: bytes) -> bool:
    """Whether the fast reading took ``data``; if it did, the walker must read the same."""
    fast = load_fast("ratings.yaml", data)
    assert fast in (None, reading(load_strict, "ratings.yaml", data)), data
    return fast is not None


# The usual layout's near misses: each is left to the walker, or read as the walker reads it.
# Those an error case holds (an id twice, past the scale or the bounds, not UTF-8...) are its:
# the fast path taking one would build, not fail (tests/test_cases.py).
NEAR_MISSES: Final = {
    "out-of-scale": b"scale: [1, 5]\narticles:\n  7: [6]\n",
    "the-placeholder-s-id": b"articles:\n  9007199254740991: [5]\n",
    "rating-past": b"articles:\n  7: [-9007199254740992]\n",
    "count-past": b"articles:\n  7: {sum: 1, count: 9007199254740992}\n",
    "crlf": b"articles:\r\n  7: [5]\r\n",
    "line-separator": "articles:\n  7: [5] # \u2028  8: [1]\n".encode(),
    "misaligned": b"articles:\n  7: [5]\n    8: [4]\n",
    "block-list-after": b"articles:\n  7: [5]\n  8:\n  - 4\n",
    "key-in-string": b"base_url: 'https://x.example\narticles:\n  7: [5]\n'\n",
    "articles-twice": b"articles:\n  7: [5]\narticles:\n  8: [4]\n",
    "two-documents": b"articles:\n  7: [5]\n---\narticles:\n  8: [4]\n",
    # A fast reading once took this flow mapping over lines, and built 7; the walker
    # refuses it ("'articles' must be a mapping").
    "flow-over-lines": b"{base_url: https://x.example,\narticles:\n  7: [5]\n}\n",
    "flow-top-level-short": b"{articles:\n  7: [5]}\n",
    "byte-order-mark": b"\xef\xbb\xbfarticles:\n  7: [5]\n",
    "tab-line-after": b"articles:\n  7: [5]\n\t\n",
    "key-in-string-then-the-key": (  # the walker reads article 8 only
        b'base_url: "https://x.example\narticles:\n  7: [5]\n"\narticles:\n  8: [4]\n'
    ),
}


# Random documents: the usual layout, its near misses, and every style YAML allows.

ODD_VALUES: Final = (
    "[5,4]", "[-1, 1]", "{count: 2, sum: 9}", "\n    - 5\n    - 4", "[ 5 ]", "~", "[05]",
    "[5, 4] #c", "[5, 4]#c", "[5, 4]  # c: [1]", '["5"]', "[!!int 5]", "&a [5]", "[10, 2]", "[{a: 1}]",
)  # fmt: skip
NOISE: Final = ("\t", "\r", "#", ":", "[", "'", '"', " ", "\n", "\u2028", "\x85", "é", "-", "  ")
BREAKS: Final = ("\r\n", "\r", "\x85", "\u2028", "\u2029")


def value(rng: random.Random, odd: bool) -> str:
    kind = rng.random() * (1 if odd else 0.7)
    low, high = (0, 6) if odd else (1, 5)
    if kind < 0.5:
        return "[" + ", ".join(str(rng.randint(low, high)) for _ in range(rng.randint(0, 6))) + "]"
    if kind < 0.7:
        count = rng.randint(0, 5)
        total = rng.randint(low, high) * count if rng.random() < 0.9 else 3
        return f"{{sum: {total}, count: {count}}}"
    return rng.choice(ODD_VALUES)


def articles(rng: random.Random, odd: bool, flow: bool) -> str:
    indent = rng.choice(["  ", "    ", " "])
    ids = [
        rng.choice([rng.randint(1, 40), rng.randint(1, 10**6)]) for _ in range(rng.randint(0, 8))
    ]
    key = rng.choice(["articles"] * 8 + ['"articles"', "? articles\n"]) if odd else "articles"
    if flow:
        return f"{key}: {{" + ", ".join(f"{i}: {value(rng, odd)}" for i in ids) + "}"
    lines = [f"{indent}{'0' * (odd and rng.random() < 0.1)}{i}: {value(rng, odd)}" for i in ids]
    for _ in range(rng.randint(0, 3)):
        blank = rng.choice(["", "# note", "  # note", "\t# tab", "   "])
        lines.insert(rng.randint(0, len(lines)), blank)
    suffix = rng.choice([" # the articles", " {}", " ", ""] if odd else ["", " # the articles"])
    return f"{key}:{suffix}\n" + "\n".join(lines)


def document(rng: random.Random) -> bytes:
    """A small catalogue: half the time in the usual layout, else with odd parts."""
    odd = rng.random() < 0.5
    style = rng.choice(["block"] * 3 + ["mixed", "flow", "flow-lines"]) if odd else "block"
    body = articles(rng, odd, style in ("mixed", "flow"))
    scale = rng.choice(["scale: [1, 5]", "scale: [0, 6]", "scale: [2, 4]", "", "scale:\n- 1\n- 5"])
    url = rng.choice(["base_url: https://example.com", "base_url: 'https://example.com/x'", ""])
    parts = [part for part in (body, scale, url) if part]
    rng.shuffle(parts)
    if style == "flow-lines":
        parts = ["{" + ",\n".join(part.replace("\n- ", " ") for part in parts) + "\n}"]
    elif style == "flow":
        parts = ["{" + ", ".join(part.replace(":\n- 1\n- 5", ": [1, 5]") for part in parts) + "}"]
    text = rng.choice(["", "---\n", "--- # start\n", "%YAML 1.1\n---\n"] if odd else [""])
    text += "\n".join(parts) + rng.choice(["\n", "", "\n\n", "\n...\n"])
    if odd and rng.random() < 0.5:
        at = rng.randint(0, len(text))
        text = text[:at] + rng.choice(NOISE) + text[at:]
    if odd and rng.random() < 0.1:
        text = text.replace("\n", rng.choice(BREAKS))
    if odd and rng.random() < 0.05:
        text = "\ufeff" + text
    return text.encode()


def test_fast_and_walker_agree_on_random_documents_and_the_usual_layout_is_read_fast() -> None:
    assert taken_alike(USUAL)
    rng = random.Random(7)
    documents = [document(rng) for _ in range(10_000)] + list(NEAR_MISSES.values())
    taken = sum(taken_alike(data) for data in documents)
    assert 2_000 < taken < 8_000, taken  # both readings were exercised
    assert {data[:1] for data in documents} >= {b"{", b"a", b"-", b"\xef", b"%"}


# CSV: the quick reading takes every file that keeps the rules; the rest get one line.
TOTALS_ORDER: Final = ["rating_count", "article_id", "rating_sum"]
CSV_FIELDS: Final = (
    "7", "12", "5", "0", "-3", "", "4.5", " 5", '"5"', "9007199254740991", "9" * 17,
)  # fmt: skip


def csv_document(rng: random.Random) -> bytes:
    header = rng.choice([["article_id", "rating"], ["rating", "article_id"], TOTALS_ORDER])
    rows = [",".join(header)] + [
        ",".join(rng.choice(CSV_FIELDS[:4] * 6 + CSV_FIELDS[4:]) for _ in header)
        for _ in range(rng.randint(0, 6))
    ]
    return ("\n".join(rows) + rng.choice(["\n", "\r\n", ""])).encode()


def quoted(data: bytes) -> bytes:
    """``data`` with every field quoted."""
    out = io.StringIO()
    rows = csv.reader(io.StringIO(data.decode(), newline=""))
    csv.writer(out, quoting=csv.QUOTE_ALL, lineterminator="\n").writerows(rows)
    return out.getvalue().encode()


def test_csv_readings_agree() -> None:
    """A file is a catalogue or one line: the same with CR line ends; with every field
    quoted (docs/input.md: quoting changes nothing) or after a blank line, which only the
    csv module's field by field reading takes, the same catalogue or a line."""
    rng, kinds = random.Random(7), set()
    for _ in range(3_000):
        data, scale = csv_document(rng), rng.choice([None, (1, 5)])
        verdict = reading(csvinput.read, "r.csv", data, scale)
        cr = data.replace(b"\r\n", b"\n").replace(b"\n", b"\r")
        assert reading(csvinput.read, "r.csv", cr, scale) == verdict, cr
        for variant in (quoted(data), b"\n" + data):
            alike = reading(csvinput.read, "r.csv", variant, scale)
            assert alike == verdict or type(alike) is type(verdict) is str, variant
        kinds.add(type(verdict))
    assert kinds == {Catalogue, str}  # both were exercised
