"""A fast reading of the common layout, one article a line, that gives up on anything else.

Walking a million articles' YAML events costs about twice the C parser's own
time, spent in Python on each event. Most catalogues are written one article
per line, though, as a program would write them::

    articles:
      7: [5, 4, 5, 5, 5, 5]
      12: {sum: 29, count: 6}

For that layout, one regular expression a line reads the articles exactly.
This module never reports an error: when anything is unusual (another
layout, a character it does not expect, a rating out of scale, an id listed
twice) it returns None and the event walker reads the whole file again,
with its exact messages. So it only has to be right about the files it
accepts, and for those, a test holds its result equal to the walker's.

The rest of the file (``base_url``, ``scale``, comments, document markers)
is still read by the walker: the article lines are replaced by
``articles: {}`` and blank lines, so every other line keeps its number.

The exact layout taken, all else left to the walker:

- UTF-8 without a byte order mark, lines ending in LF only, no tab but in a
  comment, none of the characters YAML reads as a line break (CR, NEL, LS, PS);
- the top-level mapping in block style, its key ``articles`` unquoted at the
  start of a line, with nothing after it but a comment;
- then only article lines, blank lines and comment lines, the article lines
  indented alike by spaces, each ``ID: [R, R, ...]`` or ``ID: {sum: S, count: C}``
  with exactly one space after each colon and comma, and an optional comment;
- then, at the start of a line, anything the walker accepts on its own.

Why that is enough: up to the ``articles`` line both readings see the same
bytes, and the walker saw there a key of the top block mapping at column 0;
a block mapping at column 0 then reads the indented article lines as one
block mapping, which the first line starting at column 0 closes in both.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import repeat
from operator import le, mul
from typing import Final

import yaml

from ratings_api.errors import InputError
from ratings_api.loader import MAX_ID, Catalogue, Walker

_INT: Final = rb"0|-?[1-9][0-9]{0,99}"  # as the walker's INT_TEXT, with its digit limit
ARTICLE: Final = re.compile(
    rb"(?P<indent> +)(?P<id>[1-9][0-9]{0,18}): "
    rb"(?:\[(?P<ratings>(?:" + _INT + rb")(?:, (?:" + _INT + rb"))*)?\]"
    rb"|\{sum: (?P<sum>" + _INT + rb"), count: (?P<count>0|[1-9][0-9]{0,99})\})"
    rb"(?: +#[^\n]*)?\n"
)
ZERO: Final = ord("0")
SEPARATOR: Final = ord(",") + ord(" ")
BLANK_OR_COMMENT: Final = re.compile(rb" *(?:#[^\n]*)?\n")  # libyaml refuses a tab there
ARTICLES_KEY: Final = re.compile(rb"^articles:(?: +#[^\n]*)?\n", re.MULTILINE)
# Characters libyaml refuses, or reads as line breaks where a line-based reader
# would not (CR, NEL, LS, PS): with any of them, the walker decides.
UNUSUAL_ASCII: Final = re.compile(rb"[\x00-\x08\x0b-\x1f\x7f]")
UNUSUAL_TEXT: Final = re.compile("[\x80-\x9f\u2028\u2029\ufeff\ufffe\uffff]")


def load_fast(path: str, data: bytes) -> Catalogue | None:
    """The catalogue of ``data``, or None where only the event walker may judge it."""
    if not data.endswith(b"\n"):
        data += b"\n"  # a final line break changes nothing in YAML
    if not _plain_characters(data):
        return None
    key = ARTICLES_KEY.search(data)
    if key is None:
        return None
    articles = _Articles()
    end = _read_articles(data, key.end(), articles)
    ids = articles.ids
    if end is None or len(set(ids)) != len(ids) or max(ids) > MAX_ID:
        return None
    meta = _rest_of_file(path, data, key.start(), key.end(), end)
    if meta is None or not articles.within(meta.scale):
        return None
    meta.ids, meta.sums, meta.counts = ids, articles.sums, articles.counts
    return meta


@dataclass
class _Articles:
    """The articles read so far, and every rating, for the scale to judge at the end."""

    ids: list[int] = field(default_factory=list)
    sums: list[int] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)
    digits: set[int] = field(default_factory=set)  # the bytes of one-digit ratings, and ", "
    values: list[int] = field(default_factory=list)  # the other ratings
    # {sum, count} as given, in two lists of the very numbers of sums and counts: a
    # tuple each held 64 MB more at a million articles, at the peak of the reading.
    total_sums: list[int] = field(default_factory=list)
    total_counts: list[int] = field(default_factory=list)

    def within(self, scale: tuple[int, int] | None) -> bool:
        if scale is None:
            return True
        low, high = scale
        digits = self.digits - set(b", ")
        if digits and not low <= min(digits) - ZERO <= max(digits) - ZERO <= high:
            return False
        if self.values and not low <= min(self.values) <= max(self.values) <= high:
            return False
        # Ratings within the scale give sums within it; only totals need the check,
        # made in C (map over operator's functions): no Python frame per article.
        sums, counts = self.total_sums, self.total_counts
        return all(map(le, map(mul, repeat(low), counts), sums)) and all(
            map(le, sums, map(mul, repeat(high), counts))
        )


def _plain_characters(data: bytes) -> bool:
    if UNUSUAL_ASCII.search(data):
        return False
    if data.isascii():
        return True
    try:
        return not UNUSUAL_TEXT.search(data.decode("utf-8"))
    except UnicodeDecodeError:
        return False


def _read_articles(data: bytes, position: int, articles: _Articles) -> int | None:
    """Read article lines from ``position``; where they end, or None if unusual."""
    article, blank = ARTICLE.match, BLANK_OR_COMMENT.match
    add_id, add_sum, add_count = articles.ids.append, articles.sums.append, articles.counts.append
    add_digits, add_values = articles.digits.update, articles.values.extend
    indent = None
    size = len(data)
    while position < size:
        line = article(data, position)
        if line is None:
            line = blank(data, position)
            if line is None:
                break
            position = line.end()
            continue
        spaces, article_id, ratings, total, count = line.groups()
        if indent != spaces:
            if indent is not None:
                return None  # entries of one mapping must line up
            indent = spaces
        add_id(int(article_id))
        if ratings is not None:
            count = ratings.count(b",") + 1
            if len(ratings) == 3 * count - 2:
                # Only one-digit ratings fit "d, d, d" in this length, so the
                # sum of the bytes is the digits' plus (count - 1) separators.
                add_sum(sum(ratings) - SEPARATOR * (count - 1) - ZERO * count)
                add_digits(ratings)
            else:
                values = [int(rating) for rating in ratings.split(b", ")]
                add_sum(sum(values))
                add_values(values)
            add_count(count)
        elif total is None:  # the empty list, []
            add_sum(0)
            add_count(0)
        else:
            total, count = int(total), int(count)
            if count == 0 and total != 0:
                return None
            add_sum(total)
            add_count(count)
            articles.total_sums.append(total)
            articles.total_counts.append(count)
        position = line.end()
    if not articles.ids or (position < size and data[position] in b" \t"):
        return None  # no article (then 'articles' is null), or a line of another layout
    return position


def _rest_of_file(path: str, data: bytes, start: int, after_key: int, end: int) -> Catalogue | None:
    """Walk the file with the article lines blanked out: base_url, scale, and the checks."""
    blanked = data.count(b"\n", after_key, end)
    rest = data[:start] + b"articles: {}\n" + b"\n" * blanked + data[end:]
    walker = Walker(path, rest, scale=None)
    try:
        meta = walker.document()
    except (InputError, yaml.YAMLError):
        return None
    # The walker must have seen the very 'articles' key found by the search,
    # at the start of its line, and not one inside a multi-line string; and
    # as a key of a block mapping. In a flow mapping ({...}), the same lines
    # say something else entirely: the article lines are not a block there.
    if (
        walker.top_flow_style is not False
        or walker.articles_line != data.count(b"\n", 0, start)
        or walker.articles_column != 0
        or meta.ids
    ):
        return None
    return meta
