from __future__ import annotations


class InputError(Exception):
    """A mistake the user can fix: bad input, bad options, an unwritable output.

    The message is complete and printed as it is, conventionally
    ``FILE:LINE:COL: what is wrong``; anything else raised is a bug.
    """
