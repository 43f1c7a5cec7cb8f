"""The average, rounded exactly. The bytes of a document are the golden cases', each held to
``json.dumps`` of its fields by tests/test_describe.py."""

from __future__ import annotations

import random
from fractions import Fraction

from ratings_api.rating import rating_value

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
    counts = [rng.randrange(1, 10 ** rng.randrange(1, 40)) for _ in range(5000)]
    cases += [(rng.randrange(-6 * count, 6 * count), count) for count in counts]
    for total, count in cases:
        assert rating_value(total, count) == fraction_reference(total, count), (total, count)
