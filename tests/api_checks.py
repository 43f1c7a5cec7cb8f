"""The catalogue the property tests serve, and a Schemathesis check that holds bodies to it.

Loaded by Schemathesis as its hooks: a 200 must be the article the path names, byte for byte.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import schemathesis

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # loaded by path, by Schemathesis
from ratings_api.contract import MAX_ID
from tests.contract import RATINGS as CONTRACT_RATINGS

if TYPE_CHECKING:
    from schemathesis import Case, CheckContext, Response

# The contract's catalogue, and the largest id there can be.
RATINGS: Final = f"{CONTRACT_RATINGS}  {MAX_ID}: {{sum: 10, count: 2}}\n"
# id: (rating_sum, rating_count, rating_value), worked out by hand.
LISTED: Final = {
    1: (16, 4, "4.0"),
    7: (29, 6, "4.8"),
    12: (29, 6, "4.8"),
    31: (0, 0, "0.0"),
    1000000: (5, 1, "5.0"),
    MAX_ID: (10, 2, "5.0"),
}
# Ids next to listed ones, and the largest ids that are not.
UNLISTED: Final = (2, 6, 8, 13, 30, 32, 999999, 1000001, MAX_ID - 1)
ARTICLES_PATH: Final = "/away/api/articles/"
# A file the check notes each id it passed in, so a test can tell that it ran.
CHECKED_LOG: Final = "RATINGS_API_CHECKED_LOG"


def expected_document(base_url: str, article_id: int) -> bytes:
    total, count, value = LISTED[article_id]
    return (
        f'{{"article_url": "{base_url}{ARTICLES_PATH}{article_id}/", "id": {article_id}, '
        f'"rating_sum": {total}, "rating_count": {count}, "rating_value": "{value}"}}\n'
    ).encode()


@schemathesis.check
def matches_the_catalogue(ctx: CheckContext, response: Response, case: Case[Any]) -> bool | None:
    """A 200 is the listed article's document, exactly; no unlisted id answers 200."""
    if response.status_code != 200:
        return None
    url = str(response.request.url)
    base_url, _, rest = url.partition(ARTICLES_PATH)
    article_id = int(rest.split("/")[0])
    if article_id not in LISTED:
        raise AssertionError(f"{url}: 200 for an article the catalogue does not list")
    expected = expected_document(base_url, article_id)
    if response.content != expected:
        raise AssertionError(f"{url}: expected {expected!r}, got {response.content!r}")
    if CHECKED_LOG in os.environ:
        with open(os.environ[CHECKED_LOG], "a", encoding="utf-8") as log:
            log.write(f"{article_id}\n")
    return True
