"""The documentation as a reader meets it: a short README and its map, links that resolve.

Also: no development history in docs/, short pages, and the pages rendered from the
tests' own data as rendered.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Final
from urllib.parse import unquote

from markdown_it import MarkdownIt

from tests.contract import contract_table
from tests.docs_pages import CLIENT_POINTS, command_errors, input_errors, rendered
from tests.hosts import DIFFERENCES

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# Linked to from the pages, and checked alike.
OTHERS = [ROOT / name for name in ("ARCHITECTURE.md", "CONTRIBUTING.md", "CHANGELOG.md")]
OTHERS += [ROOT / "tests" / "README.md", ROOT / "tests" / "hosts-contract.md"]
OTHERS += [ROOT / "bench" / "README.md"]

EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)  # http:, https:, mailto:
MARKDOWN: Final = MarkdownIt("commonmark")


def anchors(text: str) -> set[str]:
    """The #anchors GitHub makes from a page's headings.

    As github-slugger does: the heading's text as rendered (link text kept,
    backticks gone), lowercased, every character but letters, digits, `_`,
    `-` and spaces removed, spaces made hyphens; a repeated slug gets -1, -2...
    """
    seen: dict[str, int] = {}
    for opening, inline in itertools.pairwise(MARKDOWN.parse(text)):
        if opening.type == "heading_open":
            parts = inline.children or []
            rendered = "".join(p.content for p in parts if p.type in ("text", "code_inline"))
            slug = re.sub(r"[^\w\- ]", "", rendered.lower()).replace(" ", "-")
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            if count:
                seen.setdefault(f"{slug}-{count}", 1)
    return set(seen)


def links(text: str) -> Iterator[tuple[int, str]]:
    """Every link and image target, with its line, as markdown-it reads the page."""
    for token in MARKDOWN.parse(text):
        line = token.map[0] + 1 if token.map else 0
        for child in token.children or []:
            line += child.type == "softbreak"
            target = child.attrs.get("href", child.attrs.get("src"))
            if target is not None:
                yield line, unquote(str(target))


def broken_links(page: Path) -> list[str]:
    """``page:line: target: why`` for each relative link or anchor that leads nowhere."""
    problems = []
    for number, target in links(page.read_text(encoding="utf-8")):
        if EXTERNAL.match(target):
            continue
        path, _, anchor = target.partition("#")
        goal = (page.parent / path).resolve() if path else page
        if not goal.exists():
            problems.append(f"{page.name}:{number}: {target}: no such file")
        elif (
            anchor
            and goal.suffix == ".md"
            and anchor not in anchors(goal.read_text(encoding="utf-8"))
        ):
            problems.append(f"{page.name}:{number}: {target}: no such heading")
    return problems


def test_every_relative_link_and_anchor_resolves() -> None:
    assert len(PAGES) >= 14, PAGES
    count = sum(1 for page in PAGES + OTHERS for _ in links(page.read_text(encoding="utf-8")))
    assert count >= 100, "no links found"

    assert [problem for page in PAGES + OTHERS for problem in broken_links(page)] == []


# docs/ is for users: what a page must not hold, and how big it may be.

DOCS = ROOT / "docs"
MAX_PAGE: Final = 16_000  # characters: a page answers one question
MAX_DOCS: Final = 100_000  # characters, every page of docs/ together
# Characters: the README is a front door; the contributors' notebooks say how to run, not what
# was run (that is in git history).
MAX_OTHERS: Final = {"README.md": 10_000, "tests/README.md": 8_000, "bench/README.md": 12_000}
HISTORY: Final = [
    (re.compile(r"load average", re.IGNORECASE), "a load average"),
    (re.compile(r"\bissues? \d+\b|\(issue", re.IGNORECASE), "an issue number"),
    (re.compile(r"(?<![\w.])/(?:dev/shm|work|home|root|tmp|mnt)/"), "a path of one machine"),
    (re.compile(r"\.\./[\w.-]*checkout"), "a path of one machine"),
    (re.compile(r"\bA/B\b"), "an A/B of designs"),
    # Not after `date ` nor IAM's "Version".
    (re.compile(r"(?<!date )(?<!\"Version\": \")\b20\d\d-\d\d-\d\d\b"), "a dated run"),
]


def history(page: Path) -> list[str]:
    """``page:line: what`` for each trace of development history in a user's page."""
    found = []
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1):
        found += [
            f"{page.name}:{number}: {what}" for pattern, what in HISTORY if pattern.search(line)
        ]
    return found


def test_a_broken_link_an_anchor_or_history_is_found(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other page\n\n## A `code` heading, with: punctuation\n")
    page = tmp_path / "page.md"
    page.write_text(
        "# Title\n\n## Twice\n\n## Twice\n\n"
        "```sh\n# not a heading\n[not a link](nowhere.md)\n```\n\n"
        "[fine](other.md#a-code-heading-with-punctuation) [fine](#twice-1) [fine](#title)\n"
        "[missing file](gone.md) `[in code](gone.md)`\n"
        "[missing anchor](other.md#a-code-heading) [missing anchor](#twice-2)\n"
        "![missing image](gone.png) [external](https://example.com/gone.md)\n"
        "[missing here](#not-a-heading)\n"
        "Measured at load average 1.3.\n## Writers (issue 11)\nas issue 12 says\n"
        "python bench/run.py --dir /dev/shm/rb --compare ../threads-checkout\n"
        "an A/B on 2026-11-22, in /work/bench-disk\n"
        "fine: /proc/self/mem, site/away/api, s3://BUCKET/PREFIX, https://example.com/tmp/x\n"
    )

    assert broken_links(page) == [
        "page.md:13: gone.md: no such file",
        "page.md:14: other.md#a-code-heading: no such heading",
        "page.md:14: #twice-2: no such heading",
        "page.md:15: gone.png: no such file",
        "page.md:16: #not-a-heading: no such heading",
    ]
    assert history(page) == [
        "page.md:17: a load average",
        "page.md:18: an issue number",
        "page.md:19: an issue number",
        "page.md:20: a path of one machine",
        "page.md:20: a path of one machine",
        "page.md:21: a path of one machine",
        "page.md:21: an A/B of designs",
        "page.md:21: a dated run",
    ]


def test_the_readme_maps_every_page_and_docs_keep_to_their_rules() -> None:
    """The README is a front door with a map of every page; docs/ holds no development history,
    each page is short and all of them fit their budget, as do the contributors' notebooks."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    mapped = {target for _, target in links(readme) if target.startswith("docs/")}
    assert {f"docs/{page.name}" for page in PAGES[1:]} - mapped == set()

    assert [problem for page in sorted(DOCS.glob("*.md")) for problem in history(page)] == []

    limits = MAX_OTHERS | {f"docs/{page.name}": MAX_PAGE for page in DOCS.glob("*.md")}
    sizes = {name: len((ROOT / name).read_text(encoding="utf-8")) for name in limits}
    assert {name: size for name, size in sizes.items() if size > limits[name]} == {}
    assert sum(size for name, size in sizes.items() if name.startswith("docs/")) <= MAX_DOCS, sizes


# Pages rendered from the tests' data


def test_the_rendered_pages_are_as_rendered() -> None:
    """If not: ``python -m tests.docs_pages`` writes them again."""
    assert len(input_errors()) >= 60  # the cases were found
    assert len(command_errors()) >= 15
    for path, text in rendered().items():
        assert path.read_text(encoding="utf-8") == text, path


def test_the_http_page_shows_how_the_hosts_differ_as_measured() -> None:
    table = contract_table(DIFFERENCES, CLIENT_POINTS, "| | the app |")
    assert table in (DOCS / "http-api.md").read_text(encoding="utf-8"), table
