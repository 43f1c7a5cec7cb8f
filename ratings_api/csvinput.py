"""CSV input, as databases and spreadsheets export it: every CSV rule and message.

The header names the form: ``article_id,rating`` (a row a rating; an empty rating
lists an article not rated yet) or ``article_id,rating_sum,rating_count`` (a row an
article). The numbers follow loader.py's rules. A quick pass reads the usual file; only
when it finds something amiss does the strict pass read it again, field by field, for
the first mistake's message, line and column.
"""

from __future__ import annotations

import codecs
import csv
import io
import re
from collections.abc import Callable, Iterator
from typing import Final, NoReturn

from ratings_api.errors import InputError
from ratings_api.fastpath import Articles
from ratings_api.loader import (
    ID_TEXT,
    INT_TEXT,
    MAX_DIGITS,
    MAX_ID,
    Catalogue,
    offset_position,
    rating_problem,
    totals_problem,
)

RATINGS: Final = ("article_id", "rating")
TOTALS: Final = ("article_id", "rating_sum", "rating_count")
FORMS: Final = "article_id,rating or article_id,rating_sum,rating_count"
_INT: Final = rf"(?:0|-?[1-9][0-9]{{0,{MAX_DIGITS - 1}}})"
# A row of each form, in the header's order, that the quick pass takes as it is.
QUICK_ROW: Final = {
    RATINGS: re.compile(rf"[1-9][0-9]{{0,18}},{_INT}?"),
    TOTALS: re.compile(rf"[1-9][0-9]{{0,18}},{_INT},(?:0|[1-9][0-9]{{0,{MAX_DIGITS - 1}}})"),
}

Scale = tuple[int, int] | None
Form = tuple[str, ...]  # the columns of a form
Record = tuple[int, list[str], str]  # its first line, its fields, its text


def read(path: str, data: bytes, scale: Scale) -> Catalogue:
    """Validate ``data``, the CSV bytes of ``path``, into a Catalogue on ``scale``."""
    data = data.removeprefix(codecs.BOM_UTF8)  # a spreadsheet's mark, no part of a column name
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as bad:
        where = offset_position(data, bad.start)
        raise InputError(f"not valid UTF-8 ({bad.reason})", path, *where) from None
    header = next(_records(path, text), None)
    if header is None:
        raise InputError(f"the file is empty; expected the header {FORMS}", path, 1, 1)
    form = _form(path, header)
    if header[1] == list(form):  # the usual order, which the quick pass reads
        quick = _quick(text, form, scale)
        if quick is not None:
            return quick
    return _Strict(path, form, header[1], scale).read(text)


def _records(path: str, text: str) -> Iterator[Record]:
    """The records that are not blank lines, each with its first line and its text."""
    taken: list[str] = []

    def lines() -> Iterator[str]:
        for line in io.StringIO(text, newline=""):
            taken.append(line)
            yield line

    reader = csv.reader(lines(), strict=True)
    first = 1
    try:
        for row in reader:
            if row:
                yield first, row, "".join(taken)
            taken.clear()
            first = reader.line_num + 1
    except csv.Error as error:
        raise InputError(f"CSV syntax error: {error}", path, reader.line_num) from None


def _starts(raw: str) -> list[int]:
    """Where each field of a record's text starts."""
    starts, quoted = [0], False
    for offset, char in enumerate(raw):
        if char == '"':
            quoted = not quoted
        elif char == "," and not quoted:
            starts.append(offset + 1)
    return starts


def _fail(path: str, record: Record, field: int, message: str) -> NoReturn:
    """Raise ``message`` at the start of the field ``field`` of ``record``."""
    line, _, raw = record
    before = raw[: _starts(raw)[field]]
    breaks = before.count("\n") + before.count("\r") - before.count("\r\n")
    column = len(before) - max(before.rfind("\n"), before.rfind("\r"))
    raise InputError(message, path, line + breaks, column)


def _form(path: str, header: Record) -> Form:
    """The form the header names, or the InputError of its first wrong column."""
    names = header[1]
    form = TOTALS if set(TOTALS[1:]) & set(names) else RATINGS
    for index, name in enumerate(names):
        if name not in form:
            _fail(path, header, index, f"unknown column {name!r} (expected {FORMS})")
        if name in names[:index]:
            _fail(path, header, index, f"the column {name!r} appears twice")
    for name in form:
        if name not in names:
            _fail(path, header, 0, f"the column '{name}' is missing (expected {FORMS})")
    return form


def _quick(text: str, form: Form, scale: Scale) -> Catalogue | None:
    """The catalogue of rows in the header's own order, or None if anything is amiss."""
    rows = filter(None, csv.reader(io.StringIO(text, newline=""), strict=True))
    plain, width = QUICK_ROW[form].fullmatch, len(form)
    articles = Articles()
    try:
        next(rows)  # the header
        if form == TOTALS:
            for row in rows:
                if len(row) != width or not plain(",".join(row)):
                    return None
                articles.ids.append(int(row[0]))
                articles.sums.append(int(row[1]))
                articles.counts.append(int(row[2]))
        elif not _quick_ratings(rows, plain, articles):
            return None
    except csv.Error:
        return None
    if articles.ids and not (articles.valid() and articles.within(scale)):
        return None
    return Catalogue(articles.ids, articles.sums, articles.counts, scale=scale)


def _quick_ratings(
    rows: Iterator[list[str]], plain: Callable[[str], object], articles: Articles
) -> bool:
    totals: dict[int, list[int]] = {}
    ratings: set[int] = set()
    for row in rows:
        if len(row) != 2 or not plain(",".join(row)):
            return False
        entry = totals.setdefault(int(row[0]), [0, 0])
        if row[1]:
            rating = int(row[1])
            ratings.add(rating)
            entry[0] += rating
            entry[1] += 1
    articles.ids, articles.sums, articles.counts = _columns(totals)
    articles.ratings = list(ratings)
    return True


def _columns(totals: dict[int, list[int]]) -> tuple[list[int], list[int], list[int]]:
    """Ids, sums and counts, from each article's [sum, count]."""
    return (
        list(totals),
        [entry[0] for entry in totals.values()],
        [entry[1] for entry in totals.values()],
    )


class _Strict:
    """The rows read field by field, for the first mistake's message, line and column."""

    def __init__(self, path: str, form: Form, names: list[str], scale: Scale) -> None:
        self.path = path
        self.scale = scale
        self.columns = [names.index(name) for name in form]  # where each of the form's is
        self.width = len(names)
        self.catalogue = Catalogue(scale=scale)

    def read(self, text: str) -> Catalogue:
        records = _records(self.path, text)
        next(records)  # the header
        if len(self.columns) == len(TOTALS):
            self.totals(records)
        else:
            self.ratings(records)
        return self.catalogue

    def fail(self, record: Record, index: int, message: str) -> NoReturn:
        """Raise ``message`` at the form's column ``index`` of ``record``."""
        _fail(self.path, record, self.columns[index], message)

    def text(self, record: Record, index: int) -> str:
        return record[1][self.columns[index]]

    def integer(self, record: Record, index: int, what: str) -> int:
        text = self.text(record, index)
        if not INT_TEXT.fullmatch(text):
            self.fail(record, index, f"{what} must be an integer, found {_found(text)}")
        if len(text.lstrip("-")) > MAX_DIGITS:
            self.fail(record, index, f"{what} has more than {MAX_DIGITS} digits")
        return int(text)

    def article_id(self, record: Record) -> int:
        """The row's article id, once its width is checked."""
        found = len(record[1])
        if found != self.width:
            message = f"expected {self.width} values, as in the header, found {found}"
            _fail(self.path, record, self.width if found > self.width else 0, message)
        text = self.text(record, 0)
        if not ID_TEXT.fullmatch(text):
            message = (
                f"an article id must be a positive integer in plain decimal, found {_found(text)}"
            )
            self.fail(record, 0, message)
        article_id = int(text) if len(text) <= 19 else MAX_ID + 1
        if article_id > MAX_ID:
            self.fail(record, 0, f"an article id must be at most {MAX_ID}, found {text}")
        return article_id

    def ratings(self, records: Iterator[Record]) -> None:
        totals: dict[int, list[int]] = {}
        for record in records:
            article_id = self.article_id(record)
            entry = totals.setdefault(article_id, [0, 0])
            if not self.text(record, 1):
                continue  # listed, not rated yet
            rating = self.integer(record, 1, f"article {article_id}: a rating")
            if (problem := rating_problem(article_id, rating, self.scale)) is not None:
                self.fail(record, 1, problem)
            entry[0] += rating
            entry[1] += 1
        self.catalogue.ids, self.catalogue.sums, self.catalogue.counts = _columns(totals)

    def totals(self, records: Iterator[Record]) -> None:
        lines: dict[int, int] = {}
        for record in records:
            article_id = self.article_id(record)
            if article_id in lines:
                first = lines[article_id]
                self.fail(
                    record, 0, f"article {article_id} is listed twice (first at line {first})"
                )
            lines[article_id] = record[0]
            prefix = f"article {article_id}: "
            total = self.integer(record, 1, f"{prefix}rating_sum")
            count = self.integer(record, 2, f"{prefix}rating_count")
            problem = totals_problem(article_id, total, count, self.scale, TOTALS[1:])
            if problem is not None:
                self.fail(record, 1 + problem[0], problem[1])
            self.catalogue.ids.append(article_id)
            self.catalogue.sums.append(total)
            self.catalogue.counts.append(count)


def _found(text: str) -> str:
    return repr(text) if text else "nothing"
