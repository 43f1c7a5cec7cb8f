"""The command line's options: what the command accepts, and what each means.

``parse(argv)``, which ``cli.main`` calls with the argv it was given, is
argparse's parse with the checks argparse cannot state: options that do not go
together are refused (argparse's usage line and exit 2), and the defaults that
depend on other options are filled in. Numbers are ASCII digits only.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Sequence
from typing import Final

from ratings_api import lock
from ratings_api.build import Reading
from ratings_api.lock import DEFAULT_TIMEOUT, Waiting
from ratings_api.publish import DEFAULT_MAX_REMOVALS, DEFAULT_WORKERS
from ratings_api.rules import INT_TEXT

HELP_WIDTH: Final = 80  # fixed, so that --help reads the same everywhere (and in docs/cli.md)
DEFAULT_OUTPUT: Final = "site"
# Uploads in flight, at most: 256 at S3's usual 30 ms is 8,500 requests a second, past
# what S3 takes under one prefix (3,500 PUT/s); each is a connection, a file descriptor
# (1,024 by default on Linux), and more ask the store to refuse them.
MAX_WORKERS: Final = 256
DIGITS: Final = re.compile(r"[0-9]+")  # ASCII only: str.isdigit and int() take "²" and "٣"
# Options that only mean something to a publish: without --publish they would do
# nothing, silently (a user could believe a bucket was repaired).
PUBLISHING_ONLY: Final = (
    "repair",
    "max_removals",
    "publish_workers",
    "lock_timeout",
    "single_publisher",
)


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """The options of ``argv`` (default: sys.argv), checked and settled."""
    command = parser()
    args = command.parse_args(argv)
    args.reading = Reading(args.format, args.scale)
    settle(command, args)
    return args


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
    serving("--port", default=8000, type=_count, help="the port to serve at (default: 8000)")


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
        type=_workers,
        metavar="N",
        help=f"uploads at once, 1 to {MAX_WORKERS} (default: {DEFAULT_WORKERS})",
    )
    _add_locking(command)


def _add_locking(command: argparse.ArgumentParser) -> None:
    add = command.add_argument_group("one publish at a time").add_argument
    timeout = (
        f"wait up to SECONDS for another publish's lock, at least its lease ({lock.LEASE:g}; "
        f"default: {DEFAULT_TIMEOUT})"
    )
    add("--lock-timeout", type=_count, metavar="SECONDS", help=timeout)
    add(
        "--single-publisher",
        action="store_true",
        help="take no lock, nor check that the store honours conditional writes: only "
        "if one publish ever runs at a time",
    )


def _count(text: str) -> int:
    if not DIGITS.fullmatch(text):
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


def settle(command: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse options that do not go together (argparse's exit 2); fill in the defaults."""
    if args.publish is None:
        for name in PUBLISHING_ONLY:
            value = getattr(args, name)
            if value is not None and value is not False:  # 0 is a value given
                command.error(f"--{name.replace('_', '-')} goes only with --publish")
    if args.serve:
        if args.check:
            command.error("--check and --serve do not go together")
        if args.publish:
            command.error("--publish and --serve do not go together")
        if args.input == "-":
            command.error("--serve watches a file: it cannot serve standard input (--input -)")
    # Publishing alone builds no folder: a CI runner's fresh checkout need not write (and
    # fsync) a file per article that nothing reads; the publish renders from the input.
    if args.output is None and not args.publish:
        args.output = DEFAULT_OUTPUT
    if args.max_removals is None:
        args.max_removals = DEFAULT_MAX_REMOVALS
    if args.publish_workers is None:
        args.publish_workers = DEFAULT_WORKERS
    # How to take the lock; None: take none.
    timeout = DEFAULT_TIMEOUT if args.lock_timeout is None else args.lock_timeout
    if timeout < lock.LEASE:  # a dead holder's lock goes stale only after its lease
        command.error(f"--lock-timeout must be at least the lock's lease, {lock.LEASE:g} s")
    args.waiting = None if args.single_publisher else Waiting(timeout)
