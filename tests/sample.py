"""The sample catalogue (ratings.yaml's articles, frozen here), and what its front page shows."""

from __future__ import annotations

from typing import Final

SAMPLE: Final = """\
base_url: https://ratings.example.com
scale: [1, 5]
articles:
  1: [4, 5, 3, 4]
  2: [2, 3, 2]
  3: [5, 5, 4, 5, 5, 5, 4, 5]
  5: [3]
  7: [5, 4, 5, 5, 5, 5]
  8: {sum: 1290, count: 301}
  12: {sum: 29, count: 6}
  15: [1, 2, 1, 1]
  21: [4, 4, 4, 5, 3, 4, 4]
  24: [3, 4]
  31: []
  42: {sum: 63, count: 20}
"""
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
