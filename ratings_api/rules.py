"""The input rules, each stated once with its message: what an id, an integer, a rating and an
article's totals may be, whatever the format they come in; and the base URL (``url_problem``).

The readers (loader.py's walker of YAML, csvinput.py) parse their texts with these
functions and place a ``RuleError`` at the value it names; fastpath.py's columns are
held to them by ``keeps_the_rules``, and a file they fail is left to the walker for
the message. Every integer of a document lies within ±MAX, so that every JSON reader
reads it exactly (RFC 7493, I-JSON, §2.2: JavaScript's ``Number.MAX_SAFE_INTEGER``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit

from ratings_api.contract import MAX_ID

if TYPE_CHECKING:
    from ratings_api.fastpath import Articles

MAX: Final = MAX_ID  # 2**53 - 1, for every integer of a document, the id included
DIGITS: Final = len(str(MAX))  # a longer text is past MAX, whatever its digits
WHY: Final = "JSON readers round past it"
ID_TEXT: Final = re.compile(r"[1-9][0-9]*")
INT_TEXT: Final = re.compile(r"0|-?[1-9][0-9]*")
# The texts above, of at most one digit more than MAX: what a quick reader (fastpath.py,
# csvinput.py's) may hand to int() before keeps_the_rules judges the numbers.
SHORT_ID: Final = rf"[1-9][0-9]{{0,{DIGITS}}}"
SHORT_INT: Final = rf"(?:0|-?{SHORT_ID})"
TOTALS_FIELDS: Final = ("sum", "count")

Scale = tuple[int, int] | None


class RuleError(ValueError):
    """A rule the input breaks: its message, and ``at``, which of the values checked
    (0 or 1: the sum or the count of totals) the reader places it at."""

    def __init__(self, message: str, at: int = 0) -> None:
        super().__init__(message)
        self.at = at


def found(text: str | None, shown: str) -> str:
    """How a message names a value that is not what it should be: ``shown``, else its text."""
    return shown or (f"'{text}'" if text else "nothing")


def article_id(text: str | None, shown: str = "") -> int:
    """The article id ``text`` writes: a positive integer in plain decimal, at most MAX.
    ``shown`` names a value that is not plain text (None), or names it otherwise."""
    if text is None or not ID_TEXT.fullmatch(text):
        seen = found(text, shown)
        raise RuleError(f"an article id must be a positive integer in plain decimal, found {seen}")
    if len(text) > DIGITS or int(text) > MAX:
        raise RuleError(f"an article id must be at most {MAX} ({WHY}), found {text}")
    return int(text)


def integer(text: str | None, name: str, article_id: int | None = None, shown: str = "") -> int:
    """The integer ``text`` writes in plain decimal, within ±MAX: the article's ``name``.
    ``shown`` as for ``article_id``."""
    if text is None or not INT_TEXT.fullmatch(text):
        raise RuleError(f"{named(name, article_id)} must be an integer, found {found(text, shown)}")
    return within(int(text) if len(text) <= DIGITS + 1 else MAX + 1, name, article_id, text)


def within(
    number: int, name: str, article_id: int | None = None, text: str = "", at: int = 0
) -> int:
    """``number``, the article's ``name`` (written ``text``), if it lies within ±MAX."""
    if not -MAX <= number <= MAX:
        shown = text or str(number)
        if len(shown) > 2 * DIGITS:  # a mistake, not a number to print
            shown = f"a number of {len(shown.lstrip('-'))} digits"
        message = f"{named(name, article_id)} must be within ±{MAX} ({WHY}), found {shown}"
        raise RuleError(message, at)
    return number


def named(name: str, article_id: int | None) -> str:
    """How a message names a value: ``name``, of the article ``article_id`` if any."""
    return name if article_id is None else f"article {article_id}: {name}"


def listed_twice(article_id: int, first_line: int) -> str:
    return f"article {article_id} is listed twice (first at line {first_line})"


def rating(article_id: int, value: int, scale: Scale) -> int:
    """``value``, a rating of the article, if it lies on ``scale``."""
    if scale is not None and not scale[0] <= value <= scale[1]:
        low, high = scale
        raise RuleError(f"article {article_id}: rating {value} is outside the scale {low}..{high}")
    return value


def rated(text: str | None, article_id: int, total: int, scale: Scale, shown: str = "") -> int:
    """``total``, the sum of an article's ratings so far, with one more, written ``text``: an
    integer (``shown`` as for ``article_id``) on ``scale``, the sum staying within ±MAX."""
    total += rating(article_id, integer(text, "a rating", article_id, shown), scale)
    if not -MAX <= total <= MAX:
        raise RuleError(f"article {article_id}: its ratings add up past ±{MAX} ({WHY})")
    return total


def totals(
    article_id: int, total: int, count: int, scale: Scale, names: Sequence[str] = TOTALS_FIELDS
) -> None:
    """Check that an article's sum and count (named by ``names``) lie within ±MAX and agree
    with each other and ``scale``; else a RuleError at the one at fault."""
    sum_name, count_name = names
    article = f"article {article_id}:"
    within(total, sum_name, article_id)
    if count < 0:
        raise RuleError(f"{article} {count_name} must not be negative, found {count}", 1)
    within(count, count_name, article_id, at=1)
    if count == 0 and total != 0:
        raise RuleError(f"{article} {sum_name} must be 0 when {count_name} is 0, found {total}")
    if scale is not None and not scale[0] * count <= total <= scale[1] * count:
        low, high = scale
        raise RuleError(
            f"{article} {sum_name} {total} is outside {low * count}..{high * count}, "
            f"the range of {count} ratings on the scale {low}..{high}"
        )


def keeps_the_rules(read: Articles, scale: Scale) -> bool:
    """Whether columns ``read`` without positions (fastpath.py's, csvinput.py's quick reading)
    keep every rule above: each id once and at most MAX, every rating they were added up from
    within ±MAX and on ``scale``, each article's totals."""
    try:
        article_id(str(max(read.ids, default=1)))
        for value in read.ratings:
            rating(0, within(value, "a rating"), scale)
        # Articles of one sum and count share the verdict: a real catalogue of a
        # million articles has a few thousand such pairs, each checked once.
        for total, count in set(zip(read.sums, read.counts, strict=True)):
            totals(0, total, count, scale)
    except RuleError:
        return False
    return len(set(read.ids)) == len(read.ids)


def url_problem(url: str) -> str | None:
    """What keeps ``url`` from being an absolute http(s) URL to build on, or None: the rule of
    the base URL, in its words; the endpoint of object storage is held to it too."""
    if not url.startswith(("http://", "https://")):
        return "the base URL must start with http:// or https://"
    if any(char.isspace() or not char.isprintable() for char in url):
        return "the base URL must not contain spaces or control characters"
    try:
        parts = urlsplit(url)
        port = parts.port  # urllib reads the port only when asked, and may fail then
    except ValueError as error:  # "Invalid IPv6 URL", "Port out of range 0-65535", ...
        return f"the base URL cannot be read as a URL ({error})"
    if not parts.hostname:
        return "the base URL has no host"
    if port == 0:
        return "the base URL's port must be a number from 1 to 65535"
    if parts.query or parts.fragment or url.endswith(("?", "#")):
        return "the base URL must not have a query or a fragment"
    return None
