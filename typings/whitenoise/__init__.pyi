# Types for the parts of WhiteNoise 6.12 (pinned) that ratings_api and bench/ use.
# WhiteNoise ships neither annotations nor a py.typed marker, and typeshed has no
# stubs for it; these are written from its source (base.py, responders.py).
from whitenoise.base import WhiteNoise as WhiteNoise

__all__ = ["WhiteNoise"]
