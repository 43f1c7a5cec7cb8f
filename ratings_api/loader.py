"""Strict reading of ratings.yaml into a Catalogue: every YAML rule, and each value held to
rules.py at its line and column.

The file is never turned into Python objects by PyYAML: its resolver guesses
types (``010`` is 8, ``1:30`` is 90, ``yes`` is true) and a repeated key
silently replaces the first. Walking the events instead keeps every scalar's
exact text and position, needs no node tree (flat memory for a million
articles), and stops at the first alias, tag or unexpected nesting. ``load``
lets fastpath.py read the usual layout's articles first, and walks the rest.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Final, NoReturn, cast

import yaml

from ratings_api import fastpath, rules
from ratings_api.errors import InputError
from ratings_api.rules import RuleError

if TYPE_CHECKING:
    from yaml._yaml import Mark as CMark  # libyaml's marks: the same fields, another class

TOP_KEYS: Final = ("articles", "scale", "base_url")
NULL_TEXTS: Final = frozenset(("", "~", "null", "Null", "NULL"))
STANDARD_TAG: Final = "tag:yaml.org,2002:"
QUOTES: Final = ('"', "'")  # the styles of a quoted scalar
NODE_KINDS: Final[dict[type[yaml.Event], str]] = {
    yaml.MappingStartEvent: "a mapping",
    yaml.SequenceStartEvent: "a list",
}

Parser = yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader


@dataclass
class Catalogue:
    """What ratings.yaml says, validated: parallel columns, one entry an article."""

    ids: list[int] = field(default_factory=list)
    sums: list[int] = field(default_factory=list)
    counts: list[int] = field(default_factory=list)
    scale: tuple[int, int] | None = None
    base_url: str | None = None
    base_url_at: tuple[int, int] | None = None  # (line, column) of base_url, for messages


def read_bytes(path: str) -> bytes:
    """The bytes of the file ``path``, or of standard input for ``-``."""
    try:
        return sys.stdin.buffer.read() if path == "-" else Path(path).read_bytes()
    except OSError as error:
        raise InputError(f"cannot read: {error.strerror}", path) from None


def load(path: str, data: bytes) -> Catalogue:
    """Validate ``data``, the bytes of the file named ``path``, into a Catalogue."""
    return load_fast(path, data) or load_strict(path, data)


def load_fast(path: str, data: bytes) -> Catalogue | None:
    """The catalogue as fastpath.py reads it, or None where the walker must read the file.

    The seam: fastpath.py reads the block of articles, with no rule checked, and gives
    the rest of the file with that block as one placeholder entry; the walker reads that
    rest (scale, base_url and every key and syntax rule), the placeholder must come back
    as its one article, and the block's columns must keep rules.py's rules on that scale.
    """
    articles = fastpath.load(data)
    if articles is None:
        return None
    try:
        rest = load_strict(path, articles.rest)
    except InputError:  # the whole file's walk says where
        return None
    if rest.ids != [fastpath.PLACEHOLDER] or not rules.keeps_the_rules(articles, rest.scale):
        return None
    return replace(rest, ids=articles.ids, sums=articles.sums, counts=articles.counts)


def load_strict(path: str, data: bytes) -> Catalogue:
    """The catalogue as the event walker reads it, or the InputError of the first mistake."""
    try:
        walker = Walker(path, data, scale=None)
        catalogue = walker.document()
        if walker.scale_came_late:
            # The ratings were read before their bounds were known: read them
            # again with the bounds, so the first rating out of scale is the
            # one reported. Only files that put scale after articles pay this.
            catalogue = Walker(path, data, scale=catalogue.scale).document()
    except yaml.MarkedYAMLError as error:
        context = f" ({error.context})" if error.context else ""
        message = f"YAML syntax error: {error.problem}{context}"
        raise InputError(message, path, *_position(error.problem_mark)) from None
    except yaml.reader.ReaderError as error:
        # libyaml points at the byte after a broken UTF-8 sequence; Python's codec at its
        # start, and says so first.
        decoded(path, data)
        reason = str(error).partition("\n")[0]
        raise InputError(reason, path, *offset_position(data, error.position)) from None
    return catalogue


def decoded(path: str, data: bytes) -> str:
    """``data``, the bytes of ``path``, as text; else the InputError at its first bad byte."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as bad:
        where = offset_position(data, bad.start)
        raise InputError(f"not valid UTF-8 ({bad.reason})", path, *where) from None


def _position(mark: yaml.Mark | CMark | None) -> tuple[int, int]:
    """(line, column), from 1. The parsers give every event and every syntax error a
    mark; the stubs allow None for objects made by hand, which this module never sees."""
    assert mark is not None
    return mark.line + 1, mark.column + 1


def offset_position(data: bytes, offset: int) -> tuple[int, int]:
    """(line, column) of a byte offset, the column counted in characters."""
    line_start = data.rfind(b"\n", 0, offset) + 1
    column = len(data[line_start:offset].decode("utf-8", "replace")) + 1
    return data.count(b"\n", 0, offset) + 1, column


def _describe(event: yaml.Event) -> str:
    """How a value is named in a message: its text, or what kind of node it is."""
    if not isinstance(event, yaml.ScalarEvent):
        return NODE_KINDS.get(type(event), "the end of the mapping")
    if event.style in QUOTES:
        return f"the quoted string {event.style}{event.value}{event.style}"
    if event.style in ("|", ">"):
        return "a block of text"
    if event.value in NULL_TEXTS:
        return "nothing (null)"
    return f"'{event.value}'"


def _plain(event: yaml.Event) -> str | None:
    """The text of a plain scalar that is not null, or None."""
    if isinstance(event, yaml.ScalarEvent) and not event.style and event.value not in NULL_TEXTS:
        return event.value
    return None


class Walker:
    """One pass over the event stream of one YAML document."""

    def __init__(self, path: str, data: bytes, scale: tuple[int, int] | None) -> None:
        self.path = path
        # get_event returns None only once the stream has ended, and the walk stops
        # at StreamEndEvent; a cast, not a check, as this is called for every event.
        self.next_event = cast("Callable[[], yaml.Event]", Parser(data).get_event)
        self.catalogue = Catalogue(scale=scale)
        self.scale_came_late = False

    def fail(self, event: yaml.Event, message: str) -> NoReturn:
        raise InputError(message, self.path, *_position(event.start_mark))

    def node(self) -> yaml.Event:
        """The next event, which starts a node: anchors, aliases and tags are refused."""
        event = self.next_event()
        if isinstance(event, (yaml.ScalarEvent, yaml.CollectionStartEvent)):  # anchor and tag
            if event.anchor is not None:
                self.fail(event, f"anchors are not allowed (&{event.anchor})")
            if event.tag is not None:
                tag = event.tag.replace(STANDARD_TAG, "!!", 1)
                self.fail(event, f"tags are not allowed ({tag})")
        elif isinstance(event, yaml.AliasEvent):
            self.fail(event, f"aliases are not allowed (*{event.anchor})")
        return event

    def checked(self, event: yaml.Event, rule: Callable[..., int], *args: object) -> int:
        """``rule`` (of rules.py) of the text of ``event`` and ``args``; else the InputError of
        the rule it breaks, at ``event``."""
        text = _plain(event)  # else it is named by what it is: only then is that worked out
        try:
            return rule(text, *args, shown=_describe(event) if text is None else "")
        except RuleError as problem:
            self.fail(event, str(problem))

    def document(self) -> Catalogue:
        """Read the whole stream into the catalogue."""
        # The parser's grammar: StreamStart, then StreamEnd or a DocumentStart; after
        # the document's one node, its DocumentEnd.
        self.next_event()
        if isinstance(start := self.next_event(), yaml.StreamEndEvent):
            self.fail(start, "the file is empty; expected a mapping with the key 'articles'")
        self.top_mapping()
        self.next_event()
        if not isinstance(after := self.next_event(), yaml.StreamEndEvent):
            self.fail(after, "only one YAML document is allowed")
        return self.catalogue

    def top_mapping(self) -> None:
        if not isinstance(mapping := self.node(), yaml.MappingStartEvent):
            expected = "expected a mapping with the key 'articles' at the top level"
            self.fail(mapping, f"{expected}, found {_describe(mapping)}")
        seen: dict[str, int] = {}
        known = "expected one of: " + ", ".join(TOP_KEYS)
        while not isinstance(key := self.node(), yaml.MappingEndEvent):
            # Quoting a key changes nothing here (keys are strings either way),
            # unlike quoting a number, which makes it a string.
            if not (isinstance(key, yaml.ScalarEvent) and key.value in TOP_KEYS):
                self.fail(key, f"unknown key {_describe(key)} ({known})")
            if (first := seen.get(key.value)) is not None:
                self.fail(key, f"the key '{key.value}' appears twice (first at line {first})")
            seen[key.value] = _position(key.start_mark)[0]
            getattr(self, key.value)()  # each key is read by the method of its name
        if "articles" not in seen:
            self.fail(mapping, "the key 'articles' is missing")

    def scale(self) -> None:
        shape = "scale must be a list of two integers [low, high]"
        if not isinstance(start := self.node(), yaml.SequenceStartEvent):
            self.fail(start, f"{shape}, found {_describe(start)}")
        bounds: list[int] = []
        while not isinstance(event := self.node(), yaml.SequenceEndEvent):
            if len(bounds) == 2:
                self.fail(event, f"{shape}, found more than two values")
            bounds.append(self.checked(event, rules.integer, "a scale bound"))
        if len(bounds) != 2:
            self.fail(start, f"{shape}, found {len(bounds)} value{'s' * (len(bounds) != 1)}")
        low, high = bounds
        if low >= high:
            self.fail(start, f"scale must go from low to high, found [{low}, {high}]")
        self.catalogue.scale = (low, high)
        self.scale_came_late = bool(self.catalogue.ids)  # ratings read before their bounds

    def base_url(self) -> None:
        event = self.node()
        if not (isinstance(event, yaml.ScalarEvent) and (event.style in QUOTES or _plain(event))):
            self.fail(event, f"base_url must be a URL, found {_describe(event)}")
        self.catalogue.base_url = event.value
        self.catalogue.base_url_at = _position(event.start_mark)

    def articles(self) -> None:
        if not isinstance(start := self.node(), yaml.MappingStartEvent):
            expected = "'articles' must be a mapping of article id to ratings"
            self.fail(start, f"{expected}, found {_describe(start)}")
        lines: dict[int, int] = {}
        while not isinstance(key := self.node(), yaml.MappingEndEvent):
            article_id = self.checked(key, rules.article_id)
            if article_id in lines:
                self.fail(key, rules.listed_twice(article_id, lines[article_id]))
            lines[article_id] = _position(key.start_mark)[0]
            if isinstance(value := self.node(), yaml.SequenceStartEvent):
                total, count = self.ratings(article_id, self.catalogue.scale)
            elif isinstance(value, yaml.MappingStartEvent):
                total, count = self.totals(article_id, value)
            else:
                expected = "expected a list of ratings or {sum: ..., count: ...}"
                self.fail(value, f"article {article_id}: {expected}, found {_describe(value)}")
            self.catalogue.ids.append(article_id)
            self.catalogue.sums.append(total)
            self.catalogue.counts.append(count)

    def ratings(self, article_id: int, scale: rules.Scale) -> tuple[int, int]:
        total = count = 0
        while not isinstance(event := self.node(), yaml.SequenceEndEvent):
            # Not through checked(): a call with a rule's arguments unpacked costs a fifth of
            # the walk, once a rating.
            shown = "" if (text := _plain(event)) else _describe(event)
            try:
                total = rules.rated(text, article_id, total, scale, shown)
            except RuleError as problem:
                self.fail(event, str(problem))
            count += 1
        return total, count

    def totals(self, article_id: int, start: yaml.Event) -> tuple[int, int]:
        prefix = f"article {article_id}: "
        found: dict[str, tuple[int, yaml.Event]] = {}
        while not isinstance(key := self.node(), yaml.MappingEndEvent):
            if not (isinstance(key, yaml.ScalarEvent) and key.value in rules.TOTALS_FIELDS):
                self.fail(key, f"{prefix}unknown field {_describe(key)} (expected sum and count)")
            if key.value in found:
                self.fail(key, f"{prefix}the field '{key.value}' appears twice")
            value = self.node()
            found[key.value] = (self.checked(value, rules.integer, key.value, article_id), value)
        for name in rules.TOTALS_FIELDS:
            if name not in found:
                self.fail(start, f"{prefix}'{name}' is missing (totals need sum and count)")
        (total, total_event), (count, count_event) = found["sum"], found["count"]
        try:
            rules.totals(article_id, total, count, self.catalogue.scale)
        except RuleError as problem:
            self.fail((total_event, count_event)[problem.at], str(problem))
        return total, count
