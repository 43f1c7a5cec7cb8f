"""``embed.d.ts``, the element's TypeScript declarations, checked by ``tsc`` (the version
pinned in tests/hosts-node) against a page's code that uses them, and a copy with one wrong use.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Final

import pytest

from ratings_api.embed import TYPES_PATH, embed_types
from tests.hosts import NODE_BIN, install_host_tools

pytestmark = pytest.mark.real_world

USAGE: Final = Path(__file__).resolve().parent / "embed-types" / "usage.ts"
RIGHT: Final = "const value: string = event.detail.rating_value;"
WRONG: Final = "const value: number = event.detail.rating_value;"
# As a page's project would: strict, the DOM's types, modules resolved as a bundler does.
TSC_OPTIONS: Final = (
    *("--noEmit", "--strict", "--target", "es2022", "--lib", "es2022,dom"),
    *("--module", "es2022", "--moduleResolution", "bundler"),
)


def test_tsc_accepts_the_documented_uses_and_refuses_a_wrong_one(tmp_path: Path) -> None:
    install_host_tools()
    usage = USAGE.read_text(encoding="utf-8")
    assert usage.count(RIGHT) == 1
    # As docs/embed.md says: the file saved beside the code, its types imported from ./embed.js.
    (tmp_path / Path(TYPES_PATH).name).write_bytes(embed_types())
    (tmp_path / "usage.ts").write_text(usage, encoding="utf-8")
    (tmp_path / "wrong.ts").write_text(usage.replace(RIGHT, WRONG), encoding="utf-8")
    line = 1 + usage[: usage.index(RIGHT)].count("\n")
    done = subprocess.run(
        [str(NODE_BIN / "tsc"), *TSC_OPTIONS, "usage.ts", "wrong.ts"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    # Nothing from usage.ts, nor from embed.d.ts itself: the one error is the wrong use.
    assert (done.returncode, done.stderr, done.stdout) == (
        2,
        "",
        f"wrong.ts({line},9): error TS2322: Type 'string' is not assignable to type 'number'.\n",
    )
