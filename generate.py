"""Build the static JSON rating API: ``python generate.py --help``."""
from __future__ import annotations

from ratings_api.cli import main
from ratings_api.server import create_app

__all__ = ["create_app", "main"]

if __name__ == "__main__":
    raise SystemExit(main())
