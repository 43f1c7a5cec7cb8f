"""The CloudFront Function of deploy/cloudfront, run in node on CloudFront-shaped events.

CloudFront and S3 cannot run here. The function can: tests/hosts-node/
cloudfront-run.cjs runs it in a bare context, as CloudFront does, on events of
the shape CloudFront passes it (its documented event structure, version 1.0).
The lines of the contract it decides alone are asserted against the table's
data (``tests.edges.CLOUDFRONT``), as the suite does for the hosts it runs.
"""

from __future__ import annotations

import functools
import json
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import pytest
import yaml

from ratings_api.describe import FRONT_PAGE_CSP
from ratings_api.publish import content_type
from tests.contract import (
    ALLOW,
    CACHE_CONTROL,
    NOT_ALLOWED,
    NOT_FOUND,
    NOT_RUN,
    POINTS,
    PREFLIGHT,
    REPO,
)
from tests.edges import CLOUDFRONT, CLOUDFRONT_FUNCTION_POINTS

FUNCTION: Final = REPO / "deploy" / "cloudfront" / "function.js"
TEMPLATE: Final = REPO / "deploy" / "cloudfront" / "template.yaml"
RUNNER: Final = REPO / "tests" / "hosts-node" / "cloudfront-run.cjs"
# CloudFront's limit on a function's code.
MAX_FUNCTION_BYTES: Final = 10 * 1024

Event = dict[str, Any]
Result = dict[str, Any]


def viewer_request(
    uri: str, method: str = "GET", querystring: Mapping[str, str] | None = None
) -> Event:
    return {
        "version": "1.0",
        "context": {
            "distributionDomainName": "d111111abcdef8.cloudfront.net",
            "distributionId": "EDFDVBD6EXAMPLE",
            "eventType": "viewer-request",
            "requestId": "4TyzHTaYWb1GX1qTfsHhEqV6HUDd_BzoBZnwfnvQc_1oF26ClkoUSEQ==",
        },
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
    event["response"] = {
        "statusCode": status,
        "statusDescription": "OK",
        "headers": {"content-type": {"value": 'text/html; charset="utf-8"'}},
        "cookies": {},
    }
    return event


def run(*events: Event) -> list[Result]:
    """What the function returns for each event, run in node as CloudFront runs it.

    The first call runs every event of this module's parametrized tests at once
    (one node process rather than a hundred); each is still run on its own.
    """
    known = batch()
    missing = [event for event in events if json.dumps(event) not in known]
    known.update(zip((json.dumps(event) for event in missing), node(missing), strict=True))
    return [known[json.dumps(event)] for event in events]


@functools.cache
def batch() -> dict[str, Result]:
    events = [
        viewer_request(uri, method)
        for method in ("GET", "HEAD")
        for uri in [*REWRITES, *NOT_FOUND_URIS]
    ] + [viewer_request(uri, method) for method in NOT_ALLOWED_METHODS for uri in NOT_ALLOWED_URIS]
    return dict(zip((json.dumps(event) for event in events), node(events), strict=True))


def node(events: list[Event]) -> list[Result]:
    if not events:
        return []
    done = subprocess.run(
        ["node", str(RUNNER), str(FUNCTION)],
        input=json.dumps(events),
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    results: list[Result] = json.loads(done.stdout)
    return results


def expect(point: str) -> object:
    """The table's value for CloudFront at ``point``: the app's, or its difference."""
    assert point in CLOUDFRONT_FUNCTION_POINTS, point
    difference = CLOUDFRONT.get(point)
    return POINTS[point] if difference is None else difference.value


def headers(result: Result) -> dict[str, str]:
    return {name: value["value"] for name, value in result["headers"].items()}


def common_headers_of(result: Result) -> bool:
    got = headers(result)
    return (
        got.get("access-control-allow-origin") == "*"
        and got.get("x-content-type-options") == "nosniff"
        and got.get("cache-control") == CACHE_CONTROL
    )


def is_json_404(result: Result) -> bool:
    return (
        result.get("statusCode") == 404
        and result.get("body") == {"encoding": "text", "data": NOT_FOUND.decode()}
        and headers(result).get("content-type") == "application/json"
        and common_headers_of(result)
    )


# The rewrites: the request goes on to S3, for the object of the published layout.

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
    # Each decoded segment is encoded whole again: `?`, `#` and `;` never reach
    # S3 as they are (`?acl` would name a subresource of the object).
    "/index.html%3Facl": "/index.html%3Facl",
    "/index.html%3facl": "/index.html%3Facl",
    "/robots.txt%23top": "/robots.txt%23top",
    "/robots.txt%3Bx=1": "/robots.txt%3Bx%3D1",
    "/a%2Bb.txt": "/a%2Bb.txt",
    "/caf%C3%A9/": "/caf%C3%A9/index.html",
    "/a%25b.txt": "/a%25b.txt",
}


@pytest.mark.parametrize(("uri", "key"), list(REWRITES.items()))
@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_a_path_goes_on_to_its_object(uri: str, key: str, method: str) -> None:
    [result] = run(viewer_request(uri, method))
    assert "statusCode" not in result  # a request, not an answer
    assert (result["method"], result["uri"]) == (method, key)


def test_the_no_slash_form_is_redirected_with_its_query() -> None:
    results = run(
        viewer_request("/away/api/articles/7/rating"),
        viewer_request("/away/api/articles/7/rating", "HEAD"),
        viewer_request("/away/api/articles/7/rating", querystring={"v": "2"}),
    )
    said = []
    for result in results:
        assert result["statusCode"] == 301
        assert "body" not in result
        assert common_headers_of(result)
        location = headers(result)["location"]
        said.append(f"301 to `{location.removesuffix('?v=2')}`")
    assert headers(results[2])["location"] == "rating/?v=2"
    assert set(said) == {expect("no slash (`7/rating`): GET, HEAD, with a query")}
    assert expect("the no-slash redirect's body") == "empty"


def test_no_slash_no_article() -> None:
    unknown, malformed = run(
        viewer_request("/away/api/articles/2/rating"),
        viewer_request("/away/api/articles/abc/rating"),
    )
    assert is_json_404(malformed)
    said = f"`2/rating`: {unknown['statusCode']} to `{headers(unknown)['location']}`; `abc/rating`: 404"
    assert said == expect("no slash, no article (`2/rating`, `abc/rating`)")


# The 404s the function answers itself, with the API's JSON error.

NOT_FOUND_URIS: Final = {
    "/away/api/articles/" + "1" * 300 + "/rating/": "an id of 300 digits",
    "/away/api/articles/7/rating/index.json": "the document's own path (`7/rating/index.json`)",
    "/.hidden": "a dotfile of yours (`/.hidden`)",
    # The publisher's state in the bucket, which the function must not let through.
    "/.ratings-api/state.gz": "a dotfile of yours (`/.hidden`)",
    "/away/api/articles/abc/rating/": None,
    "/away/api/articles/07/rating/": None,
    "/away/api/articles/-1/rating/": None,
    "/away/api/articles/0/rating/": None,
    "/away/api/articles/+7/rating/": None,
    "/away/api/articles/7.0/rating/": None,
    "/away/api/articles/%207/rating/": None,
    "/away/api/articles/0x7/rating/": None,
    "/away/api/articles/99999999999999999999/rating/": None,
    "/away/api/articles/7/rating//": None,
    "/away/api/articles/7/rating/extra": None,
    "/away/api/articles/7/ratings/": None,
    "/away/api/articles/7/": None,
    "/away/api/articles/": None,
    "/away/api/articles": None,
    "/../secret.txt": None,
    "/%2e%2e/secret.txt": None,
    "/..%2fsecret.txt": None,
    "/..%5csecret.txt": None,
    "/..\\secret.txt": None,
    "/away/api/articles/7/rating\\index.json": None,
    "/%00": None,
    "/away/api/articles/7%00/rating/": None,
    "/away/api/./articles/7/rating/": None,
    "/away/api/articles/7/rating/.": None,
    "/away//api/articles/7/rating/": None,
    "//etc/passwd": None,
    "/..%c0%af..%c0%afsecret.txt": None,
    "/%E0%A4%A": None,
    "/" + "a" * 2000: None,
}


@pytest.mark.parametrize("uri", list(NOT_FOUND_URIS))
@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_a_path_no_object_may_answer_is_the_json_404(uri: str, method: str) -> None:
    [result] = run(viewer_request(uri, method))
    assert is_json_404(result), result
    point = NOT_FOUND_URIS[uri]
    if point is not None:
        assert expect(point) == 404


NOT_ALLOWED_URIS: Final = ("/away/api/articles/7/rating/", "/away/api/articles/2/rating/", "/")
NOT_ALLOWED_METHODS: Final = ("POST", "PUT", "PATCH", "DELETE")


@pytest.mark.parametrize("uri", NOT_ALLOWED_URIS)
@pytest.mark.parametrize("method", NOT_ALLOWED_METHODS)
def test_other_methods_are_the_json_405(uri: str, method: str) -> None:
    [result] = run(viewer_request(uri, method))
    body = f'{{"detail": "Method \\"{method}\\" not allowed."}}\n'
    assert result["statusCode"] == 405
    assert result["body"] == {"encoding": "text", "data": body}
    assert headers(result)["allow"] == ALLOW
    assert headers(result)["content-type"] == "application/json"
    assert common_headers_of(result)
    said = f"POST, PUT, PATCH, DELETE: as the app; PROPFIND, TRACE: {NOT_RUN}"
    assert POINTS["POST, PUT, PATCH, DELETE, PROPFIND, TRACE on a rating"] == NOT_ALLOWED
    point = (
        "POST, PUT, PATCH, DELETE, PROPFIND, TRACE on a rating"
        if uri == "/away/api/articles/7/rating/"
        else "the same on an unknown id and on `/`"
    )
    assert expect(point) == said


@pytest.mark.parametrize(
    ("uri", "point"),
    [
        ("/away/api/articles/7/rating/", "OPTIONS, with or without CORS, on a rating"),
        ("/away/api/articles/2/rating/", "OPTIONS on an unknown id"),
    ],
)
def test_options_is_the_preflight(uri: str, point: str) -> None:
    [result] = run(viewer_request(uri, "OPTIONS"))
    got = headers(result)
    assert result["statusCode"] == 204
    assert "body" not in result
    assert common_headers_of(result)
    assert (
        got["allow"],
        got["access-control-allow-methods"],
        got["access-control-allow-headers"],
        got["access-control-max-age"],
    ) == (ALLOW, ALLOW, "*", "86400")
    assert expect(point) == PREFLIGHT


def test_the_front_page_and_only_it_carries_its_policy() -> None:
    pages = ["/", "/index.html"]
    others = ["/away/api/articles/7/rating/index.json", "/about/index.html", "/robots.txt"]
    results = run(*(viewer_response(uri) for uri in pages + others))
    policies = [headers(result).get("content-security-policy") for result in results]
    assert policies == [FRONT_PAGE_CSP] * len(pages) + [None] * len(others)
    assert (
        expect("the front page's `Content-Security-Policy`")
        == POINTS["the front page's `Content-Security-Policy`"]
    )


def test_the_error_page_keeps_its_headers_and_gets_no_policy() -> None:
    [result] = run(viewer_response("/", status=404))
    assert "content-security-policy" not in headers(result)


def test_every_point_the_function_decides_is_asserted_here() -> None:
    asserted = {
        "no slash (`7/rating`): GET, HEAD, with a query",
        "the no-slash redirect's body",
        "no slash, no article (`2/rating`, `abc/rating`)",
        "POST, PUT, PATCH, DELETE, PROPFIND, TRACE on a rating",
        "the same on an unknown id and on `/`",
        "OPTIONS, with or without CORS, on a rating",
        "OPTIONS on an unknown id",
        "the front page's `Content-Security-Policy`",
        *(point for point in NOT_FOUND_URIS.values() if point is not None),
    }
    assert asserted == set(CLOUDFRONT_FUNCTION_POINTS)


# The template


def template() -> dict[str, Any]:
    """deploy/cloudfront/template.yaml, its CloudFormation tags (!Sub, !Ref...) read as None."""

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("!", lambda loader, suffix, node: None)
    with open(TEMPLATE, encoding="utf-8") as file:
        loaded: dict[str, Any] = yaml.load(file, Loader=Loader)
    return loaded


def test_the_template_holds_this_very_function() -> None:
    function = template()["Resources"]["RatingsFunction"]["Properties"]
    assert function["FunctionCode"] == FUNCTION.read_text(encoding="utf-8")
    assert function["FunctionConfig"]["Runtime"] == "cloudfront-js-2.0"
    assert len(FUNCTION.read_bytes()) < MAX_FUNCTION_BYTES


def test_the_template_turns_a_missing_key_into_the_404_page() -> None:
    distribution = template()["Resources"]["RatingsDistribution"]["Properties"]
    errors = distribution["DistributionConfig"]["CustomErrorResponses"]
    assert [(e["ErrorCode"], e["ResponseCode"], e["ResponsePagePath"]) for e in errors] == [
        (403, 404, "/404.html"),
        (404, 404, "/404.html"),
    ]
    behavior = distribution["DistributionConfig"]["DefaultCacheBehavior"]
    assert [a["EventType"] for a in behavior["FunctionAssociations"]] == [
        "viewer-request",
        "viewer-response",
    ]


def test_the_published_404_page_is_the_json_error(tmp_path: Path) -> None:
    """The error page CloudFront sends is the published 404.html: its body is the JSON error."""
    from tests.hosts import build_project

    site = build_project(tmp_path)
    assert (site / "404.html").read_bytes() == NOT_FOUND
    assert content_type("404.html") == "application/json"  # the type --publish gives it
