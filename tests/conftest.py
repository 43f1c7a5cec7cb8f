from __future__ import annotations

import pytest

# Variables that choose the base URL: a developer's shell or CI may set any of them.
BASE_URL_VARIABLES = ("BASE_URL", "CONTEXT", "URL", "DEPLOY_PRIME_URL")


@pytest.fixture(autouse=True)
def _no_base_url_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in BASE_URL_VARIABLES:
        monkeypatch.delenv(name, raising=False)
