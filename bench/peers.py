"""The peers our generator is measured against: Frozen-Flask and Hugo, building the same API.

Each peer builds ``away/api/articles/<id>/rating/index.json`` for every
article, with the same JSON document as ours, into ``work_dir / "out"``.
``prepare`` does everything but the build, untimed; the caller times the one
command it returns.

* Frozen-Flask (pinned in a venv of its own): ``prepare`` writes the articles
  to ``articles.json``, a Flask app and ``freeze.py``. The timed run includes
  starting Python, importing Flask and reading that JSON file, as ours
  includes reading its YAML.
* Hugo (0.111 from Debian; no content adapters before 0.126): ``prepare``
  writes one content file per article, the config and a JSON template; the
  timed run is ``hugo`` reading those files and rendering. rating_value is
  computed in the template with integer arithmetic, rounded half up as ours,
  so the bytes are the same (Hugo's ``jsonify`` would escape ``<``, ``>`` and
  ``&`` in a base URL as ``\\u003c``…, which URLs do not contain).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

Article = tuple[int, int, int]  # id, rating_sum, rating_count

FLASK_REQUIREMENTS: Final = ("Flask==3.1.3", "Werkzeug==3.1.9", "Frozen-Flask==1.0.2")

FLASK_APP: Final = '''\
"""The rating API as a Flask app, for Frozen-Flask to freeze."""
from __future__ import annotations

import json
from pathlib import Path

from flask import Flask, Response

DATA = json.loads((Path(__file__).parent / "articles.json").read_text(encoding="utf-8"))
BASE_URL: str = DATA["base_url"]
ARTICLES: dict[int, tuple[int, int]] = {a: (s, c) for a, s, c in DATA["articles"]}

# No static folder: it would add a rule and a URL generator with nothing to freeze.
app = Flask(__name__, static_folder=None)


def rating_value(total: int, count: int) -> str:
    """total / count with one decimal, ties rounded up, in integers as ours does."""
    if count == 0:
        return "0.0"
    tenths = (20 * total + count) // (2 * count)
    return f"{tenths // 10}.{tenths % 10}"


@app.route("/away/api/articles/<int:article_id>/rating/")
def rating(article_id: int) -> Response:
    total, count = ARTICLES[article_id]
    document = {
        "article_url": f"{BASE_URL}/away/api/articles/{article_id}/",
        "id": article_id,
        "rating_sum": total,
        "rating_count": count,
        "rating_value": rating_value(total, count),
    }
    return Response(json.dumps(document, ensure_ascii=False) + "\\n", mimetype="application/json")
'''

FLASK_FREEZE: Final = '''\
"""Freeze the rating API into ./out."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from flask_frozen import Freezer

from ratings_app import ARTICLES, app


class JsonFreezer(Freezer):
    # Frozen-Flask 1.0.2 hard-codes index.html for URLs ending in "/" and no
    # setting changes it (FREEZER_DEFAULT_MIMETYPE only names the type of
    # extension-less files), so the one method that maps URLs to files says index.json.
    def urlpath_to_filepath(self, path: str) -> str:
        return super().urlpath_to_filepath(path + "index.json" if path.endswith("/") else path)


app.config.update(
    FREEZER_DESTINATION=str(Path(__file__).parent / "out"),
    FREEZER_REMOVE_EXTRA_FILES=False,  # out is fresh: no walk of it after the build
    FREEZER_IGNORE_MIMETYPE_WARNINGS=True,  # skips a mimetypes guess per page
)
freezer = JsonFreezer(app, with_static_files=False, with_no_argument_rules=False, log_url_for=False)


@freezer.register_generator
def rating() -> Iterator[tuple[str, dict[str, int]]]:
    for article_id in ARTICLES:
        yield "rating", {"article_id": article_id}


freezer.freeze()
'''

HUGO_CONFIG: Final = """\
baseURL = "https://example.com/"
# Only the article pages: no home, sections, lists, feeds, sitemap, robots.txt or 404.
disableKinds = ["home", "section", "taxonomy", "term", "RSS", "sitemap", "robotsTXT", "404"]
disableAliases = true
enableGitInfo = false

[outputs]
page = ["json"]

[permalinks]
articles = "/away/api/articles/:filename/rating/"

[params]
base_url = {base_url}
"""

# Integer arithmetic (Hugo's div of two ints is an int) so that ties round up as ours do.
HUGO_TEMPLATE: Final = """\
{{- $p := .Params -}}
{{- $value := "0.0" -}}
{{- with $p.rating_count -}}
  {{- $tenths := div (add (mul 20 $p.rating_sum) .) (mul 2 .) -}}
  {{- $value = printf "%d.%d" (div $tenths 10) (mod $tenths 10) -}}
{{- end -}}
{"article_url": {{ printf "%s/away/api/articles/%d/" site.Params.base_url $p.article_id | jsonify }}, \
"id": {{ $p.article_id }}, "rating_sum": {{ $p.rating_sum }}, "rating_count": {{ $p.rating_count }}, \
"rating_value": "{{ $value }}"}
"""


@dataclass(frozen=True)
class Peer:
    """A tool that builds the same API, and how to set it up and run it."""

    name: str
    install: Callable[[Path], None]
    prepare: Callable[[list[Article], Path, str, Path], list[str]]
    output: Callable[[Path], Path]


def out_dir(work_dir: Path) -> Path:
    """Where every peer's build writes: the caller deletes it before each timed run."""
    return work_dir / "out"


def flask_venv(cache_dir: Path) -> Path:
    """The venv holding the pinned Flask and Frozen-Flask."""
    return cache_dir / "frozen-flask-venv"


def install_frozen_flask(cache_dir: Path) -> None:
    """Create the venv with the pinned versions, unless a finished one is there."""
    venv = flask_venv(cache_dir)
    # Written last, so a venv whose pip install failed or whose pins changed is rebuilt.
    marker = venv / "peers-requirements.txt"
    wanted = "\n".join(FLASK_REQUIREMENTS) + "\n"
    if marker.is_file() and marker.read_text(encoding="utf-8") == wanted:
        return
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet"]
    subprocess.run([*pip, *FLASK_REQUIREMENTS], check=True)
    marker.write_text(wanted, encoding="utf-8")


def prepare_frozen_flask(
    articles: list[Article], work_dir: Path, base_url: str, cache_dir: Path
) -> list[str]:
    """Write the data file, the app and the freeze script; return the freeze command."""
    work_dir.mkdir(parents=True, exist_ok=True)
    data = {"base_url": base_url, "articles": articles}
    (work_dir / "articles.json").write_text(json.dumps(data), encoding="utf-8")
    (work_dir / "ratings_app.py").write_text(FLASK_APP, encoding="utf-8")
    (work_dir / "freeze.py").write_text(FLASK_FREEZE, encoding="utf-8")
    return [str(flask_venv(cache_dir) / "bin" / "python"), str(work_dir / "freeze.py")]


def install_hugo(cache_dir: Path) -> None:
    """Install Debian's hugo unless one is on PATH; update the package lists only if needed."""
    if shutil.which("hugo"):
        return
    install = ["apt-get", "install", "-y", "hugo"]
    if subprocess.run(install, check=False).returncode != 0:
        # A fresh container has no package lists yet.
        subprocess.run(["apt-get", "update"], check=True)
        subprocess.run(install, check=True)


def hugo_content(article: Article) -> str:
    """The content file of one article: TOML front matter, which keeps integers integers."""
    article_id, total, count = article
    return f"+++\narticle_id = {article_id}\nrating_sum = {total}\nrating_count = {count}\n+++\n"


def prepare_hugo(
    articles: list[Article], work_dir: Path, base_url: str, cache_dir: Path
) -> list[str]:
    """Write the config, the template and one content file per article; return the hugo command."""
    content = work_dir / "content" / "articles"
    # Content left by an earlier, larger run would be built too.
    shutil.rmtree(work_dir / "content", ignore_errors=True)
    content.mkdir(parents=True)
    for article in articles:
        (content / f"{article[0]}.md").write_text(hugo_content(article), encoding="utf-8")
    config = HUGO_CONFIG.format(
        base_url=json.dumps(base_url, ensure_ascii=False)
    )  # a JSON string is a TOML string
    (work_dir / "hugo.toml").write_text(config, encoding="utf-8")
    layouts = work_dir / "layouts" / "_default"
    layouts.mkdir(parents=True, exist_ok=True)
    (layouts / "single.json").write_text(HUGO_TEMPLATE, encoding="utf-8")
    return [
        "hugo",
        "--source",
        str(work_dir),
        "--destination",
        str(out_dir(work_dir)),
        "--quiet",
        "--noBuildLock",
        "--cacheDir",
        str(cache_dir / "hugo-cache"),
    ]


PEERS: Final[dict[str, Peer]] = {
    "frozen-flask": Peer("frozen-flask", install_frozen_flask, prepare_frozen_flask, out_dir),
    "hugo": Peer("hugo", install_hugo, prepare_hugo, out_dir),
}
