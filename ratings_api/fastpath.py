"""The usual layout of ratings.yaml, one article a line, read without PyYAML's events.

A program writes the catalogue so::

    articles:
      7: [5, 4, 5, 5, 5, 5]
      12: {sum: 29, count: 6}

Walking a million articles' events is too slow for a publish (bench/README.md), so
this module reads the block of such lines under ``articles:`` with regular
expressions, and checks no rule: on anything unusual (another layout, a character
it does not expect) ``load`` gives None, and loader.load_fast holds the numbers it
read to rules.py; either way the strict reader (loader.py) reads a file they fail,
with its exact messages.

The strict reader reads the rest of the file (keys, comments, markers) with the
block replaced by one line of this module's, ``ID: []`` with an id the file does not
hold, and blank lines. Only if that line comes back as the one article were the
lines what this module read: the entries of the block mapping under the top-level
key ``articles``, not lines inside a string or a flow mapping.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final

from ratings_api.rules import MAX, SHORT_ID, SHORT_INT

PLACEHOLDER: Final = MAX  # the id of the line that stands for the block
PLACEHOLDER_TEXT: Final = str(PLACEHOLDER).encode()
ARTICLES_KEY: Final = re.compile(rb"^articles:(?: +#[^\n]*)?\n", re.MULTILINE)
# A comment in the block is printable ASCII, as its entries are: no character in the block
# that YAML may read as a line break (CR, NEL, LS, PS) or refuse, and nothing to decode.
COMMENT: Final = r"#[\t -~]*"
BLANK: Final = rf" *(?:{COMMENT})?\n".encode()  # libyaml refuses a tab there
FIRST_INDENT: Final = re.compile(rb"(?: *(?:#[^\n]*)?\n)*( +)[1-9]")
BLOCK_END: Final = re.compile(rb"^[^ #\n]", re.MULTILINE)  # a line at column 0, not a comment
# An entry, after its indent: its id, then its ratings, or its sum and count.
ENTRY: Final = (
    rf"({SHORT_ID}): (?:\[((?:{SHORT_INT}(?:, {SHORT_INT})*)?)\]"
    rf"|\{{sum: ({SHORT_INT}), count: ({SHORT_INT})\}})(?: +{COMMENT})?\n"
).encode()
ZERO: Final = ord("0")
CHUNK: Final = 1 << 20  # bytes of entries matched at once: the matches' memory stays small


@dataclass
class Articles:
    """The block's articles as three columns, and every rating they were added up from."""

    ids: list[int] = field(default_factory=list)
    sums: list[int] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)
    digits: set[int] = field(default_factory=set)  # the bytes of one-digit ratings
    ratings: set[int] = field(default_factory=set)  # every rating's value, once, in the end
    rest: bytes = b""  # the file with the block replaced, for the strict reader


def load(data: bytes) -> Articles | None:
    """The articles of ``data`` and the rest of it, or None where only the walker may judge."""
    if not data.endswith(b"\n"):
        data += b"\n"  # a final line break changes nothing in YAML
    key = ARTICLES_KEY.search(data)
    if key is None or PLACEHOLDER_TEXT in data:
        return None
    start = key.end()
    first = FIRST_INDENT.match(data, start)
    after = BLOCK_END.search(data, start)
    end = len(data) if after is None else after.start()
    if first is None or data[end : end + 1] == b"\t":
        return None
    articles = Articles()
    lines = data.count(b"\n", start, end)
    # Every line of the block an entry, a blank line or a comment: no other layout.
    if _read(data, start, end, first[1], articles) != lines:
        return None
    articles.ratings.update(digit - ZERO for digit in articles.digits)
    placeholder = first[1] + PLACEHOLDER_TEXT + b": []\n"
    articles.rest = data[:start] + placeholder + b"\n" * (lines - 1) + data[end:]
    return articles


def _read(data: bytes, start: int, end: int, indent: bytes, articles: Articles) -> int:
    """Read the block's entries, indented by ``indent``, into ``articles``, a chunk at a time
    so that few matches are in memory; how many lines were read, blank lines included."""
    entry = re.compile(b"^(?:" + indent + ENTRY + b"|" + BLANK + b")", re.MULTILINE)  # cached
    add_id, add_sum, add_count = articles.ids.append, articles.sums.append, articles.counts.append
    blank = 0
    while start < end:
        stop = data.find(b"\n", min(start + CHUNK, end - 1)) + 1
        for article_id, ratings, total, count in entry.findall(data, start, stop):
            if not article_id:  # a blank line or a comment
                blank += 1
                continue
            add_id(int(article_id))
            if count:
                add_sum(int(total))
                add_count(int(count))
            elif len(ratings) == 3 * ratings.count(b",") + 1:
                # One-digit ratings only ("5, 4, 5"): every third byte a digit, whose
                # value is its byte's less the digit zero's.
                digits = ratings[::3]
                add_sum(sum(digits) - ZERO * len(digits))
                add_count(len(digits))
                articles.digits.update(digits)
            else:
                values = [int(rating) for rating in ratings.split(b", ")] if ratings else []
                add_sum(sum(values))
                add_count(len(values))
                articles.ratings.update(values)
        start = stop
    return len(articles.ids) + blank
