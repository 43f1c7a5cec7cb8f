"""Build the static JSON rating API: ``python generate.py --help``."""
from __future__ import annotations

from ratings_api.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
