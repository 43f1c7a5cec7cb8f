from collections.abc import Callable, Iterable
from wsgiref.headers import Headers

from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment
from whitenoise.responders import StaticFile

class WhiteNoise:
    FOREVER: int
    application: WSGIApplication
    autorefresh: bool
    max_age: int | None
    allow_all_origins: bool
    charset: str
    index_file: str | None
    files: dict[str, StaticFile]
    def __init__(
        self,
        application: WSGIApplication,
        root: str | None = None,
        prefix: str | None = None,
        *,
        autorefresh: bool = False,
        max_age: int | None = 60,
        allow_all_origins: bool = True,
        charset: str = "utf-8",
        mimetypes: dict[str, str] | None = None,
        add_headers_function: Callable[[Headers, str, str], None] | None = None,
        index_file: str | bool | None = None,
        immutable_file_test: Callable[[str, str], bool] | str | None = None,
    ) -> None: ...
    def __call__(
        self, environ: WSGIEnvironment, start_response: StartResponse
    ) -> Iterable[bytes]: ...
    def add_files(self, root: str, prefix: str | None = None) -> None: ...
    def add_mime_headers(self, headers: Headers, path: str, url: str) -> None: ...
    def add_cache_headers(self, headers: Headers, path: str, url: str) -> None: ...
