"""The command line: ``python generate.py [options]``."""

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

from ratings_api.build import Result, build, count_articles, render_site
from ratings_api.errors import InputError
from ratings_api.platforms import unsupported
from ratings_api.publish import (
    DEFAULT_MAX_REMOVALS,
    DEFAULT_WORKERS,
    Outcome,
    listed_changes,
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
PUBLISHING_ONLY: Final = ("repair", "max_removals", "publish_workers")


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
        "--input",
        default="ratings.yaml",
        metavar="FILE",
        help="the ratings to read (default: ratings.yaml)",
    )
    command.add_argument(
        "--output",
        metavar="DIR",
        help=f"the folder to build the site in (default: {DEFAULT_OUTPUT}; with "
        "--publish, none unless this option is given)",
    )
    command.add_argument(
        "--base-url",
        metavar="URL",
        help="the absolute URL the site is served at; overrides BASE_URL, "
        "base_url in the input and Netlify's URL",
    )
    command.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 if the output is not what a build would make",
    )
    command.add_argument(
        "--jobs",
        type=_positive,
        metavar="N",
        help="write with at most N processes (default: the CPUs this process may use)",
    )
    command.add_argument(
        "--quiet",
        action="store_true",
        help="print nothing but errors: no progress, no summary (with --serve: "
        "no request log either, only the address)",
    )
    serving = command.add_argument_group("serving")
    serving.add_argument(
        "--serve",
        action="store_true",
        help="build, then serve the output folder and rebuild when the input changes",
    )
    serving.add_argument(
        "--host",
        default="127.0.0.1",
        help="the address to serve at (default: 127.0.0.1)",
    )
    serving.add_argument(
        "--port",
        default=8000,
        type=int,
        help="the port to serve at (default: 8000)",
    )
    publishing = command.add_argument_group("publishing to object storage")
    publishing.add_argument(
        "--publish",
        metavar="S3_URL",
        help="make s3://BUCKET[/PREFIX] hold exactly the site, rendered from the "
        "input: no folder is written unless --output is given (endpoint and "
        "credentials from the standard AWS variables and files); with --check, "
        "change nothing and exit 1 if the bucket differs",
    )
    publishing.add_argument(
        "--max-removals",
        type=_count,
        metavar="N",
        help=f"stop before changing anything if a publish would remove more than N "
        f"files (default: {DEFAULT_MAX_REMOVALS})",
    )
    publishing.add_argument(
        "--repair",
        action="store_true",
        help="list the bucket and compare every file, instead of trusting the state "
        "the last publish left: for a bucket changed by hand",
    )
    publishing.add_argument(
        "--publish-workers",
        type=_positive,
        metavar="N",
        help=f"uploads at once (default: {DEFAULT_WORKERS})",
    )
    return command


def _count(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a whole number, found '{text}'")
    return int(text)


def _positive(text: str) -> int:
    number = _count(text)
    if number == 0:
        raise argparse.ArgumentTypeError(f"expected a whole number, 1 or more, found '{text}'")
    return number


def main(argv: Sequence[str] | None = None) -> int:
    command = parser()
    args = command.parse_args(argv)
    _settle_publishing_options(command, args)
    problem = unsupported()
    if problem is not None:  # before anything is read or written
        print(problem, file=sys.stderr)
        return 2
    if args.serve:
        if args.check:
            command.error("--check and --serve do not go together")
        if args.publish:
            command.error("--publish and --serve do not go together")
        from ratings_api.server import serve  # WhiteNoise is only needed to serve

        return serve(
            args.input,
            args.output or DEFAULT_OUTPUT,
            base_url=args.base_url,
            host=args.host,
            port=args.port,
            quiet=args.quiet,
        )
    started = time.perf_counter()
    show_progress = not args.quiet and sys.stderr.isatty()
    output = _output(args)
    try:
        target = _publish_target(args.publish)
        with _interruptible():
            if output is None:  # publishing alone: nothing to write, no folder to lock
                result = render_site(args.input, base_url=args.base_url, environ=os.environ)
            else:
                result = _build(args, output, target, show_progress)
    except InputError as error:
        print(error, file=sys.stderr)
        return 2
    except Interrupted as stop:
        print(_interrupted(output, args.input, stop.signum, args.check), file=sys.stderr)
        return 128 + stop.signum
    finally:
        if show_progress:
            print("\r\x1b[K", end="", file=sys.stderr, flush=True)  # leave a clean line
    seconds = time.perf_counter() - started
    if output is not None and args.check:  # without a folder, the publish's line says it all
        built = _report_check(output, result, args.quiet or target is not None)
        if built != 0 or target is None:
            return built
    elif output is not None and not args.quiet:
        print(result.summary(output, seconds))
    if target is None:
        return 0
    return _publish(args, target, result, show_progress)


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
        host_notice=_print_notice if target is None else None,
        jobs=args.jobs,
        waiting=None if args.quiet else _waiting(output),
    )


def _print_notice(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


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
            )
    except InputError as error:
        print(error, file=sys.stderr)
        return 2
    except Interrupted as stop:
        # The state marked every file to touch before the first upload: the next publish
        # finds them, whatever this one had done.
        name = signal.Signals(stop.signum).name
        print(
            f"{target}: publish interrupted by {name}; each object is whole, old or new: "
            "publish again to finish",
            file=sys.stderr,
        )
        return 128 + stop.signum
    finally:
        if show_progress:
            print("\r\x1b[K", end="", file=sys.stderr, flush=True)
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
    print(line + listed_changes(outcome.plan), file=sys.stderr)
    return 1


def _show_publishing(stage: str, done: int, total: int) -> None:
    print(f"\r{stage}: {done:,} of {total:,}", end="", file=sys.stderr, flush=True)


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
        print(f"{output}: waiting for {other} to finish", file=sys.stderr, flush=True)

    return say


def _show_progress(done: int, total: int) -> None:
    percent = 100 * done // total if total else 100
    print(
        f"\rwriting: {done:,} of {total:,} articles ({percent}%)",
        end="",
        file=sys.stderr,
        flush=True,
    )


def _report_check(output: str, result: Result, quiet: bool) -> int:
    changes = result.changes
    if not changes.written and not changes.removed:
        if not quiet:
            print(f"{output} is up to date: {count_articles(result.articles)}")
        return 0
    listed = "".join(f"\n  {path}" for path in changes.examples)
    more = changes.written + changes.removed - len(changes.examples)
    etc = f"\n  and {more} more" if more > 0 else ""
    print(
        f"{output} is out of date: {changes.written} to write, "
        f"{changes.removed} to remove:{listed}{etc}",
        file=sys.stderr,
    )
    return 1
