"""The average, rounded exactly, and the bytes of one document."""

from __future__ import annotations

import json
import random
from fractions import Fraction

import pytest

from ratings_api.rating import Renderer, rating_value

# The averages a float gets wrong; the usual ones, ties and signs included, are golden cases
# (tests/cases/valid/rounding and negative), and the Fraction reference below checks them all.
ISSUE_TABLE = [
    (10**30 + 5 * 10**28, 10**30, "1.1"),  # 1.05, far past a float's precision
    (2**64 * 3 + 2**63, 2**64, "3.5"),
    (10**40 - 1, 10**40, "1.0"),  # 0.99999…
    (149999999999999999999, 10**20, "1.5"),  # 1.49999…
    (1449999999999999999999, 10**21, "1.4"),  # 1.44999…, which a float holds as 1.45
]


def fraction_reference(total: int, count: int) -> str:
    exact = abs(Fraction(total, count))
    tenths = int(exact * 10 + Fraction(1, 2))  # int() floors a positive Fraction
    sign = "-" if total < 0 and tenths else ""
    return f"{sign}{tenths // 10}.{tenths % 10}"


def test_rating_value_agrees_with_fractions() -> None:
    """The table's, every small average, and random huge totals."""
    for total, count, expected in ISSUE_TABLE:
        assert rating_value(total, count) == expected == fraction_reference(total, count)
    cases = [(total, count) for count in range(1, 61) for total in range(-6 * count, 6 * count + 1)]
    rng = random.Random(20261122)
    for _ in range(5000):
        count = rng.randrange(1, 10 ** rng.randrange(1, 40))
        cases.append((rng.randrange(-6 * count, 6 * count), count))
    for total, count in cases:
        assert rating_value(total, count) == fraction_reference(total, count), (total, count)


ARTICLES = [(7, 29, 6), (1, 0, 0), (2**63 - 1, 10**30, 10**29), (5, -3, 2)]  # id, sum, count
BASE_URLS = [
    "https://example.com",
    "http://localhost:8000",
    "https://example.com/news",
    'https://example.com/"quoted"/\\back',
    "https://bücher.example/straße",
]


@pytest.mark.parametrize("base_url", BASE_URLS)
def test_renderer_gives_the_bytes_of_json_dumps(base_url: str) -> None:
    render = Renderer(base_url)
    for article_id, total, count in ARTICLES:
        document = {
            "article_url": f"{base_url}/away/api/articles/{article_id}/",
            "id": article_id,
            "rating_sum": total,
            "rating_count": count,
            "rating_value": rating_value(total, count),
        }
        expected = (json.dumps(document, ensure_ascii=False) + "\n").encode()
        assert render(article_id, total, count) == expected
