"""``InputError``: the one class for a mistake the user can fix; anything else raised is a bug."""

from __future__ import annotations


class InputError(Exception):
    """Bad input, a bad option, an unwritable output: one line, printed as it is.

    As tomli's ``TOMLDecodeError``, it keeps where the mistake is apart from
    what it is: ``path``, ``lineno`` and ``colno`` (from 1), None where unknown.
    Its text is ``PATH:LINE:COL: msg``, or ``PATH: msg``, or ``msg`` alone.
    """

    def __init__(
        self,
        msg: str,
        path: str | None = None,
        lineno: int | None = None,
        colno: int | None = None,
    ) -> None:
        where = [str(part) for part in (path, lineno, colno) if part is not None]
        super().__init__(": ".join([":".join(where), msg]) if where else msg)
        self.msg = msg
        self.path = path
        self.lineno = lineno
        self.colno = colno
