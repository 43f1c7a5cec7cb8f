"""What only the CloudFront Function of deploy/cloudfront does, run in node on CloudFront-shaped
events: the key of each object it sends a request on to, and no policy on an error page.

The contract suite (tests/test_http_contract.py) runs the function as one more host, the site
as its bucket, on each point it decides.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

import pytest

from tests.hosts import CloudFrontFunction, viewer_request, viewer_response

pytestmark = pytest.mark.real_world

# The rewrites: the request goes on to S3, for the object of the published layout (a rating,
# `7%2Frating%2F`, `/`, `/index.html`, `/about/`, robots.txt, openapi.json and the user's CNAME
# are the contract suite's, on CloudFront as a host: each answered with its file).
# Each decoded segment is encoded whole again: `?`, `#` and `;` never reach S3 as
# they are (`?acl` would name a subresource of the object).
REWRITES: Final = {
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


def test_a_path_goes_on_to_its_object_and_an_error_page_has_no_policy(tmp_path: Path) -> None:
    """GET and HEAD of each path: the request passed on, with the object's key; the front
    page's policy is not put on the error page sent for it."""
    function = CloudFrontFunction(tmp_path / "node.log")
    try:
        asked = [(uri, method) for uri in REWRITES for method in ("GET", "HEAD")]
        passed = [function(viewer_request(uri, method)) for uri, method in asked]
        error_page = function(viewer_response("/", 404, "application/json"))
    finally:
        function.close()
    assert [(result["method"], result["uri"]) for result in passed] == [
        (method, REWRITES[uri]) for uri, method in asked
    ]
    assert "content-security-policy" not in error_page["headers"]
