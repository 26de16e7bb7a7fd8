"""What the operator's commands (``berth-operator``, ``berth-demo``) share as command-line programs.

``--version`` from the installed distribution; help that shows every flag's default (but not a meaningless
"None"/"False"); and a closed pipe (``berth-operator --help | head``) ending the program quietly with status 141,
as a shell reports a command killed by SIGPIPE, instead of a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from importlib import metadata

EXIT_CLOSED_PIPE = 141  # 128 + SIGPIPE


def version() -> str:
    try:
        return metadata.version("berth")
    except metadata.PackageNotFoundError:  # a source tree that was never installed
        return "unknown"


class HelpFormatter(argparse.HelpFormatter):
    """Adds "(default: X)" to a flag's help when it has a real default and the help does not say it already."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (
            "%(default)" in text
            or "default" in text
            or default in (None, False, argparse.SUPPRESS)
            or not action.option_strings
            or isinstance(action, argparse._VersionAction)
        ):
            return text
        shown = ",".join(default) if isinstance(default, list | tuple) else default
        if isinstance(default, list | tuple) and not default:
            return text
        return f"{text} (default: {shown})" if text else f"default: {shown}"


def add_version(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--version", action="version", version=f"{parser.prog} {version()}")


def quiet_on_closed_pipe(main: Callable[[], int]) -> int:
    """Run ``main``; a reader that went away (``| head``) ends the program quietly instead of with a traceback."""
    try:
        code = main()
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        # Python flushes stdout again at exit: point it at /dev/null so that flush cannot fail too.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_CLOSED_PIPE
