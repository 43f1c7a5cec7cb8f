"""The sample catalogue (ratings.yaml's articles, frozen in a golden case), and what its front
page shows."""

from __future__ import annotations

from pathlib import Path
from typing import Final

# The front-page golden case's input: its front page's bytes are that case's expected/index.html.
SAMPLE: Final = (Path(__file__).parent / "cases/valid/front-page/ratings.yaml").read_text("utf-8")
# The best-rated table as (rank, id, average, ratings), worked out by hand:
# 4.8 three times, by count; 15 (1.3) and 31 (not rated) do not make the ten.
SAMPLE_BEST: Final = [
    ("1", "3", "4.8", "8"),
    ("2", "7", "4.8", "6"),
    ("3", "12", "4.8", "6"),
    ("4", "8", "4.3", "301"),
    ("5", "21", "4.0", "7"),
    ("6", "1", "4.0", "4"),
    ("7", "24", "3.5", "2"),
    ("8", "42", "3.2", "20"),
    ("9", "5", "3.0", "1"),
    ("10", "2", "2.3", "3"),
]
