"""One build: read and validate the input, settle the base URL, render, sync the output."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from ratings_api import csvinput, loader
from ratings_api.build_lock import OnBuildWait
from ratings_api.describe import describe_files
from ratings_api.embed import embed_files
from ratings_api.errors import InputError
from ratings_api.hosting import hosting_files
from ratings_api.limits import check as check_host_limits
from ratings_api.loader import Catalogue
from ratings_api.rating import Renderer
from ratings_api.rules import url_problem
from ratings_api.writer import Changes, sync_site


@dataclass(frozen=True)
class Result:
    articles: int
    changes: Changes
    # What the build wrote, for --publish: the catalogue and the renderer of its
    # documents, and the other files' bytes by path.
    catalogue: Catalogue | None = None
    render: Renderer | None = None
    extras: Mapping[str, bytes] = field(default_factory=dict)

    def summary(self, output: str, seconds: float) -> str:
        """The one line a build prints: articles, files written, removed, unchanged, time."""
        changes = self.changes
        rate = f"{self.articles / seconds:,.0f}" if seconds > 0 else "-"
        return (
            f"built {output}: {count_articles(self.articles)}; files: {changes.written:,} written, "
            f"{changes.removed:,} removed, {changes.unchanged:,} unchanged "
            f"in {seconds:.2f} s ({rate} articles/s)"
        )


@dataclass(frozen=True)
class Reading:
    """How to read the input: its format (None: csv for a name ending in .csv, else yaml),
    and the scale of a CSV input, which holds no settings of its own."""

    input_format: str | None = None
    scale: tuple[int, int] | None = None


def count_articles(count: int) -> str:
    """``1 article``, ``12 articles``, ``1,000,000 articles``."""
    return f"{count:,} article{'' if count == 1 else 's'}"


def build(
    input_path: str,
    output: str | None,
    *,
    base_url: str | None,
    environ: Mapping[str, str],
    dry_run: bool = False,
    fallback_base_url: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    host_notice: Callable[[str], None] | None = None,
    waiting: OnBuildWait | None = None,
    reading: Reading = Reading(),
) -> Result:
    """Build ``output`` from ``input_path``; with ``dry_run``, only say what would change;
    with no ``output``, only render the site (``render_site``).

    ``fallback_base_url`` is used when no base URL is configured anywhere
    (``--serve`` passes the address it serves at). ``progress`` is called
    now and then with the articles written so far, and all. ``host_notice``,
    where a static host's deploy follows, checks its limits first. ``waiting``
    is told the process id of another build that holds ``output``, before
    this one waits for it.
    """
    site = render_site(
        input_path, base_url=base_url, environ=environ, fallback=fallback_base_url, reading=reading
    )
    assert site.catalogue is not None and site.render is not None
    if output is None:
        return site
    if host_notice is not None:
        check_host_limits(site.articles, site.extras, environ, host_notice)
    changes = sync_site(
        output,
        site.catalogue,
        site.render,
        extras=site.extras,
        dry_run=dry_run,
        progress=None if progress is None else lambda done: progress(done, site.articles),
        waiting=waiting,
    )
    return replace(site, changes=changes)


def render_site(
    input_path: str,
    *,
    base_url: str | None,
    environ: Mapping[str, str],
    fallback: str | None = None,
    reading: Reading = Reading(),
) -> Result:
    """What a build of ``input_path`` (``-``: standard input) would write, held in memory,
    with no folder touched.

    ``--publish`` without an output folder uploads from this: the documents are
    rendered from the catalogue when uploaded, the other files are bytes here.
    """
    form = reading.input_format or ("csv" if input_path.lower().endswith(".csv") else "yaml")
    if reading.scale is not None and form != "csv":
        raise InputError("--scale goes only with a CSV input: a YAML input sets scale in the file")
    name = "<stdin>" if input_path == "-" else input_path  # as messages name the input
    data = loader.read_bytes(input_path)
    if form == "csv":
        catalogue = csvinput.read(name, data, reading.scale)
    elif reading.input_format is None and csvinput.HEADER.match(data):  # standard input, say
        raise InputError("this looks like CSV: add --format csv", name, 1, 1)
    else:
        catalogue = loader.load(name, data)
    # A CSV input holds no base_url: no file to name where it is missing.
    url = resolve_base_url(name if form == "yaml" else None, base_url, environ, catalogue, fallback)
    extras = {**describe_files(catalogue, url), **hosting_files(), **embed_files(catalogue)}
    return Result(len(catalogue.ids), Changes(), catalogue, Renderer(url), extras)


def resolve_base_url(
    input_path: str | None,
    option: str | None,
    environ: Mapping[str, str],
    catalogue: Catalogue,
    fallback: str | None = None,
) -> str:
    """The first base URL given: --base-url, BASE_URL, the file, Netlify's variables.

    An empty environment variable counts as unset, as CI systems often
    define variables they leave empty.
    """
    if option is not None:
        return _checked(option, "--base-url")
    if environ.get("BASE_URL"):
        return _checked(environ["BASE_URL"], "BASE_URL (environment)")
    if catalogue.base_url is not None:
        return _checked(catalogue.base_url, "base_url", input_path, catalogue.base_url_at)
    if "CONTEXT" in environ:  # only Netlify's builds set CONTEXT; URL alone is too common a name
        name = "URL" if environ["CONTEXT"] == "production" else "DEPLOY_PRIME_URL"
        if environ.get(name):
            return _checked(environ[name], f"{name} (Netlify, CONTEXT={environ['CONTEXT']})")
    if fallback is not None:
        return _checked(fallback, "the served address")
    in_file = "" if input_path is None else f"base_url in {input_path}, "
    raise InputError(
        f"no base URL to build article_url from: set {in_file}"
        "the BASE_URL environment variable, or --base-url",
        input_path,
    )


def _checked(
    url: str, source: str, path: str | None = None, at: tuple[int, int] | None = None
) -> str:
    """``url`` without its trailing slashes, or an InputError naming ``source``."""
    problem = url_problem(url)
    if problem:
        raise InputError(f"{source}: {problem}, found '{url}'", path, *(at or ()))
    return url.rstrip("/")
