"""The command line: its options, its exit codes, every line a build or a publish prints.

``main`` is the only reader of argv and the only printer; it runs ``build``,
``server.serve`` or ``publish`` with plain values and turns their InputError
into one line and exit 2, Ctrl-C or SIGTERM into one line and 128 + the signal.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from types import FrameType
from typing import Final

from ratings_api import loader
from ratings_api.build import Reading, Result, build, count_articles, render_site
from ratings_api.errors import InputError
from ratings_api.lock import DEFAULT_TIMEOUT, Waiting
from ratings_api.publish import (
    DEFAULT_MAX_REMOVALS,
    DEFAULT_WORKERS,
    Outcome,
    first_changes,
    publish,
    site_of,
    summary,
)
from ratings_api.s3 import Destination, parse_destination, require_client

HELP_WIDTH: Final = 80  # fixed, so that --help reads the same everywhere (and in docs/cli.md)
STOP_SIGNALS: Final = (signal.SIGINT, signal.SIGTERM)
DEFAULT_OUTPUT: Final = "site"
# Options that only mean something to a publish: without --publish they would do
# nothing, silently (a user could believe a bucket was repaired).
PUBLISHING_ONLY: Final = (
    "repair",
    "max_removals",
    "publish_workers",
    "lock_timeout",
    "force_unlock",
    "single_publisher",
)


class Interrupted(BaseException):
    """Ctrl-C or SIGTERM: a BaseException, so that no ``except Exception`` swallows it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def parser() -> argparse.ArgumentParser:
    command = argparse.ArgumentParser(
        prog="generate.py",
        description="Build the static JSON rating API from a ratings file.",
        formatter_class=lambda prog: argparse.HelpFormatter(prog, width=HELP_WIDTH),
    )
    command.add_argument(
        "--version", action=_Version, nargs=0, help="print the installed version and exit"
    )
    _add_building(command)
    _add_serving(command)
    _add_publishing(command)
    return command


class _Version(argparse.Action):
    """--version, read from the installed package's metadata only when asked for:
    importlib.metadata costs a build's start-up more than the whole parse of a small file."""

    def __call__(self, command: argparse.ArgumentParser, *_: object) -> None:
        from importlib import metadata

        try:
            version = metadata.version("ratings-api")
        except metadata.PackageNotFoundError:  # generate.py in a checkout, not installed
            version = "(not installed: a checkout)"
        print(f"ratings-api {version}")  # on stdout, as argparse's own version action
        command.exit()


def _add_building(command: argparse.ArgumentParser) -> None:
    add = command.add_argument
    add(
        "--input",
        default="ratings.yaml",
        metavar="FILE",
        help="the ratings to read, YAML or CSV; - reads standard input (default: ratings.yaml)",
    )
    add("--format", choices=("yaml", "csv"), help="the input's format (default: csv for *.csv)")
    add(
        "--scale",
        type=_scale,
        metavar="LOW..HIGH",
        help="a CSV input's lowest and highest rating, such as 1..5 (a YAML input sets "
        "scale in the file)",
    )
    add(
        "--output",
        metavar="DIR",
        help=f"the folder to build the site in (default: {DEFAULT_OUTPUT}; with "
        "--publish, none unless this option is given)",
    )
    add(
        "--base-url",
        metavar="URL",
        help="the absolute URL the site is served at; overrides BASE_URL, "
        "base_url in the input and Netlify's URL",
    )
    add(
        "--check",
        action="store_true",
        help="write nothing; exit 1 if the output is not what a build would make",
    )
    add(
        "--quiet",
        action="store_true",
        help="print nothing but errors: no progress, no summary (with --serve: "
        "no request log either, only the address)",
    )


def _add_serving(command: argparse.ArgumentParser) -> None:
    serving = command.add_argument_group("serving").add_argument
    serving(
        "--serve",
        action="store_true",
        help="build, then serve the output folder and rebuild when the input changes",
    )
    serving("--host", default="127.0.0.1", help="the address to serve at (default: 127.0.0.1)")
    serving("--port", default=8000, type=int, help="the port to serve at (default: 8000)")


def _add_publishing(command: argparse.ArgumentParser) -> None:
    add = command.add_argument_group("publishing to object storage").add_argument
    add(
        "--publish",
        metavar="S3_URL",
        help="make s3://BUCKET[/PREFIX] hold exactly the site, rendered from the "
        "input: no folder is written unless --output is given (endpoint and "
        "credentials from the standard AWS variables and files); with --check, "
        "change nothing and exit 1 if the bucket differs",
    )
    add(
        "--max-removals",
        type=_count,
        metavar="N",
        help=f"stop before changing anything if a publish would remove more than N "
        f"files (default: {DEFAULT_MAX_REMOVALS})",
    )
    add(
        "--repair",
        action="store_true",
        help="list the bucket and compare every file, instead of trusting the state "
        "the last publish left: for a bucket changed by hand",
    )
    add(
        "--publish-workers",
        type=_positive,
        metavar="N",
        help=f"uploads at once (default: {DEFAULT_WORKERS})",
    )
    _add_locking(command)


def _add_locking(command: argparse.ArgumentParser) -> None:
    add = command.add_argument_group("one publish at a time").add_argument
    timeout = f"wait up to SECONDS for another publish's lock (default: {DEFAULT_TIMEOUT})"
    add("--lock-timeout", type=_count, metavar="SECONDS", help=timeout)
    add(
        "--force-unlock",
        action="store_true",
        help="take over a held lock at once, instead of waiting",
    )
    add(
        "--single-publisher",
        action="store_true",
        help="take no lock, nor check that the store honours conditional writes: only "
        "if one publish ever runs at a time",
    )


def _count(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a whole number, found '{text}'")
    return int(text)


def _scale(text: str) -> tuple[int, int]:
    low, _, high = text.partition("..")
    plain = loader.INT_TEXT.fullmatch(low) and loader.INT_TEXT.fullmatch(high)
    if not plain or int(low) >= int(high):
        raise argparse.ArgumentTypeError(
            f"expected LOW..HIGH, integers, low < high, found '{text}'"
        )
    return int(low), int(high)


def _positive(text: str) -> int:
    number = _count(text)
    if number == 0:
        raise argparse.ArgumentTypeError(f"expected a whole number, 1 or more, found '{text}'")
    return number


def main(argv: Sequence[str] | None = None) -> int:
    command = parser()
    args = command.parse_args(argv)
    args.reading = Reading(args.format, args.scale)
    _settle_publishing_options(command, args)
    if not args.serve:
        return _build_and_publish(args)
    if args.check:
        command.error("--check and --serve do not go together")
    if args.publish:
        command.error("--publish and --serve do not go together")
    if args.input == "-":
        command.error("--serve watches a file: it cannot serve standard input (--input -)")
    from ratings_api.devserver import serve  # WhiteNoise is only needed to serve

    return serve(
        args.input,
        args.output or DEFAULT_OUTPUT,
        base_url=args.base_url,
        host=args.host,
        port=args.port,
        quiet=args.quiet,
        reading=args.reading,
    )


def _build_and_publish(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    show_progress = not args.quiet and sys.stderr.isatty()
    output = _output(args)
    try:
        target = _publish_target(args.publish)
        with _interruptible():
            if output is None:  # publishing alone: nothing to write, no folder to lock
                result = render_site(
                    args.input,
                    base_url=args.base_url,
                    environ=os.environ,
                    reading=args.reading,
                )
            else:
                result = _build(args, output, target, show_progress)
    except InputError as error:
        _say(error)
        return 2
    except Interrupted as stop:
        _say(_interrupted(output, args.input, stop.signum, args.check))
        return 128 + stop.signum
    finally:
        if show_progress:
            _say("\r\x1b[K", end="")  # leave a clean line
    seconds = time.perf_counter() - started
    if output is not None and args.check:  # without a folder, the publish's line says it all
        built = _report_check(output, result, args.quiet or target is not None)
        if built != 0 or target is None:
            return built
    elif output is not None and not args.quiet:
        print(result.summary(output, seconds))
    return 0 if target is None else _publish(args, target, result, show_progress)


def _settle_publishing_options(command: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse a publishing option without --publish (argparse's exit 2); fill in defaults."""
    if args.publish is None:
        for name in PUBLISHING_ONLY:
            value = getattr(args, name)
            if value is not None and value is not False:  # 0 is a value given
                command.error(f"--{name.replace('_', '-')} goes only with --publish")
    if args.max_removals is None:
        args.max_removals = DEFAULT_MAX_REMOVALS
    if args.publish_workers is None:
        args.publish_workers = DEFAULT_WORKERS
    # How to take the lock; None: take none.
    timeout = DEFAULT_TIMEOUT if args.lock_timeout is None else args.lock_timeout
    args.waiting = None if args.single_publisher else Waiting(timeout, args.force_unlock)


def _output(args: argparse.Namespace) -> str | None:
    """The folder to build: the one given; else none when publishing, ``site`` otherwise.

    A publish renders what it uploads from the input, so a CI runner's fresh
    checkout need not write (and fsync) a file per article that nothing reads.
    """
    if args.output is not None:
        return str(args.output)
    return None if args.publish else DEFAULT_OUTPUT


def _build(
    args: argparse.Namespace, output: str, target: Destination | None, progress: bool
) -> Result:
    return build(
        args.input,
        output,
        base_url=args.base_url,
        environ=os.environ,
        dry_run=args.check,
        progress=_show_progress if progress else None,
        # Not when publishing to object storage: no static host's limit applies.
        host_notice=_say if target is None else None,
        waiting=None if args.quiet else _waiting(output),
        reading=args.reading,
    )


def _publish_target(url: str | None) -> Destination | None:
    """The --publish target, checked (with its library) before anything is built."""
    if url is None:
        return None
    target = parse_destination(url)
    require_client()
    return target


def _publish(
    args: argparse.Namespace, target: Destination, result: Result, show_progress: bool
) -> int:
    started = time.perf_counter()
    try:
        with _interruptible():
            outcome = publish(
                site_of(result),
                target,
                check=args.check,
                repair=args.repair,
                max_removals=args.max_removals,
                workers=args.publish_workers,
                progress=_show_publishing if show_progress else None,
                say=None if args.quiet else _notice if show_progress else _say,
                waiting=args.waiting,
            )
    except InputError as error:
        _say(error)
        return 2
    except Interrupted as stop:
        # The state marked every file to touch before the first upload: the next publish
        # finds them, whatever this one had done.
        name = signal.Signals(stop.signum).name
        _say(
            f"{target}: publish interrupted by {name}; each object is whole, old or new: "
            "publish again to finish"
        )
        return 128 + stop.signum
    finally:
        if show_progress:
            _say("\r\x1b[K", end="")
    seconds = time.perf_counter() - started
    line = summary(target, outcome, seconds, args.check)
    if args.check:
        return _report_publish_check(line, outcome, args.quiet)
    if not args.quiet:
        print(line)
    return 0  # another publish meanwhile made it plan again, not fail (Outcome.plans)


def _report_publish_check(line: str, outcome: Outcome, quiet: bool) -> int:
    if not outcome.plan.changes:
        if not quiet:
            print(line)
        return 0
    _say(line + _listed(first_changes(outcome.plan), outcome.plan.changes))
    return 1


def _notice(line: str) -> None:
    _say("\r\x1b[K" + line)  # over the progress line, which the next report redraws


def _show_publishing(stage: str, done: int, total: int) -> None:
    _say(f"\r{stage}: {done:,} of {total:,}", end="")


@contextmanager
def _interruptible() -> Iterator[None]:
    """Ctrl-C and SIGTERM stop the build at once, as an Interrupted the caller reports."""
    if threading.current_thread() is not threading.main_thread():
        yield  # only the main thread may set handlers
        return
    previous = {number: signal.signal(number, _interrupt) for number in STOP_SIGNALS}
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    del frame
    raise Interrupted(signum)


def _interrupted(output: str | None, source: str, signum: int, check: bool) -> str:
    name = signal.Signals(signum).name
    if output is None:
        return f"{source}: interrupted by {name} before publishing; nothing was changed"
    if check:
        return f"{output}: --check interrupted by {name}"
    return (
        f"{output}: build interrupted by {name}; each file is whole, old or new: "
        "build again to finish"
    )


def _waiting(output: str) -> Callable[[int | None], None]:
    def say(pid: int | None) -> None:
        other = "another build" if pid is None else f"the build in process {pid}"
        _say(f"{output}: waiting for {other} to finish")

    return say


def _show_progress(done: int, total: int) -> None:
    percent = 100 * done // total if total else 100
    _say(f"\rwriting: {done:,} of {total:,} articles ({percent}%)", end="")


def _report_check(output: str, result: Result, quiet: bool) -> int:
    changes = result.changes
    if not changes.written and not changes.removed:
        if not quiet:
            print(f"{output} is up to date: {count_articles(result.articles)}")
        return 0
    listed = _listed(changes.examples, changes.written + changes.removed)
    _say(
        f"{output} is out of date: {changes.written} to write, {changes.removed} to remove:{listed}"
    )
    return 1


def _listed(examples: Sequence[str], total: int) -> str:
    """The examples, one an indented line, and how many more there are."""
    more = f"\n  and {total - len(examples)} more" if total > len(examples) else ""
    return "".join(f"\n  {example}" for example in examples) + more


def _say(text: object, end: str = "\n") -> None:
    """A line on stderr (or, with ``end=""``, a progress report), shown at once."""
    print(text, end=end, file=sys.stderr, flush=True)
