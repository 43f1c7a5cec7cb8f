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
from tests.contract import ARTICLES
from tests.contract import RATINGS as CONTRACT_RATINGS

if TYPE_CHECKING:
    from schemathesis import Case, CheckContext, Response

# The contract's catalogue, and the largest id there can be.
RATINGS: Final = f"{CONTRACT_RATINGS}  {MAX_ID}: {{sum: 10, count: 2}}\n"
LISTED: Final = (*ARTICLES, MAX_ID)
# Ids next to listed ones, and the largest ids that are not.
UNLISTED: Final = (2, 6, 8, 13, 30, 32, 999999, 1000001, MAX_ID - 1)
ARTICLES_PATH: Final = "/away/api/articles/"
# The site served, and a file the check notes each id it passed in, so a test can tell that it ran.
SITE: Final = "RATINGS_API_SITE"
CHECKED_LOG: Final = "RATINGS_API_CHECKED_LOG"


@schemathesis.check
def matches_the_catalogue(ctx: CheckContext, response: Response, case: Case[Any]) -> bool | None:
    """A 200 is the listed article's document, exactly; no unlisted id answers 200."""
    if response.status_code != 200:
        return None
    url = str(response.request.url)
    article_id = int(url.partition(ARTICLES_PATH)[2].split("/")[0])
    document = Path(os.environ[SITE], f"away/api/articles/{article_id}/rating/index.json")
    if article_id not in LISTED or response.content != document.read_bytes():
        raise AssertionError(f"{url}: not the catalogue's document: {response.content!r}")
    with open(os.environ[CHECKED_LOG], "a", encoding="utf-8") as log:
        log.write(f"{article_id}\n")
    return True
