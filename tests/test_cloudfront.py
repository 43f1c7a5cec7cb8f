"""The CloudFront Function of deploy/cloudfront, run in node on CloudFront-shaped events.

The contract suite (tests/test_http_contract.py) holds its answers to the app's, on each point
it decides alone; here is what only the function does: the key of each object it sends a
request on to, the words of its one difference, the front page's policy.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

import pytest

from ratings_api.contract import FRONT_PAGE_CSP
from tests.contract import REPO, run_ok
from tests.hosts import DIFFERENCES

pytestmark = pytest.mark.real_world

FUNCTION: Final = REPO / "deploy" / "cloudfront" / "function.js"
RUNNER: Final = REPO / "tests" / "hosts-node" / "cloudfront-run.cjs"

Event = dict[str, Any]
Result = dict[str, Any]


def viewer_request(
    uri: str, method: str = "GET", querystring: Mapping[str, str] | None = None
) -> Event:
    context = {"distributionDomainName": "d111111abcdef8.cloudfront.net", "requestId": "4TyzHT"}
    return {
        "version": "1.0",
        "context": {**context, "distributionId": "EDFDVBD6EXAMPLE", "eventType": "viewer-request"},
        "viewer": {"ip": "198.51.100.11"},
        "request": {
            "method": method,
            "uri": uri,
            "querystring": {name: {"value": value} for name, value in (querystring or {}).items()},
            "headers": {"host": {"value": "ratings.example.com"}},
            "cookies": {},
        },
    }


def viewer_response(uri: str, status: int = 200) -> Event:
    event = viewer_request(uri)
    event["context"]["eventType"] = "viewer-response"
    content_type = {"content-type": {"value": 'text/html; charset="utf-8"'}}
    event["response"] = {"statusCode": status, "headers": content_type, "cookies": {}}
    return event


def node(events: list[Event]) -> list[Result]:
    """What the function returns for each event, run in node as CloudFront runs it."""
    done = run_ok(["node", str(RUNNER), str(FUNCTION)], input=json.dumps(events), timeout=30)
    results: list[Result] = json.loads(done.stdout)
    return results


def headers(result: Result) -> dict[str, str]:
    return {name: value["value"] for name, value in result["headers"].items()}


# The rewrites: the request goes on to S3, for the object of the published layout.
# Each decoded segment is encoded whole again: `?`, `#` and `;` never reach S3 as
# they are (`?acl` would name a subresource of the object).
REWRITES: Final = {
    "/away/api/articles/7/rating/": "/away/api/articles/7/rating/index.json",
    "/away/api/articles/1000000/rating/": "/away/api/articles/1000000/rating/index.json",
    "/away/api/articles/7%2Frating%2F": "/away/api/articles/7/rating/index.json",
    "/": "/index.html",
    "/index.html": "/index.html",
    "/about/": "/about/index.html",
    "/robots.txt": "/robots.txt",
    "/away/api/openapi.json": "/away/api/openapi.json",
    "/assets/front-page.css": "/assets/front-page.css",
    "/a%20b.txt": "/a%20b.txt",
    "/index.html%3Facl": "/index.html%3Facl",
    "/index.html%3facl": "/index.html%3Facl",
    "/robots.txt%23top": "/robots.txt%23top",
    "/robots.txt%3Bx=1": "/robots.txt%3Bx%3D1",
    "/a%2Bb.txt": "/a%2Bb.txt",
    "/caf%C3%A9/": "/caf%C3%A9/index.html",
    "/a%25b.txt": "/a%25b.txt",
}


def test_a_path_goes_on_to_its_object() -> None:
    """GET and HEAD of each path: the request passed on, with the object's key."""
    asked = [(uri, method) for uri in REWRITES for method in ("GET", "HEAD")]
    results = node([viewer_request(uri, method) for uri, method in asked])
    passed = [(result.get("method"), result.get("uri")) for result in results]
    assert passed == [(method, REWRITES[uri]) for uri, method in asked]


def test_no_slash_no_article_is_documented_as_the_function_answers() -> None:
    """The one point where the function differs from the app (the one suite holds the rest)."""
    paths = ["/away/api/articles/2/rating", "/away/api/articles/abc/rating"]
    unknown, malformed = node([viewer_request(path) for path in paths])
    said = f"`2/rating`: {unknown['statusCode']} to `{headers(unknown)['location']}`; "
    said += f"`abc/rating`: {malformed['statusCode']}"
    point = "no slash, no article (`2/rating`, `abc/rating`)"
    assert said == DIFFERENCES["CloudFront"][point].value


def test_the_front_page_and_only_it_carries_its_policy() -> None:
    pages = ["/", "/index.html"]
    others = ["/away/api/articles/7/rating/index.json", "/about/index.html", "/robots.txt"]
    results = node([viewer_response(uri) for uri in pages + others])
    results += node([viewer_response("/", status=404)])  # the error page: no policy
    policies = [headers(result).get("content-security-policy") for result in results]
    assert policies == [FRONT_PAGE_CSP] * len(pages) + [None] * (len(others) + 1)
