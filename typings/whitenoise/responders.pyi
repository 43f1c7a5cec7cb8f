import re
from collections.abc import Mapping, Sequence
from http import HTTPStatus
from io import BufferedIOBase
from typing import Any, BinaryIO

# What a response's body can be: the open file, a slice of it for a Range, or none.
_Body = BinaryIO | BufferedIOBase | None
_Headers = Sequence[tuple[str, str]]

class Response:
    status: HTTPStatus
    headers: _Headers
    file: _Body
    def __init__(self, status: HTTPStatus, headers: _Headers, file: _Body) -> None: ...

class SlicedFile(BufferedIOBase):
    def __init__(self, fileobj: BinaryIO, start: int, end: int) -> None: ...

class StaticFile:
    last_modified: tuple[int, ...] | None
    etag: str
    not_modified_response: Response
    alternatives: Sequence[tuple[re.Pattern[str], str, _Headers]]
    def __init__(
        self,
        path: str,
        headers: Sequence[tuple[str, str]],
        encodings: Mapping[str, str] | None = None,
        stat_cache: Mapping[str, Any] | None = None,
    ) -> None: ...
    def get_response(self, method: str, request_headers: Mapping[str, Any]) -> Response: ...
    def get_range_response(
        self, range_header: str, base_headers: _Headers, file_handle: _Body
    ) -> Response: ...
    def is_not_modified(self, request_headers: Mapping[str, Any]) -> bool: ...
    def get_path_and_headers(self, request_headers: Mapping[str, Any]) -> tuple[str, _Headers]: ...
