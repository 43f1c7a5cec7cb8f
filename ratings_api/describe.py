"""Files that describe the API: filled in by the API-description work."""
from __future__ import annotations

from ratings_api.loader import Catalogue


def describe_files(catalogue: Catalogue, base_url: str) -> dict[str, bytes]:
    """Generated files beside the documents, by their path below the output folder."""
    return {}
