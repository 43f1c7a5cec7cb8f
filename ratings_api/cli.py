"""The command line: what it accepts, its exit codes, and every line a build or a publish prints.

``main`` takes argv, parses it (``parse``: argparse's parse with the checks argparse
cannot state: options that do not go together are refused with argparse's usage
line and exit 2, and the defaults that depend on other options are filled in;
numbers are ASCII digits only), runs ``build``, ``devserver.serve`` or ``publish``
with plain values, and picks the exit code: 0 done, or current; 1 only "differs"
(``--check``); 2 the user's mistake or the store's refusal (an InputError, one
line); 128 + the signal for Ctrl-C or SIGTERM; 3 a bug, anything else, a library's
panic included: one line saying so, then the traceback.
"""

from __future__ import annotations

import argparse
import functools
import os
import signal
import sys
import time
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Final

from ratings_api import lock, publish
from ratings_api.build import Reading, Result, build, count_articles
from ratings_api.errors import InputError
from ratings_api.rules import INT_TEXT
from ratings_api.running import Interrupted, stoppable
from ratings_api.s3 import Destination, parse_destination, require_client

BUG: Final = (
    "ratings-api stopped on a bug, not a mistake of yours: please report it with the "
    "traceback below"
)
HELP_WIDTH: Final = 80  # fixed, so that --help reads the same everywhere (and in docs/cli.md)
DEFAULT_OUTPUT: Final = "site"
# Uploads in flight, at most: 256 at S3's usual 30 ms is 8,500 requests a second, past
# what S3 takes under one prefix (3,500 PUT/s); each is a connection, a file descriptor
# (1,024 by default on Linux), and more ask the store to refuse them.
MAX_WORKERS: Final = 256
# Options that only mean something to a publish, and their defaults: without --publish
# they would do nothing, silently (a user could believe a bucket was repaired).
PUBLISHING_ONLY: Final = {
    "repair": False,
    "max_removals": publish.DEFAULT_MAX_REMOVALS,
    "publish_workers": publish.DEFAULT_WORKERS,
    "lock_timeout": lock.DEFAULT_TIMEOUT,
    "single_publisher": False,
}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command of ``argv`` (default: sys.argv); its exit code."""
    try:
        args = parse(argv)
        if not args.serve:
            return _build_and_publish(args)
        from ratings_api.devserver import serve  # WhiteNoise is only needed to serve

        serve(
            args.input,
            args.output,
            base_url=args.base_url,
            host=args.host,
            port=args.port,
            quiet=args.quiet,
            reading=args.reading,
        )
        return 0
    except InputError as error:
        _say(error)
        return 2
    except Interrupted as stop:  # said where it stopped (_stage)
        return 128 + stop.signum
    except (SystemExit, KeyboardInterrupt):  # argparse's exit 2; Ctrl-C before the work
        raise
    except BaseException:  # noqa: BLE001  (a bug: pyo3's PanicException is a BaseException)
        _say(BUG)
        traceback.print_exc()
        return 3


def _build_and_publish(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    output = args.output
    with _stage(args):
        # The --publish target, checked (with its library) before anything is built.
        target = None if args.publish is None else parse_destination(args.publish)
        if target is not None:
            require_client()
        result = build(
            args.input,
            output,  # None when publishing alone: nothing to write, no folder to lock
            base_url=args.base_url,
            environ=os.environ,
            dry_run=args.check,
            progress=_show_progress if args.progress else None,
            # Not when publishing to object storage: no static host's limit applies.
            host_notice=_say if target is None else None,
            waiting=None if args.quiet else functools.partial(_waiting, output),
            reading=args.reading,
        )
    if output is not None and args.check:  # without a folder, the publish's line says it all
        changes = result.changes
        differs = changes.written + changes.removed
        line = (
            f"{output} is out of date: {changes.written} to write, {changes.removed} to remove:"
            if differs
            else f"{output} is up to date: {count_articles(result.articles)}"
        )
        built = _report(line, changes.examples, differs, args.quiet or target is not None)
        if built != 0 or target is None:
            return built
    elif output is not None and not args.quiet:
        print(result.summary(output, time.perf_counter() - started))
    return 0 if target is None else _publish(args, target, result)


def _publish(args: argparse.Namespace, target: Destination, result: Result) -> int:
    started = time.perf_counter()
    with _stage(args, target):
        outcome = publish.publish(
            publish.site_of(result),
            target,
            check=args.check,
            repair=args.repair,
            max_removals=args.max_removals,
            workers=args.publish_workers,
            progress=_show_publishing if args.progress else None,
            say=None if args.quiet else _notice if args.progress else _say,
            lock_timeout=None if args.single_publisher else args.lock_timeout,
        )
    line = publish.summary(target, outcome, time.perf_counter() - started, args.check)
    if args.check:
        return _report(line, publish.first_changes(outcome.plan), outcome.plan.changes, args.quiet)
    if not args.quiet:
        print(line)
    return 0  # another publish meanwhile made it plan again, not fail (Outcome.plans)


@contextmanager
def _stage(args: argparse.Namespace, target: Destination | None = None) -> Iterator[None]:
    """A build, or the publish to ``target``: Ctrl-C or SIGTERM stop it, said in one line
    (main picks the exit code); its progress line is cleared after, however it ends."""
    try:
        with stoppable():
            yield
    except Interrupted as stop:
        (_notice if args.progress else _say)(_interrupted(args, stop.signum, target))
        raise
    finally:
        if args.progress:
            _say("\r\x1b[K", end="")  # leave a clean line


def _notice(line: str) -> None:
    _say("\r\x1b[K" + line)  # over the progress line, which the next report (if any) redraws


def _show_publishing(stage: str, done: int, total: int) -> None:
    _say(f"\r{stage}: {done:,} of {total:,}", end="")


def _interrupted(args: argparse.Namespace, signum: int, target: Destination | None = None) -> str:
    """The line of a stop by ``signum``: of the publish to ``target``, or of the build."""
    name = signal.Signals(signum).name
    if target is not None:
        # The state marked every file to touch before the first upload: the next publish
        # finds them, whatever this one had done.
        return (
            f"{target}: publish interrupted by {name}; each object is whole, old or new: "
            "publish again to finish"
        )
    if args.output is None:
        return f"{args.input}: interrupted by {name} before publishing; nothing was changed"
    if args.check:
        return f"{args.output}: --check interrupted by {name}"
    return (
        f"{args.output}: build interrupted by {name}; each file is whole, old or new: "
        "build again to finish"
    )


def _waiting(output: str, pid: int | None) -> None:
    other = "another build" if pid is None else f"the build in process {pid}"
    _say(f"{output}: waiting for {other} to finish")


def _show_progress(done: int, total: int) -> None:
    percent = 100 * done // total if total else 100
    _say(f"\rwriting: {done:,} of {total:,} articles ({percent}%)", end="")


def _report(line: str, examples: Sequence[str], differs: int, quiet: bool) -> int:
    """A --check's exit code and its line: on stdout if nothing ``differs`` (none if
    ``quiet``), else on stderr, with the examples, and how many more there are."""
    if not differs:
        if not quiet:
            print(line)
        return 0
    more = f"\n  and {differs - len(examples)} more" if differs > len(examples) else ""
    _say(line + "".join(f"\n  {example}" for example in examples) + more)
    return 1


def _say(text: object, end: str = "\n") -> None:
    """A line on stderr (or, with ``end=""``, a progress report), shown at once."""
    print(text, end=end, file=sys.stderr, flush=True)


# The options


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """The options of ``argv`` (default: sys.argv), checked and settled: options that do
    not go together are refused (argparse's exit 2), the defaults filled in."""
    command = parser()
    args = command.parse_args(argv)
    args.reading = Reading(args.format, args.scale)
    args.progress = not args.quiet and sys.stderr.isatty()  # drawn on a terminal only
    for name, default in PUBLISHING_ONLY.items():  # None: not given
        if getattr(args, name) is None:
            setattr(args, name, default)
        elif args.publish is None:
            command.error(f"--{name.replace('_', '-')} goes only with --publish")
    if args.serve:
        for other in ("check", "publish"):
            if getattr(args, other):
                command.error(f"--{other} and --serve do not go together")
        if args.input == "-":
            command.error("--serve watches a file: it cannot serve standard input (--input -)")
    # Publishing alone builds no folder: a CI runner's fresh checkout need not write (and
    # fsync) a file per article that nothing reads; the publish renders from the input.
    if args.output is None and not args.publish:
        args.output = DEFAULT_OUTPUT
    if args.lock_timeout < lock.LEASE:  # a dead holder's lock goes stale only after its lease
        command.error(f"--lock-timeout must be at least the lock's lease, {lock.LEASE:g} s")
    return args


def parser() -> argparse.ArgumentParser:
    command = argparse.ArgumentParser(
        prog="generate.py",
        description="Build the static JSON rating API from a ratings file.",
        formatter_class=lambda prog: argparse.HelpFormatter(prog, width=HELP_WIDTH),
    )
    add = command.add_argument
    add("--version", action=_Version, nargs=0, help="print the installed version and exit")
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
    add = command.add_argument_group("serving").add_argument
    add(
        "--serve",
        action="store_true",
        help="build, then serve the output folder and rebuild when the input changes",
    )
    add("--host", default="127.0.0.1", help="the address to serve at (default: 127.0.0.1)")
    add("--port", default=8000, type=_count, help="the port to serve at (default: 8000)")
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
        f"files (default: {publish.DEFAULT_MAX_REMOVALS})",
    )
    add(
        "--repair",
        action="store_true",
        default=None,
        help="list the bucket and compare every file, instead of trusting the state "
        "the last publish left: for a bucket changed by hand",
    )
    add(
        "--publish-workers",
        type=_workers,
        metavar="N",
        help=f"uploads at once, 1 to {MAX_WORKERS} (default: {publish.DEFAULT_WORKERS})",
    )
    add = command.add_argument_group("one publish at a time").add_argument
    timeout = (
        f"wait up to SECONDS for another publish's lock, at least its lease ({lock.LEASE:g}; "
        f"default: {lock.DEFAULT_TIMEOUT})"
    )
    add("--lock-timeout", type=_count, metavar="SECONDS", help=timeout)
    add(
        "--single-publisher",
        action="store_true",
        default=None,
        help="take no lock, nor check that the store honours conditional writes: only "
        "if one publish ever runs at a time",
    )
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


def _count(text: str) -> int:
    if not (text.isascii() and text.isdigit()):  # alone, isdigit and int() take "²" and "٣"
        raise argparse.ArgumentTypeError(f"expected a whole number, found '{text}'")
    return int(text)


def _scale(text: str) -> tuple[int, int]:
    low, _, high = text.partition("..")
    plain = INT_TEXT.fullmatch(low) and INT_TEXT.fullmatch(high)
    if not plain or int(low) >= int(high):
        raise argparse.ArgumentTypeError(
            f"expected LOW..HIGH, integers, low < high, found '{text}'"
        )
    return int(low), int(high)


def _workers(text: str) -> int:
    number = _count(text)
    if not 1 <= number <= MAX_WORKERS:
        raise argparse.ArgumentTypeError(
            f"expected a whole number from 1 to {MAX_WORKERS}, found '{text}'"
        )
    return number
