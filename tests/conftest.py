from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator

import pytest

from tests.action import installed_tool  # noqa: F401  (session fixtures of two modules each)
from tests.browser import browser  # noqa: F401
from tests.objectstore import STORES, Store, remove_store

SHM = "/dev/shm"


@pytest.fixture(autouse=True)
def _no_base_url_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The variables that choose the base URL: a developer's shell or CI may set any of them."""
    for name in ("BASE_URL", "CONTEXT", "URL", "DEPLOY_PRIME_URL"):
        monkeypatch.delenv(name, raising=False)


def pytest_configure(config: pytest.Config) -> None:
    """Put every test's tmp_path on tmpfs where the machine has one: the tests write
    thousands of files, and a disk slows down for minutes after mass deletions."""
    if config.option.basetemp is None and _roomy_tmpfs(SHM):
        config.option.basetemp = tempfile.mkdtemp(dir=SHM, prefix="ratings-tests-")
        config.add_cleanup(lambda: shutil.rmtree(config.option.basetemp, ignore_errors=True))
    _coverage_floor_for_the_whole_suite(config)


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--real-world",
        action="store_true",
        help="also run the real_world tier: nginx, Netlify's and Cloudflare's servers, "
        "the S3 stores, the databases and Chromium, installed and started by the tests",
    )


def _coverage_floor_for_the_whole_suite(config: pytest.Config) -> None:
    """Enforce fail_under (pyproject.toml) only when every test runs (no paths given, none
    deselected by -k, -m or --lf), or when given by hand: a run of a few tests cannot reach it."""
    coverage = config.pluginmanager.get_plugin("_cov")  # pytest-cov, unless --no-cov
    floor_given = any(arg.startswith("--cov-fail-under") for arg in config.invocation_params.args)
    whole_suite = (
        config.args_source == pytest.Config.ArgsSource.TESTPATHS
        and config.option.real_world
        and not config.option.keyword
        and not config.option.markexpr
        and not getattr(config.option, "lf", False)  # absent under -p no:cacheprovider
    )
    if coverage is not None and not floor_given and not whole_suite:
        coverage.options.cov_fail_under = 0


def _roomy_tmpfs(path: str) -> bool:
    """Whether ``path`` is a writable folder with room for the suite (a benchmark may fill it)."""
    try:
        room = os.statvfs(path)
    except OSError:
        return False
    return (
        os.access(path, os.W_OK)
        and room.f_favail > 500_000
        and room.f_bavail * room.f_frsize > 2**30
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Leave out the real_world tier unless --real-world is given, and the runs of a test, or
    of one of its cases, on a store its mark does not name:
    ``@pytest.mark.stores("SeaweedFS", why="moto's server checks no signature")``."""
    kept, left_out = [], []
    real_world = config.option.real_world
    for item in items:
        if not real_world and item.get_closest_marker("real_world"):
            left_out.append(item)
            continue
        mark = item.get_closest_marker("stores")
        callspec = getattr(item, "callspec", None)
        store = callspec.params.get("object_store") if callspec else None
        if mark is not None:
            assert set(mark.args) <= set(STORES), item.nodeid
            assert mark.kwargs.get("why"), f"{item.nodeid}: say why it needs these stores"
        (left_out if mark and store and store not in mark.args else kept).append(item)
    if left_out:
        config.hook.pytest_deselected(items=left_out)
        items[:] = kept


@pytest.fixture(scope="session", params=list(STORES))
def object_store(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Store]:
    """Each store of tests/objectstore.py, running, one at a time: session-scoped, so each
    starts once (pytest runs each store's tests together). Each test takes its own bucket."""
    store = STORES[request.param](tmp_path_factory.mktemp(request.param))
    try:
        yield store
    finally:
        remove_store(store)
