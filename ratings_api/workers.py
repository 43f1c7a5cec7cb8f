"""How many writer processes a build may use, and running them.

Writing a document is a few short system calls and a little Python between
them. Threads that each make such a call then need the GIL back contend for
it: on a 2-core machine two threads wrote a tree 2.4 times *slower* than one,
while two forked processes wrote it about twice as fast (issue 11). So the
build forks: the children share the catalogue's columns in memory mapped
before the fork (``record.shared_columns``), take batches of
articles from a pipe (a read of 4 bytes from a pipe is atomic, so no two take
the same batch), write their numbers for the record into shared memory made
before the fork, and send back one small message when done. A child that
fails sends its error; one that dies is noticed by the end of its pipe.
"""

from __future__ import annotations

import math
import os
import pickle
import select
import signal
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Final, NoReturn

from ratings_api.errors import InputError

TOKEN: Final = 4  # bytes a batch number takes in the pipe
# Batch numbers a pipe holds without a reader: all are written before the first
# reader is forked, so more would block that write for ever. 16 KiB is what a
# macOS pipe holds before it grows (a Linux one holds 64 KiB); at 256 articles a
# batch it still covers a million articles.
PIPE_TOKENS: Final = 4096
CGROUP: Final = "/sys/fs/cgroup"


def available_cpus() -> int:
    """The CPUs this process may use, lowered to its cgroup's CPU quota if one is set.

    A quota of 1.5 CPUs counts as 2: the work is short system calls, which
    fill the fraction.
    """
    cpus = process_cpus()
    quota = cgroup_cpus()
    return max(1, min(cpus, quota if quota is not None else cpus))


def process_cpus() -> int:
    """The CPUs this process may run on, as far as the system tells."""
    # sched_getaffinity is Linux's only: macOS's Python has none, and a build that
    # called it there died. os.process_cpu_count (Python 3.13) reads the affinity
    # where the system has one; before 3.13 and outside Linux, cpu_count (every
    # CPU of the machine) is all there is.
    counted = getattr(os, "process_cpu_count", None)
    if counted is not None:
        return max(1, counted() or 1)
    affinity = getattr(os, "sched_getaffinity", None)
    if affinity is not None:
        return max(1, len(affinity(0)))
    return max(1, os.cpu_count() or 1)


def cgroup_cpus(proc_cgroup: str = "/proc/self/cgroup", root: str = CGROUP) -> int | None:
    """The CPU quota of this process's cgroup and its ancestors (v2 cpu.max, v1 cfs_quota)."""
    try:
        with open(proc_cgroup) as file:
            lines = file.read().splitlines()
    except OSError:
        return None
    quotas: list[int] = []
    for line in lines:
        fields = line.split(":", 2)
        if len(fields) != 3:  # not a cgroup line: another kernel's /proc, read as no quota
            continue
        _, controllers, path = fields
        if controllers == "":
            quotas += _quotas(os.path.join(root, path.lstrip("/")), root, _v2_quota)
        elif "cpu" in controllers.split(","):
            base = os.path.join(root, controllers)
            if not os.path.isdir(base):
                base = os.path.join(root, "cpu")
            quotas += _quotas(os.path.join(base, path.lstrip("/")), base, _v1_quota)
    return min(quotas) if quotas else None


def _quotas(folder: str, top: str, read: Callable[[str], int | None]) -> Iterator[int]:
    """The quota set at ``folder`` and each of its parents up to ``top``."""
    folder = os.path.normpath(folder)
    top = os.path.normpath(top)
    while True:
        quota = read(folder)
        if quota is not None:
            yield quota
        if folder == top or not folder.startswith(top):
            return
        folder = os.path.dirname(folder)


def _v2_quota(folder: str) -> int | None:
    fields = _read(os.path.join(folder, "cpu.max")).split()
    if len(fields) != 2 or not (fields[0].isdigit() and fields[1].isdigit()):
        return None  # "max", or not what cgroup v2 writes
    return math.ceil(int(fields[0]) / int(fields[1]))


def _v1_quota(folder: str) -> int | None:
    quota = _read(os.path.join(folder, "cpu.cfs_quota_us")).strip()
    period = _read(os.path.join(folder, "cpu.cfs_period_us")).strip()
    if not quota.isdigit() or not period.isdigit() or int(quota) <= 0:
        return None  # -1 is no quota
    return math.ceil(int(quota) / int(period))


def _read(path: str) -> str:
    try:
        with open(path) as file:
            return file.read()
    except (OSError, ValueError):
        return ""


# --- the processes ---------------------------------------------------------

Work = Callable[[int, Callable[[], int | None]], object]
# A child's work: its number, and a function that hands out the next batch
# (None when none is left); what it returns is sent to the parent, pickled.


def run_processes(
    workers: int,
    batches: int,
    work: Work,
    tick: Callable[[], None],
    every: float,
    name: str,
) -> list[object]:
    """Run ``work`` in ``workers`` forked children over ``batches``; their results, in order.

    ``tick`` is called in this process about every ``every`` seconds. An
    InputError in a child is raised here with its message; a child that dies
    is an InputError naming ``name``. Whatever happens, no child outlives
    this call: the others are killed (each document is renamed into place
    whole, so killing a writer never leaves a half-written one).
    """
    tokens_read, tokens_write = os.pipe()
    try:
        numbers = b"".join(n.to_bytes(TOKEN, "little") for n in range(batches))
        view = memoryview(numbers)
        while view:  # the pipe holds them all: PIPE_TOKENS at most
            view = view[os.write(tokens_write, view) :]
    finally:
        os.close(tokens_write)  # so that an empty pipe reads as the end
    children: dict[int, tuple[int, int]] = {}  # result pipe -> process id, number
    try:
        for number in range(workers):
            read_fd, write_fd = os.pipe()
            # Held across the fork: a Ctrl-C now reaches neither a child that still
            # has the parent's handler nor a parent that has not yet noted the child.
            with _signals_held() as mask:
                pid = os.fork()
                if pid == 0:
                    for fd in (read_fd, *children):
                        os.close(fd)
                    _child(number, tokens_read, write_fd, work, mask)
                children[read_fd] = (pid, number)
            os.close(write_fd)
        os.close(tokens_read)
        tokens_read = -1
        return _collect(children, tick, every, name)
    finally:
        if tokens_read >= 0:
            os.close(tokens_read)
        _stop(children)


def _child(
    number: int, tokens: int, result_fd: int, work: Work, mask: set[int | signal.Signals]
) -> NoReturn:
    """A writer process: never returns, never raises into the parent's frames."""
    code = 1
    message = b""
    try:
        # Ctrl-C reaches the whole process group: a writer just stops, the parent speaks.
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        parent = os.getppid()

        def next_batch() -> int | None:
            if os.getppid() != parent:
                os._exit(1)  # the parent was killed: stop writing at once
            token = os.read(tokens, TOKEN)
            return int.from_bytes(token, "little") if token else None

        message = pickle.dumps(("done", work(number, next_batch)))
        code = 0
    except InputError as error:
        message = pickle.dumps(("error", str(error)))
    except BaseException:  # noqa: BLE001 - a bug: sent to the parent, which raises it
        message = pickle.dumps(("bug", traceback.format_exc()))
    finally:
        try:
            view = memoryview(message)
            while view:
                view = view[os.write(result_fd, view) :]
        finally:
            os._exit(code)


def _collect(
    children: dict[int, tuple[int, int]], tick: Callable[[], None], every: float, name: str
) -> list[object]:
    results: list[object] = [None] * len(children)
    received = {fd: bytearray() for fd in children}
    while children:
        ready, _, _ = select.select(list(children), [], [], every)
        for fd in ready:
            data = os.read(fd, 65536)
            if data:
                received[fd] += data
                continue
            pid, number = children.pop(fd)
            os.close(fd)
            _, status = os.waitpid(pid, 0)
            results[number] = _result(bytes(received.pop(fd)), status, name)
        tick()
    return results


def _result(message: bytes, status: int, name: str) -> object:
    if not message:
        raise InputError(f"{name}: a writer process {_death(status)}; build again to finish")
    kind, value = pickle.loads(message)
    if kind == "error":
        raise InputError(value)
    if kind == "bug":
        raise RuntimeError(f"a writer process failed:\n{value}")
    return value


def _death(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"was killed by {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exited with {os.waitstatus_to_exitcode(status)} without a word"


def _stop(children: dict[int, tuple[int, int]]) -> None:
    """Kill and reap the children still running; a second Ctrl-C waits until they are gone."""
    if not children:
        return
    with _signals_held():
        for fd, (pid, _) in children.items():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            os.waitpid(pid, 0)
            os.close(fd)
        children.clear()


@contextmanager
def _signals_held() -> Iterator[set[int | signal.Signals]]:
    """SIGINT and SIGTERM wait while inside; the signal mask as it was before."""
    held = {signal.SIGINT, signal.SIGTERM}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield previous
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
