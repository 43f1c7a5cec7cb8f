"""Build the static JSON rating API: ``python generate.py --help``."""

from __future__ import annotations

from typing import Any

from ratings_api.cli import main


def create_app(root: str = "site") -> Any:
    """The WSGI app serving ``root``: ``gunicorn 'generate:create_app()'``.

    Imported on call, so that a build never loads the server and WhiteNoise.
    """
    from ratings_api.server import create_app as server_app

    return server_app(root)


if __name__ == "__main__":
    raise SystemExit(main())
