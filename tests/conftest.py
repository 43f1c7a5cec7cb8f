from __future__ import annotations

import os
import shutil
import tempfile

import pytest

# Variables that choose the base URL: a developer's shell or CI may set any of them.
BASE_URL_VARIABLES = ("BASE_URL", "CONTEXT", "URL", "DEPLOY_PRIME_URL")
SHM = "/dev/shm"


@pytest.fixture(autouse=True)
def _no_base_url_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in BASE_URL_VARIABLES:
        monkeypatch.delenv(name, raising=False)


def pytest_configure(config: pytest.Config) -> None:
    """Put every test's tmp_path on tmpfs where the machine has one.

    The tests write thousands of files, and this machine's disk creates files
    several times slower for minutes after mass deletions (such as pytest's
    own clean-up of old runs); on /dev/shm the suite is many times faster.
    """
    if config.option.basetemp is None and _roomy_tmpfs(SHM):
        config.option.basetemp = tempfile.mkdtemp(dir=SHM, prefix="ratings-tests-")
        config.add_cleanup(lambda: shutil.rmtree(config.option.basetemp, ignore_errors=True))
    _coverage_floor_for_the_whole_suite(config)


def _coverage_floor_for_the_whole_suite(config: pytest.Config) -> None:
    """Enforce fail_under (pyproject.toml) only when every test runs.

    A run of a few tests still prints their coverage, but cannot reach the floor
    and should not fail for that; ``--cov-fail-under`` given by hand still counts.
    """
    coverage = config.pluginmanager.get_plugin("_cov")  # pytest-cov, unless --no-cov
    floor_given = any(arg.startswith("--cov-fail-under") for arg in config.invocation_params.args)
    if coverage is not None and not floor_given and not _whole_suite(config):
        coverage.options.cov_fail_under = 0


def _whole_suite(config: pytest.Config) -> bool:
    """Whether this run is every test: no paths given, none deselected by -k, -m or --lf."""
    return (
        config.args_source == pytest.Config.ArgsSource.TESTPATHS
        and not config.option.keyword
        and not config.option.markexpr
        and not config.option.lf
    )


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
