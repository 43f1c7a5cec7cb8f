"""``InputError``: the one class for a mistake the user can fix; anything else raised is a bug."""

from __future__ import annotations


class InputError(Exception):
    """Bad input, a bad option, an unwritable output: one line, printed as it is.

    As tomli's ``TOMLDecodeError`` is made, it is made from where the mistake is
    (``path``, ``lineno`` and ``colno``, from 1, None where unknown) and what it is:
    its text is ``PATH:LINE:COL: msg``, or ``PATH: msg``, or ``msg`` alone.
    """

    def __init__(
        self, msg: str, path: str | None = None, lineno: int | None = None, colno: int | None = None
    ) -> None:
        where = ":".join(str(part) for part in (path, lineno, colno) if part is not None)
        super().__init__(f"{where}: {msg}" if where else msg)
