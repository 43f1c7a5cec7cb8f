"""Running the command's work: the one place where Ctrl-C or SIGTERM becomes a stop.

A build runs under ``stoppable()``: the signal raises ``Interrupted`` wherever
the main thread is. A publish runs its coroutine with ``run_stoppable``: the
signal cancels it, a request in flight included (a thread would wait for its
answer, up to the timeout, when the store stalls), and ``Interrupted`` is raised
once the loop has ended. Either way ``cli.main`` reports it. While a publish
runs, a store that stalls is said, not waited on in silence (``stalls``).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any, Final, TypeVar

T = TypeVar("T")

STOP_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM)
STALL: Final = 10  # seconds without an answer between two lines saying so
TICK: Final = 1.0  # seconds between two looks at the requests answered
LET_GO: Final = 0.1  # seconds for obstore's threads to hand back their last answers


class Interrupted(BaseException):
    """Ctrl-C or SIGTERM: a BaseException, so that no ``except Exception`` swallows it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextmanager
def stoppable() -> Iterator[None]:
    """Ctrl-C and SIGTERM raise Interrupted at once, until the block ends."""
    main = threading.current_thread() is threading.main_thread()  # only it may set handlers
    previous = {number: signal.signal(number, _interrupt) for number in STOP_SIGNALS if main}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise Interrupted(signum)


def run_stoppable(work: Coroutine[Any, Any, T], watch: Coroutine[Any, Any, None]) -> T:
    """Run ``work`` on an asyncio loop, ``watch`` beside it; Ctrl-C or SIGTERM cancel it at
    once, then raise Interrupted.

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
        if caught:  # whatever the cancelled work ended with
            raise Interrupted(caught[0])


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
