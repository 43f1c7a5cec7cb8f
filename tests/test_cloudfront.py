"""The CloudFront Function of deploy/cloudfront, run in node on CloudFront-shaped events.

The lines of the contract it decides alone are held to ``DIFFERENCES["CloudFront"]``
(tests/edges.py), as the suite does for the hosts it runs.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

import pytest

from ratings_api import contract
from ratings_api.contract import ALLOW, ERROR_TYPE, FRONT_PAGE_CSP, NOT_FOUND
from tests.contract import NOT_ALLOWED, POINTS, PREFLIGHT, REPO, run_ok
from tests.edges import CLOUDFRONT_FUNCTION_POINTS, DIFFERENCES

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


def expect(point: str) -> object:
    """The table's value for CloudFront at ``point``: the app's, or its difference."""
    assert point in CLOUDFRONT_FUNCTION_POINTS, point
    difference = DIFFERENCES["CloudFront"].get(point)
    return POINTS[point] if difference is None else difference.value


def headers(result: Result) -> dict[str, str]:
    return {name: value["value"] for name, value in result["headers"].items()}


def answered(result: Result, status: int, body: str | None, **more: str) -> bool:
    """Whether the function answered itself, with the contract's headers and ``more``."""
    sent = {"encoding": "text", "data": body} if body is not None else None
    wanted = {name.lower(): value for name, value in (*contract.COMMON_HEADERS, *more.items())}
    return (result.get("statusCode"), result.get("body"), headers(result)) == (status, sent, wanted)


def is_json_404(result: Result) -> bool:
    return answered(result, 404, NOT_FOUND.decode(), **{"Content-Type": ERROR_TYPE})


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


def assert_each(uris: Iterable[str], holds: Callable[[str, str, Result], bool]) -> None:
    """Assert ``holds(uri, method, result)`` for GET and HEAD of each of ``uris``, in one run."""
    asked = [(uri, method) for uri in uris for method in ("GET", "HEAD")]
    results = node([viewer_request(uri, method) for uri, method in asked])
    wrong = [
        f"{method} {uri}: {result}"
        for (uri, method), result in zip(asked, results, strict=True)
        if not holds(uri, method, result)
    ]
    assert not wrong, "\n".join(wrong)


def test_a_path_goes_on_to_its_object() -> None:
    # A request passed on, with the object's key.
    assert_each(
        REWRITES, lambda uri, method, r: (r.get("method"), r.get("uri")) == (method, REWRITES[uri])
    )


def test_the_no_slash_form_is_redirected_with_its_query_and_an_encoded_slash_is_a_404() -> None:
    get, head, query, encoded = node(
        [
            viewer_request("/away/api/articles/7/rating"),
            viewer_request("/away/api/articles/7/rating", "HEAD"),
            viewer_request("/away/api/articles/7/rating", querystring={"v": "2"}),
            viewer_request("/away/api/articles/7%2Frating"),
        ]
    )
    assert answered(get, 301, None, Location="rating/")
    assert answered(head, 301, None, Location="rating/")
    assert answered(query, 301, None, Location="rating/?v=2")
    assert expect("no slash (`7/rating`): GET, HEAD, with a query") == "301 to `rating/`"
    assert expect("the no-slash redirect's body") == "empty"
    assert is_json_404(encoded)
    assert expect("an encoded slash and no slash (`7%2Frating`)") == 404


def test_no_slash_no_article() -> None:
    unknown, malformed = node(
        [
            viewer_request("/away/api/articles/2/rating"),
            viewer_request("/away/api/articles/abc/rating"),
        ]
    )
    assert is_json_404(malformed)
    said = f"`2/rating`: {unknown['statusCode']} to `{headers(unknown)['location']}`; `abc/rating`: 404"
    assert said == expect("no slash, no article (`2/rating`, `abc/rating`)")


# The 404s the function answers itself, with the API's JSON error, and their point.
NOT_FOUND_URIS: Final = {
    "/away/api/articles/" + "1" * 300 + "/rating/": "an id of 300 digits",
    "/away/api/articles/7/rating/index.json": "the document's own path (`7/rating/index.json`)",
    "/.hidden": "a dotfile of yours (`/.hidden`)",
    # The publisher's state in the bucket, which the function must not let through.
    "/.ratings-api/state.gz": "a dotfile of yours (`/.hidden`)",
    **dict.fromkeys(
        (
            *(f"/away/api/articles/{i}/rating/" for i in ("abc", "07", "-1", "0", "+7", "7.0")),
            *(f"/away/api/articles/{i}/rating/" for i in ("%207", "0x7", "9" * 20)),
            *("/away/api/articles/7/rating//", "/away/api/articles/7/rating/extra"),
            *("/away/api/articles/7/ratings/", "/away/api/articles/7/", "/away/api/articles/"),
            *("/away/api/articles", "/../secret.txt", "/%2e%2e/secret.txt", "/..%2fsecret.txt"),
            *("/..%5csecret.txt", "/..\\secret.txt", "/away/api/articles/7/rating\\index.json"),
            *("/%00", "/away/api/articles/7%00/rating/", "/away/api/./articles/7/rating/"),
            *("/away/api/articles/7/rating/.", "/away//api/articles/7/rating/", "//etc/passwd"),
            *("/..%c0%af..%c0%afsecret.txt", "/%E0%A4%A", "/" + "a" * 2000),
        ),
        "an unknown or malformed id, any other missing path",
    ),
}


def test_a_path_no_object_may_answer_is_the_json_404() -> None:
    assert_each(NOT_FOUND_URIS, lambda _uri, _method, result: is_json_404(result))
    points = set(NOT_FOUND_URIS.values()) & set(CLOUDFRONT_FUNCTION_POINTS)
    assert {expect(point) for point in points} == {404}


def test_other_methods_are_the_json_405_and_options_the_preflight() -> None:
    uris = ("/away/api/articles/7/rating/", "/away/api/articles/2/rating/", "/")
    methods = ("POST", "PUT", "PATCH", "DELETE", "OPTIONS")
    asked = [(uri, method) for uri in uris for method in methods]
    refused = {"Allow": ALLOW, "Content-Type": ERROR_TYPE}
    for (uri, method), result in zip(asked, node([viewer_request(*a) for a in asked]), strict=True):
        ok = (
            answered(result, 204, None, **dict(contract.PREFLIGHT))
            if method == "OPTIONS"
            else answered(result, 405, contract.not_allowed(method).decode(), **refused)
        )
        assert ok, (uri, method, result)
    said = "POST, PUT, PATCH, DELETE: as the app; PROPFIND, TRACE: not run here"
    assert POINTS["POST, PUT, PATCH, DELETE, PROPFIND, TRACE on a rating"] == NOT_ALLOWED
    assert expect("POST, PUT, PATCH, DELETE, PROPFIND, TRACE on a rating") == said
    assert expect("the same on an unknown id and on `/`") == said
    assert expect("OPTIONS, with or without CORS, on a rating") == PREFLIGHT
    assert expect("OPTIONS on an unknown id") == PREFLIGHT


def test_the_front_page_and_only_it_carries_its_policy() -> None:
    pages = ["/", "/index.html"]
    others = ["/away/api/articles/7/rating/index.json", "/about/index.html", "/robots.txt"]
    results = node([viewer_response(uri) for uri in pages + others])
    results += node([viewer_response("/", status=404)])  # the error page: no policy
    policies = [headers(result).get("content-security-policy") for result in results]
    assert policies == [FRONT_PAGE_CSP] * len(pages) + [None] * (len(others) + 1)
    point = "the front page's `Content-Security-Policy`"
    assert expect(point) == POINTS[point]


def test_every_point_the_function_decides_is_asserted_here() -> None:
    asserted = {
        "no slash (`7/rating`): GET, HEAD, with a query",
        "the no-slash redirect's body",
        "no slash, no article (`2/rating`, `abc/rating`)",
        "an encoded slash and no slash (`7%2Frating`)",
        "POST, PUT, PATCH, DELETE, PROPFIND, TRACE on a rating",
        "the same on an unknown id and on `/`",
        "OPTIONS, with or without CORS, on a rating",
        "OPTIONS on an unknown id",
        "the front page's `Content-Security-Policy`",
        *(point for point in NOT_FOUND_URIS.values() if point in CLOUDFRONT_FUNCTION_POINTS),
    }
    assert asserted == set(CLOUDFRONT_FUNCTION_POINTS)
