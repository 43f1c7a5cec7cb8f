"""The requests a publish makes to a bucket: one Protocol, and one adapter over obstore.

publish.py and lock.py make every request through a ``Store``; the adapter counts
each (not the library's retries) and turns obstore's answers into the Protocol's.
A refused conditional write is ``Refused`` whatever status the store chose (412,
409, or 404 to an If-Match on no object): the caller reads the object back and
decides by what it holds, never by the error's class. The tests hand publishes an
in-memory store of the same Protocol (tests/memorystore.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, NamedTuple, Protocol

if TYPE_CHECKING:
    from obstore import PutMode
    from obstore.store import ObjectStore

PAGE: Final = 1000  # objects a listing or a removal request takes at most


class Refused(Exception):  # noqa: N818  (an answer, not a failure)
    """The store refused a conditional write: the object is not (or is) there as asked."""


class Got(NamedTuple):
    """An object read: its bytes and version (ETag)."""

    data: bytes
    version: str


class Store(Protocol):
    """The requests publishing makes (the adapter counts them in ``requests``)."""

    async def get(self, path: str, *, unless: str | None = None) -> Got | None:
        """The object at ``path``, None if there is none; if it still has the version
        ``unless`` (If-None-Match), ``Got(b"", unless)``."""

    async def head(self, path: str) -> Mapping[str, str] | None:
        """The headers (Content-Type, Cache-Control) of the object, None if there is none."""

    async def put(
        self, path: str, body: bytes, attributes: Mapping[str, str], *, mode: PutMode = "overwrite"
    ) -> str:
        """Write ``body`` as obstore's ``mode`` asks (``"create"``: if there is none;
        ``{"e_tag": version}``: if it is still that version): its version; else ``Refused``."""

    async def delete(self, paths: list[str]) -> None:
        """Remove ``paths``, PAGE at a time (the library's delete takes no condition)."""

    async def listing(self) -> dict[str, str]:
        """Every object: its path and its ETag without quotes (a plain upload's MD5)."""

    async def bucket_exists(self) -> bool:
        """Whether the bucket is there: a listing of at most one object."""


@dataclass
class ObjectStoreAdapter:
    """A ``Store`` over an obstore store; its other errors reach s3.explain as they are."""

    store: ObjectStore
    requests: int = 0

    async def get(self, path: str, *, unless: str | None = None) -> Got | None:
        import obstore
        from obstore.exceptions import NotModifiedError

        self.requests += 1
        try:
            options = {"if_none_match": unless} if unless is not None else {}
            answer = await obstore.get_async(self.store, path, options=options)  # type: ignore[arg-type]
            return Got(bytes(await answer.bytes_async()), str(answer.meta["e_tag"]))
        except FileNotFoundError:
            return None
        except NotModifiedError:  # asked only with ``unless``
            return Got(b"", str(unless))

    async def head(self, path: str) -> Mapping[str, str] | None:
        import obstore

        self.requests += 1
        try:
            answer = await obstore.get_async(self.store, path, options={"head": True})
        except FileNotFoundError:
            return None
        return {key: str(value) for key, value in answer.attributes.items()}

    async def put(
        self, path: str, body: bytes, attributes: Mapping[str, str], *, mode: PutMode = "overwrite"
    ) -> str:
        import obstore
        from obstore.exceptions import AlreadyExistsError, PreconditionError

        self.requests += 1
        try:
            answer = await obstore.put_async(
                self.store, path, body, attributes=dict(attributes), mode=mode, use_multipart=False
            )
        except (FileNotFoundError, AlreadyExistsError, PreconditionError):
            if mode == "overwrite":
                raise  # a 404 to a plain write: no bucket
            raise Refused(path) from None  # 404 to a condition: no object, or no bucket
        return str(answer["e_tag"])

    async def delete(self, paths: list[str]) -> None:
        import obstore

        self.requests += (len(paths) + PAGE - 1) // PAGE  # obstore sends PAGE a request
        await obstore.delete_async(self.store, paths)

    async def listing(self) -> dict[str, str]:
        import obstore

        found: dict[str, str] = {}
        async for chunk in obstore.list(self.store, chunk_size=PAGE):
            self.requests += 1
            found.update((item["path"], (item["e_tag"] or "").strip('"')) for item in chunk)
        self.requests += 0 if found else 1
        return found

    async def bucket_exists(self) -> bool:
        import obstore
        from obstore.exceptions import GenericError

        self.requests += 1
        # Asked only after a GET answered 404: the store answers, so a listing it
        # refuses (SeaweedFS: 404; moto: a GenericError of its NoSuchBucket) has no bucket.
        try:
            await anext(obstore.list(self.store, chunk_size=1), None)
        except (FileNotFoundError, GenericError):
            return False
        return True
