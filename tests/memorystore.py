"""The in-memory store of ratings_api/store.py's Protocol, and what one publish sees of it.

``Memory`` is the bucket: each object's bytes, ETag (its MD5, as S3 gives a plain
upload) and headers. ``Seen`` is one publish's view: its requests counted and
logged, ``before`` awaited before each, where a test runs another publish whole,
fails the request, or ends the publish as a kill would.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ratings_api.store import Got, Refused

if TYPE_CHECKING:
    from obstore import PutMode

Before = Callable[[int, str, str], Awaitable[None]]  # request number, method, path


@dataclass
class Memory:
    """The bucket: path -> (bytes, ETag, headers)."""

    objects: dict[str, tuple[bytes, str, dict[str, str]]] = field(default_factory=dict)

    def put(self, path: str, body: bytes, attributes: Mapping[str, str] | None = None) -> str:
        version = f'"{hashlib.md5(body).hexdigest()}"'
        self.objects[path] = (body, version, dict(attributes or {}))
        return version

    def contents(self) -> dict[str, bytes]:
        return {path: body for path, (body, _, _) in sorted(self.objects.items())}


class Seen:
    """``memory`` as one publish sees it, through the Store Protocol."""

    def __init__(self, memory: Memory, before: Before | None = None) -> None:
        self.memory, self.before = memory, before
        self.log: list[tuple[str, str]] = []  # each request's method and path
        self.requests = 0

    async def _request(self, method: str, path: str) -> None:
        self.log.append((method, path))
        self.requests += 1
        if self.before is not None:
            await self.before(len(self.log), method, path)

    async def get(self, path: str, *, unless: str | None = None) -> Got | None:
        await self._request("GET", path)
        found = self.memory.objects.get(path)
        if found is None:
            return None
        return Got(b"" if found[1] == unless else found[0], found[1])

    async def head(self, path: str) -> Mapping[str, str] | None:
        await self._request("HEAD", path)
        found = self.memory.objects.get(path)
        return None if found is None else found[2]

    async def put(
        self, path: str, body: bytes, attributes: Mapping[str, str], *, mode: PutMode = "overwrite"
    ) -> str:
        await self._request("PUT", path)
        found = self.memory.objects.get(path)
        version = (found or (b"", ""))[1]
        if (mode == "create" and found) or (isinstance(mode, dict) and version != mode["e_tag"]):
            raise Refused(path)
        return self.memory.put(path, body, attributes)

    async def delete(self, paths: list[str]) -> None:
        await self._request("DELETE", paths[0])
        for path in paths:
            self.memory.objects.pop(path, None)

    async def listing(self) -> dict[str, str]:
        await self._request("LIST", "")
        return {path: version.strip('"') for path, (_, version, _) in self.memory.objects.items()}

    async def bucket_exists(self) -> bool:
        await self._request("LIST", "")
        return True
