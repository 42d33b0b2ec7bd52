"""The ``streambed`` command line: debugging captures, refreshing once, inspecting cuts.

Each subcommand lives in one ``_add_<name>_command`` function that registers its parser and
handler; handlers return the process exit code.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence

Handler = Callable[[argparse.Namespace], int]


def build_parser() -> argparse.ArgumentParser:
    """The ``streambed`` argument parser with every subcommand."""
    parser = argparse.ArgumentParser(prog="streambed", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="log at DEBUG level")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for add_command in _COMMANDS:
        add_command(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, format="%(levelname)s %(message)s")
    handler: Handler = args.handler
    return handler(args)


def _add_cuts_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``streambed cuts list|show|verify``: inspect a group's published cuts."""
    from airflow_provider_streambed import cli_cuts

    parser = subparsers.add_parser("cuts", help="list, show or verify a group's published cuts")
    cli_cuts.add_arguments(parser)
    parser.set_defaults(handler=cli_cuts.run)


def _add_capture_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``streambed capture``: run a group's capture step once (debugging)."""
    from airflow_provider_streambed import cli_capture

    parser = subparsers.add_parser("capture", help="capture a group's changes up to a new W, for debugging")
    cli_capture.add_arguments(parser)
    parser.set_defaults(handler=cli_capture.run)


def _add_refresh_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``streambed refresh``: capture, refresh and publish one cut of a group in this process."""
    from airflow_provider_streambed import cli_refresh

    parser = subparsers.add_parser("refresh", help="run one refresh of a group without Airflow")
    cli_refresh.add_arguments(parser)
    parser.set_defaults(handler=cli_refresh.run)


_COMMANDS: list[Callable[[argparse._SubParsersAction[argparse.ArgumentParser]], None]] = []
_COMMANDS.append(_add_cuts_command)
_COMMANDS.append(_add_capture_command)
_COMMANDS.append(_add_refresh_command)

if __name__ == "__main__":
    sys.exit(main())
