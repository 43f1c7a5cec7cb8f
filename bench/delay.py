"""A TCP proxy on 127.0.0.1 that holds every byte back: a store as far away as a real one.

    python bench/delay.py LISTEN_PORT UPSTREAM_PORT ROUND_TRIP_MS

Each chunk read from either side is written to the other ``ROUND_TRIP_MS / 2``
later, in order, without holding back the chunks behind it (as ``tc netem
delay`` does on a link): a request and its answer take one round trip more,
however many are in flight. Loopback only; no root, no network namespace.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Final

HOST: Final = "127.0.0.1"


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float) -> None:
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

    async def deliver() -> None:
        while True:
            due, chunk = await queue.get()
            if not chunk:
                break
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(chunk)
            await writer.drain()
        writer.close()

    sender = asyncio.create_task(deliver())
    try:
        while chunk := await reader.read(65536):
            queue.put_nowait((loop.time() + delay, chunk))
    except ConnectionError:
        pass
    queue.put_nowait((loop.time() + delay, b""))
    try:
        await sender
    except ConnectionError:
        pass


async def _serve(listen: int, upstream: int, delay: float) -> None:
    async def connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        far_reader, far_writer = await asyncio.open_connection(HOST, upstream)
        await asyncio.gather(_pump(reader, far_writer, delay), _pump(far_reader, writer, delay))

    server = await asyncio.start_server(connect, HOST, listen, backlog=1024)
    async with server:
        await server.serve_forever()


def main() -> int:
    listen, upstream, round_trip_ms = (int(value) for value in sys.argv[1:4])
    try:
        asyncio.run(_serve(listen, upstream, round_trip_ms / 2000))
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
