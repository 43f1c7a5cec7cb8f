"""The module's bytes as the build writes them, the type Netlify gives it and its types, and
``embed.d.ts``, the element's TypeScript declarations, checked by ``tsc`` (the version pinned in
tests/hosts-node) against a page's code that uses them, and a copy with one wrong use.
"""

from __future__ import annotations

import fnmatch
import gzip
import re
import subprocess
import tomllib
from pathlib import Path
from typing import Final

import pytest

from ratings_api.embed import EMBED_PATH, MAX_GZIPPED, TYPES_PATH, embed_script, embed_types
from tests.hosts import NODE_BIN, install_host_tools

REPO: Final = Path(__file__).resolve().parent.parent
USAGE: Final = REPO / "tests" / "embed-types" / "usage.ts"
# The module and its types, by the Content-Type they are served with.
TYPED: Final = [
    (EMBED_PATH, "text/javascript; charset=utf-8"),
    (TYPES_PATH, "text/plain; charset=utf-8"),
]
RIGHT: Final = "const value: string = event.detail.rating_value;"
WRONG: Final = "const value: number = event.detail.rating_value;"
# As a page's project would: strict, the DOM's types, modules resolved as a bundler does.
TSC_OPTIONS: Final = (
    *("--noEmit", "--strict", "--target", "es2022", "--lib", "es2022,dom"),
    *("--module", "es2022", "--moduleResolution", "bundler"),
)


# The two values the build fills in: the stars drawn, and the top of the scale.
FILLED_IN: Final = re.compile(r"^const (?:STARS|TOP) = ([^;]+);", re.MULTILINE)


def test_the_module_is_small_and_fills_in_the_scale() -> None:
    five = embed_script((1, 5))
    assert len(gzip.compress(five, 9)) <= MAX_GZIPPED
    assert embed_script((1, 5)) == five  # the same bytes every build
    # Stars count to the top of a scale from 0 or 1; a hundred stars help nobody. Any other
    # scale is shown as a number, out of its top; no scale, as a number.
    for scale, stars, top in [((1, 5), "5", "5"), ((0, 10), "10", "10"), ((1, 3), "3", "3"),
                              ((-1, 1), "null", "1"), ((1, 100), "null", "100"), (None, "null", "null")]:  # fmt: skip
        assert FILLED_IN.findall(embed_script(scale).decode()) == [stars, top], scale
    # The labels say the scale in each language's words; without a scale, nothing.
    assert '"other":"Rated {value} out of {top} by {count} readers"' in five.decode()
    assert '"other":"Von {count} Lesern mit {value} bewertet"' in embed_script(None).decode()


@pytest.mark.parametrize(("path", "kind"), TYPED)
def test_netlify_types_the_module_and_its_types(path: str, kind: str) -> None:
    """netlify dev types files itself, so only Netlify reads this: the JSON rule must not win.

    Of the rules whose path matches, the last that sets a Content-Type wins where
    later rules override, and comes last where values are joined, which is the
    one a browser takes (Fetch, "extract a MIME type").
    """
    rules = tomllib.loads((REPO / "netlify.toml").read_text(encoding="utf-8"))["headers"]
    types = [
        rule["values"]["Content-Type"]
        for rule in rules
        if "Content-Type" in rule["values"] and fnmatch.fnmatchcase(f"/{path}", rule["for"])
    ]
    assert types == ["application/json", kind]


@pytest.mark.real_world
def test_tsc_accepts_the_documented_uses_and_refuses_a_wrong_one(tmp_path: Path) -> None:
    install_host_tools()
    usage = USAGE.read_text(encoding="utf-8")
    assert usage.count(RIGHT) == 1
    # As docs/embed.md says: the file saved beside the code, its types imported from ./embed.js.
    (tmp_path / Path(TYPES_PATH).name).write_bytes(embed_types())
    (tmp_path / "usage.ts").write_text(usage, encoding="utf-8")
    (tmp_path / "wrong.ts").write_text(usage.replace(RIGHT, WRONG), encoding="utf-8")
    line = 1 + usage[: usage.index(RIGHT)].count("\n")
    command = [NODE_BIN / "tsc", *TSC_OPTIONS, "usage.ts", "wrong.ts"]
    done = subprocess.run(
        command, cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False
    )
    # Nothing from usage.ts, nor from embed.d.ts itself: the one error is the wrong use.
    error = f"wrong.ts({line},9): error TS2322: Type 'string' is not assignable to type 'number'.\n"
    assert (done.returncode, done.stderr, done.stdout) == (2, "", error)
