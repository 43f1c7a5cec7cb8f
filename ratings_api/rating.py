"""The rating resource: where it lives, its ids, its exact average, the bytes of its document."""

from __future__ import annotations

import json
from typing import Final

from ratings_api.contract import ARTICLES_PATH

FORMAT: Final = 1  # the documents' layout: a new one makes every document change


def rating_value(total: int, count: int) -> str:
    """``total / count`` with one decimal, ties rounded away from zero; "0.0" for no ratings.

    Integer arithmetic only: a float already misrounds 3.15 (it is 3.149999…).
    """
    if count == 0:
        return "0.0"
    tenths = (20 * abs(total) + count) // (2 * count)
    sign = "-" if total < 0 and tenths else ""
    return f"{sign}{tenths // 10}.{tenths % 10}"


def article_url(base_url: str, article_id: int) -> str:
    """The absolute URL of an article; ``base_url`` has no trailing slash."""
    return f"{base_url}/{ARTICLES_PATH}/{article_id}/"


class Renderer:
    """Renders the rating document of one article as UTF-8 bytes.

    The fields are fixed, in this order: article_url, id, rating_sum,
    rating_count, rating_value. The only text from the user is the base URL,
    which ``json`` escapes once; the rest are integers and a digit string,
    which need no escaping, so a format string gives the same bytes as
    ``json.dumps`` of the dict at a fraction of the cost (a test holds the two
    together).
    """

    def __init__(self, base_url: str) -> None:
        quoted = json.dumps(article_url(base_url, 0), ensure_ascii=False)
        self._url_head = quoted[: -len('0/"')]
        # Besides an article's numbers, all its document depends on.
        self.stamp = f"{FORMAT} {base_url}"

    def __call__(self, article_id: int, total: int, count: int) -> bytes:
        value = rating_value(total, count)
        return (
            f'{{"article_url": {self._url_head}{article_id}/", "id": {article_id}, '
            f'"rating_sum": {total}, "rating_count": {count}, "rating_value": "{value}"}}\n'
        ).encode()
