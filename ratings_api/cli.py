"""The command line: its exit codes, and every line a build or a publish prints.

``main`` takes argv (its options are ratings_api/options.py's, which parses
it), runs ``build``, ``devserver.serve`` or ``publish`` with plain values, and
picks the exit code: 0 done, or current; 1 only "differs" (``--check``); 2 the
user's mistake or the store's refusal (an InputError, one line); 128 + the
signal for Ctrl-C or SIGTERM; 3 a bug, anything else, a library's panic
included: one line saying so, then the traceback.
"""

from __future__ import annotations

import argparse
import functools
import os
import signal
import sys
import time
import traceback
from collections.abc import Sequence
from typing import Final

from ratings_api.build import Result, build, count_articles, render_site
from ratings_api.errors import InputError
from ratings_api.options import parse
from ratings_api.publish import first_changes, publish, site_of, summary
from ratings_api.running import Interrupted, stoppable
from ratings_api.s3 import Destination, parse_destination, require_client

BUG: Final = (
    "ratings-api stopped on a bug, not a mistake of yours: please report it with the "
    "traceback below"
)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command of ``argv`` (default: sys.argv); its exit code."""
    try:
        args = parse(argv)
        if not args.serve:
            return _build_and_publish(args)
        from ratings_api.devserver import serve  # WhiteNoise is only needed to serve

        return serve(
            args.input,
            args.output,
            base_url=args.base_url,
            host=args.host,
            port=args.port,
            quiet=args.quiet,
            reading=args.reading,
        )
    except InputError as error:
        _say(error)
        return 2
    except (SystemExit, KeyboardInterrupt):  # argparse's exit 2; Ctrl-C before the work
        raise
    except BaseException:  # noqa: BLE001  (a bug: pyo3's PanicException is a BaseException)
        _say(BUG)
        traceback.print_exc()
        return 3


def _build_and_publish(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    show_progress = not args.quiet and sys.stderr.isatty()
    output = args.output
    try:
        # The --publish target, checked (with its library) before anything is built.
        target = None if args.publish is None else parse_destination(args.publish)
        if target is not None:
            require_client()
        with stoppable():
            if output is None:  # publishing alone: nothing to write, no folder to lock
                result = render_site(
                    args.input, base_url=args.base_url, environ=os.environ, reading=args.reading
                )
            else:
                result = build(
                    args.input,
                    output,
                    base_url=args.base_url,
                    environ=os.environ,
                    dry_run=args.check,
                    progress=_show_progress if show_progress else None,
                    # Not when publishing to object storage: no static host's limit applies.
                    host_notice=_say if target is None else None,
                    waiting=None if args.quiet else functools.partial(_waiting, output),
                    reading=args.reading,
                )
    except Interrupted as stop:
        _say(_interrupted(output, args.input, stop.signum, args.check))
        return 128 + stop.signum
    finally:
        if show_progress:
            _say("\r\x1b[K", end="")  # leave a clean line
    seconds = time.perf_counter() - started
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
        print(result.summary(output, seconds))
    return 0 if target is None else _publish(args, target, result, show_progress)


def _publish(
    args: argparse.Namespace, target: Destination, result: Result, show_progress: bool
) -> int:
    started = time.perf_counter()
    try:
        with stoppable():
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
        return _report(line, first_changes(outcome.plan), outcome.plan.changes, args.quiet)
    if not args.quiet:
        print(line)
    return 0  # another publish meanwhile made it plan again, not fail (Outcome.plans)


def _notice(line: str) -> None:
    _say("\r\x1b[K" + line)  # over the progress line, which the next report redraws


def _show_publishing(stage: str, done: int, total: int) -> None:
    _say(f"\r{stage}: {done:,} of {total:,}", end="")


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
