"""``python -m ratings_api``: the same command as ``ratings-api`` and ``python generate.py``."""

from __future__ import annotations

from ratings_api.cli import main

raise SystemExit(main())
