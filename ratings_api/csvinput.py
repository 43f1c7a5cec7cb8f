"""CSV input, as databases and spreadsheets export it: every CSV rule and message.

The header names the form: ``article_id,rating`` (a row a rating; an empty rating
lists an article not rated yet) or ``article_id,rating_sum,rating_count`` (a row an
article). The numbers follow rules.py. The usual file, as a database writes it (numbers,
quoted or not), is read by one regular expression, a chunk of rows at a time, and its
columns are held to rules.py as fastpath.py's are. Any other file, or one that fails,
is read by the csv module and rules.py's functions field by field: into the catalogue,
or to the first bad row's message, placed at its field.
"""

from __future__ import annotations

import codecs
import csv
import io
import re
from collections.abc import Iterator
from itertools import islice
from typing import Final, NoReturn

from ratings_api import rules
from ratings_api.errors import InputError
from ratings_api.fastpath import Articles
from ratings_api.loader import Catalogue, decoded
from ratings_api.rules import RuleError, Scale

RATINGS: Final = ("article_id", "rating")
TOTALS: Final = ("article_id", "rating_sum", "rating_count")
FORMS: Final = "article_id,rating or article_id,rating_sum,rating_count"
# The start of a header that names a form's first column, as a spreadsheet may save it.
HEADER: Final = re.compile(rb'(?:\xef\xbb\xbf)?"?article_id"?,')
# A quoted text, or a comma outside one: a field starts after each such comma. A quote
# inside a field that is not quoted is a character like any other.
FIELD_BREAK: Final = re.compile(r'"[^"]*"|(,)')


def read(path: str, data: bytes, scale: Scale) -> Catalogue:
    """Validate ``data``, the CSV bytes of ``path``, into a Catalogue on ``scale``."""
    # A spreadsheet's byte order mark is no part of a column name.
    text = decoded(path, data.removeprefix(codecs.BOM_UTF8))
    rows = _Rows(path, text)
    header = next(rows.records, None)
    if header is None:
        raise InputError(f"the file is empty; expected the header {FORMS}", path, 1, 1)
    columns = [header.index(name) for name in _form(rows, header)]  # where each of the form's is
    quick = _quick(text, header, columns)
    if quick is not None and rules.keeps_the_rules(quick, scale):
        return Catalogue(quick.ids, quick.sums, quick.counts, scale=scale)
    return _strict(rows, len(header), columns, scale)


QUICK_FIELDS: Final = {"article_id": rules.SHORT_ID, "rating": f"{rules.SHORT_INT}?"}
CHUNK: Final = 1 << 16  # characters of rows read at once: the fields' memory stays small


def _quick(text: str, header: list[str], columns: list[int]) -> Articles | None:
    """The columns, and the ratings, of a file whose every row is plain, with no rule
    checked, as fastpath.py reads them; or None for any other file."""
    patterns = (QUICK_FIELDS.get(name, rules.SHORT_INT) for name in header)
    fields = ",".join(f'(?:{pattern}|"{pattern}")' for pattern in patterns)
    row = re.compile(f"^(?:{fields})?\n", re.MULTILINE)  # a plain row, or a blank line
    # The csv module ends a line at CR, LF or CRLF alike, and a plain row holds none.
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if not text.endswith("\n"):
        text += "\n"  # a last row's line end changes nothing
    start = text.index("\n") + 1  # after the header
    by_id: dict[int, list[int]] = {}  # a row a rating: each article's sum and count
    found = Articles()
    while start < len(text):
        stop = text.find("\n", min(start + CHUNK, len(text) - 1)) + 1
        lines = row.findall(text, start, stop)
        if len(lines) != text.count("\n", start, stop):  # a line that is no plain row
            return None
        # Each of the form's columns, of the rows that are not blank lines; a line end
        # read as a comma, and none after the last.
        rows = "".join(filter(str.strip, lines)).replace('"', "")
        values = rows.replace("\n", ",").split(",")[:-1]
        at, at_value, *at_count = (values[column :: len(header)] for column in columns)
        if at_count:
            found.ids.extend(map(int, at))
            found.sums.extend(map(int, at_value))
            found.counts.extend(map(int, at_count[0]))
        else:
            for article_id, text_rating in zip(at, at_value, strict=True):
                entry = by_id.setdefault(int(article_id), [0, 0])
                if text_rating:
                    rating = int(text_rating)
                    found.ratings.add(rating)
                    entry[0] += rating
                    entry[1] += 1
        start = stop
    if by_id:  # a row a rating
        found.ids = list(by_id)
        found.sums = [entry[0] for entry in by_id.values()]
        found.counts = [entry[1] for entry in by_id.values()]
    return found


class _Rows:
    """The records that are not blank lines, and a message placed in the last one read."""

    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.text = text
        self.reader = csv.reader(io.StringIO(text, newline=""), strict=True)
        self.first = 1  # the line where the last record starts
        self.records = self._records()

    def _records(self) -> Iterator[list[str]]:
        reader = self.reader
        try:
            for row in reader:
                if row:
                    yield row
                self.first = reader.line_num + 1
        except csv.Error as error:
            raise InputError(f"CSV syntax error: {error}", self.path, reader.line_num) from None

    def fail(self, field: int, message: str) -> NoReturn:
        """Raise ``message`` at the start of the field ``field`` of the last record."""
        lines = io.StringIO(self.text, newline="")
        raw = "".join(islice(lines, self.first - 1, self.reader.line_num))
        starts = [0] + [found.end() for found in FIELD_BREAK.finditer(raw) if found[1]]
        before = raw[: starts[field]]
        breaks = before.count("\n") + before.count("\r") - before.count("\r\n")
        column = len(before) - max(before.rfind("\n"), before.rfind("\r"))
        raise InputError(message, self.path, self.first + breaks, column)


def _form(rows: _Rows, names: list[str]) -> tuple[str, ...]:
    """The form the header names, or the InputError of its first wrong column."""
    form = TOTALS if set(TOTALS[1:]) & set(names) else RATINGS
    for index, name in enumerate(names):
        if name not in form:
            rows.fail(index, f"unknown column {name!r} (expected {FORMS})")
        if name in names[:index]:
            rows.fail(index, f"the column {name!r} appears twice")
    for name in form:
        if name not in names:
            rows.fail(0, f"the column '{name}' is missing (expected {FORMS})")
    return form


def _strict(rows: _Rows, width: int, columns: list[int], scale: Scale) -> Catalogue:
    """The catalogue, field by field; or the message of the first row that breaks a rule,
    placed at its field. ``width`` is the header's."""
    seen: dict[int, list[int]] = {}  # each article's first line, sum and count
    for row in rows.records:
        if len(row) != width:
            message = f"expected {width} values, as in the header, found {len(row)}"
            rows.fail(width if len(row) > width else 0, message)
        field = 0
        try:
            texts = [row[column] for column in columns]
            article_id = rules.article_id(texts[0])
            entry = seen.setdefault(article_id, [rows.first, 0, 0])
            if len(columns) == len(TOTALS):
                if entry[0] != rows.first:
                    rows.fail(columns[0], rules.listed_twice(article_id, entry[0]))
                field = 1
                entry[1] = rules.integer(texts[1], "rating_sum", article_id)
                field = 2
                entry[2] = rules.integer(texts[2], "rating_count", article_id)
                field = 1
                rules.totals(article_id, entry[1], entry[2], scale, TOTALS[1:])
            elif texts[1]:  # else listed, not rated yet
                field = 1
                entry[1] = rules.rated(texts[1], article_id, entry[1], scale)
                entry[2] += 1
        except RuleError as problem:
            rows.fail(columns[field + problem.at], str(problem))
    sums, counts = [entry[1] for entry in seen.values()], [entry[2] for entry in seen.values()]
    return Catalogue(list(seen), sums, counts, scale=scale)
