"""The ``streambed`` command line: debugging captures, refreshing once, inspecting cuts and runs.

Each subcommand is a module ``cli_<name>`` with ``add_arguments(parser)`` and ``run(args) -> int``
(the exit code); :data:`COMMANDS` lists them.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.exceptions import DeclarationError

Handler = Callable[[argparse.Namespace], int]

#: Subcommand name -> its one-line help; the implementation is ``airflow_provider_streambed.cli_<name>``.
COMMANDS = {
    "cuts": "list, show or verify a group's published cuts",
    "capture": "capture a group's changes up to a new W, for debugging",
    "refresh": "run one refresh (capture, refresh, publish) of a group without Airflow",
    "runs": "list a group's runs, or supersede an unpublished run that blocks the group",
}


def build_parser() -> argparse.ArgumentParser:
    """The ``streambed`` argument parser with every subcommand."""
    parser = argparse.ArgumentParser(prog="streambed", description="Debug captures, refresh once, inspect cuts.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at DEBUG level")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for name, help_text in COMMANDS.items():
        module = importlib.import_module(f"airflow_provider_streambed.cli_{name}")
        command = subparsers.add_parser(name, help=help_text)
        module.add_arguments(command)
        command.set_defaults(handler=module.run)
    return parser


def load_group(reference: str) -> RefreshGroup:
    """The ``RefreshGroup`` named by ``path/to/file.py:variable`` or ``package.module:variable``.

    Raises:
        DeclarationError: the reference is malformed, cannot be imported or is not a ``RefreshGroup``.
    """
    location, _, variable = reference.rpartition(":")
    if not location or not variable:
        raise DeclarationError(f"group reference {reference!r}: use path/to/file.py:variable or module:variable")
    try:
        if location.endswith(".py"):
            spec = importlib.util.spec_from_file_location(Path(location).stem, location)
            if spec is None or spec.loader is None:
                raise ImportError(f"cannot load {location}")
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        else:
            module = importlib.import_module(location)
    except (ImportError, OSError) as error:
        raise DeclarationError(f"group reference {reference!r} cannot be loaded: {error}") from error
    group = getattr(module, variable, None)
    if not isinstance(group, RefreshGroup):
        raise DeclarationError(f"group reference {reference!r}: {variable!r} is not a RefreshGroup")
    return group


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, format="%(levelname)s %(message)s")
    handler: Handler = args.handler
    return handler(args)


if __name__ == "__main__":
    sys.exit(main())
