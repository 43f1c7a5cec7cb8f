"""The hosts' configuration, rendered from the HTTP contract (ratings_api/contract.py).

Every value of the contract in deploy/ and netlify.toml (headers, bodies, the id
pattern, content types) comes from the module through the templates in
deploy/templates/; the rendered files are checked in, and tests/test_hosting.py
holds each to its rendering. After changing the contract or a template, run:

    python -m deploy.render
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Final

import jinja2

from ratings_api import contract

REPO: Final = Path(__file__).resolve().parent.parent
COMMAND: Final = "python -m deploy.render"
# Each rendered file, by its path in the repository, and its template in deploy/templates/.
FILES: Final = {
    "deploy/nginx.conf": "nginx.conf.j2",
    "deploy/nginx-object-storage.conf": "nginx-object-storage.conf.j2",
    "deploy/cloudflare-pages/_headers": "_headers.j2",
    "deploy/cloudflare-r2-worker/worker.js": "worker.js.j2",
    "deploy/cloudfront/function.js": "function.js.j2",
    "deploy/cloudfront/template.yaml": "template.yaml.j2",
    "netlify.toml": "netlify.toml.j2",
}
# nginx's variable for each preflight header but Allow (a header new to the contract needs one).
NGINX_VARIABLES: Final = {
    "Access-Control-Allow-Methods": "preflight_methods",
    "Access-Control-Allow-Headers": "preflight_headers",
    "Access-Control-Max-Age": "preflight_max_age",
}
METHOD: Final = "$request_method"  # where a 405's body names the method: nginx's variable


def single_quoted(text: str) -> str:
    """``text`` as a single-quoted string of JavaScript or of nginx's configuration."""
    escaped = text.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n")
    return f"'{escaped}'"


def js_not_allowed(method: str) -> str:
    """A JavaScript expression of the 405's body for the method in the variable ``method``."""
    before, after = contract.not_allowed(METHOD).decode().split(METHOD)
    return f"{single_quoted(before)} + {method} + {single_quoted(after)}"


def environment() -> jinja2.Environment:
    """The templates, with the contract and the quoting each language needs."""
    templates = jinja2.Environment(
        loader=jinja2.FileSystemLoader(REPO / "deploy/templates"),
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
        autoescape=False,  # configuration and code, not HTML: each value is quoted by a filter
    )
    templates.filters.update(
        quoted=json.dumps,  # a double-quoted string for nginx, TOML, YAML and JavaScript
        single_quoted=single_quoted,
        slashed=lambda text: text.replace("/", "\\/"),  # in a JavaScript regular expression
    )
    templates.globals.update(
        contract=contract,
        articles=f"/{contract.ARTICLES_PATH}",
        common=contract.COMMON_HEADERS,
        preflight=dict(contract.PREFLIGHT),
        front_page=f"/{contract.FRONT_PAGE}",
        not_found=contract.NOT_FOUND.decode(),
        not_allowed=contract.not_allowed(METHOD).decode(),
        js_not_allowed=js_not_allowed,
        nginx_variables=NGINX_VARIABLES,
        media_type=lambda suffix: contract.CONTENT_TYPES[suffix].split(";")[0],
    )
    return templates


def rendered() -> dict[str, str]:
    """Each file's text as the contract renders it, by its path in the repository."""
    templates = environment()
    texts: dict[str, str] = {}
    for path, name in FILES.items():
        texts[path] = templates.get_template(name).render(rendered=texts)
    return texts


def main(argv: Sequence[str] | None = None) -> int:
    """Write each rendered file where it differs; print the paths written."""
    del argv  # no options
    for path, text in rendered().items():
        target = REPO / path
        if target.read_text(encoding="utf-8") != text:
            target.write_text(text, encoding="utf-8")
            print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
