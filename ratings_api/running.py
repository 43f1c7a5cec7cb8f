"""Running a publish's coroutine: Ctrl-C and SIGTERM stop it at once, and a stalled
store is said, not waited on in silence."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import time
from collections.abc import Callable, Coroutine
from typing import Any, Final, TypeVar

T = TypeVar("T")

STOP_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM)
STALL: Final = 10  # seconds without an answer between two lines saying so
TICK: Final = 1.0  # seconds between two looks at the requests answered
LET_GO: Final = 0.1  # seconds for obstore's threads to hand back their last answers


async def stalls(count: Callable[[], int], line: str, say: Callable[[str], None]) -> None:
    """Say ``line`` each STALL s in which no request was answered (none started since)."""
    seen, since, said = count(), time.monotonic(), 0
    while True:
        await asyncio.sleep(TICK)
        now = time.monotonic()
        if count() != seen:
            seen, since, said = count(), now, 0
        elif now - since >= (said + 1) * STALL:
            said += 1
            say(line.format(said * STALL))


def run_stoppable(work: Coroutine[Any, Any, T], watch: Coroutine[Any, Any, None]) -> T:
    """Run ``work`` on an asyncio loop, ``watch`` beside it; Ctrl-C or SIGTERM cancel it at once.

    A thread would wait for its request, up to the timeout, when the store
    stalls. Once cancelled, the signal goes on to the handler that was there
    before, as if it came now.

    obstore's threads hand each answer (a cancellation too) back to Python
    holding the GIL, and the interpreter must not end before they let go of it
    (a known race of pyo3-async-runtimes: it aborts the process): hence a pause.
    """
    caught: list[int] = []
    previous = {number: signal.getsignal(number) for number in STOP_SIGNALS}

    async def main() -> T:
        task = asyncio.ensure_future(work)
        for number in STOP_SIGNALS:
            # Not in a thread other than the main one, nor on Windows.
            with contextlib.suppress(ValueError, RuntimeError, NotImplementedError):
                asyncio.get_running_loop().add_signal_handler(number, stop, task, number)
        watching = asyncio.ensure_future(watch)
        try:
            return await task
        finally:
            watching.cancel()

    def stop(task: asyncio.Future[T], number: int) -> None:
        caught.append(number)
        task.cancel()

    try:
        return asyncio.run(main())
    finally:
        for number, handler in previous.items():
            if handler is not None:
                signal.signal(number, handler)  # asyncio puts back the default, not this
        time.sleep(LET_GO)
        for stopped in caught[:1]:
            signal.raise_signal(stopped)  # to the handler that was there before, as if now
