"""The ``streambed`` command line: debugging captures, refreshing once, inspecting cuts and runs.

Each subcommand is a module of this package with ``add_arguments(parser)`` and
``run(args) -> int`` (the exit code); :data:`COMMANDS` lists them. Every subcommand about a
group (:data:`GROUP_COMMANDS`: all but ``spark-connect``, which manages a local server) takes the
group as ``--group`` (a declaration ``path/to/file.py:variable`` or ``package.module:variable``;
where only the name matters, the plain group name too), the catalog as ``--catalog-uri`` and
``--warehouse``, and reads the source DSN from an environment variable (``STREAMBED_SOURCE_DSN``
unless ``--source-dsn-env`` names another), never from the command line, where other users of
the machine could read it.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import logging
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from airflow_provider_streambed.capture.bootstrap import DEFAULT_COPY_PARALLELISM
from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.exceptions import DeclarationError
from airflow_provider_streambed.lsn import Lsn

Handler = Callable[[argparse.Namespace], int]

#: Subcommand name -> its one-line help; the implementation is ``airflow_provider_streambed.cli.<name>``
#: (``-`` read as ``_``).
COMMANDS = {
    "cuts": "list, show, verify, pin or unpin a group's published cuts, or expire them under its retention",
    "capture": "capture a group's changes up to a new W, for debugging",
    "refresh": "run one refresh (capture, refresh, publish) of a group without Airflow",
    "resync": "re-synchronise a group whose slot was lost: copy every table again into a new cut",
    "runs": "list a group's runs, or supersede an unpublished run that blocks the group",
    "spark-connect": "start, stop or check a local Spark Connect server (for --spark-remote)",
}
#: The subcommands about a group: they take ``--group`` and the catalog arguments.
GROUP_COMMANDS = tuple(name for name in COMMANDS if name != "spark-connect")


def build_parser() -> argparse.ArgumentParser:
    """The ``streambed`` argument parser with every subcommand."""
    parser = argparse.ArgumentParser(prog="streambed", description="Debug captures, refresh once, inspect cuts.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log at DEBUG level")
    subparsers = parser.add_subparsers(dest="command", required=True)
    for name, help_text in COMMANDS.items():
        module = importlib.import_module(f"airflow_provider_streambed.cli.{name.replace('-', '_')}")
        command = subparsers.add_parser(name, help=help_text)
        module.add_arguments(command)
        command.set_defaults(handler=module.run)
    return parser


#: The environment variable the source DSN is read from, unless ``--source-dsn-env`` names another.
DSN_VARIABLE = "STREAMBED_SOURCE_DSN"


def add_group_argument(parser: argparse.ArgumentParser, *, name_will_do: bool = False, required: bool = True) -> None:
    """``--group``: a declaration reference (and, with ``name_will_do``, a plain group name)."""
    what = "the declaration, path/to/file.py:variable or package.module:variable"
    parser.add_argument("--group", required=required, help=what + (", or the group's name" if name_will_do else ""))


def group_name(reference: str) -> str:
    """The group name of ``--group``: a plain name as it is, a declaration reference loaded."""
    return load_group(reference).name if ":" in reference else reference


def add_catalog_arguments(parser: argparse.ArgumentParser, *, warehouse_required: bool = True) -> None:
    """``--catalog-uri`` and ``--warehouse``."""
    parser.add_argument("--catalog-uri", required=warehouse_required, default=None,
                        help="SQLAlchemy URI of the catalog database (the ledger lives there too)")
    parser.add_argument("--warehouse", required=warehouse_required, default=None,
                        help="warehouse URI, e.g. file:///data/warehouse")


def add_source_dsn_argument(parser: argparse.ArgumentParser) -> None:
    """``--source-dsn-env``: the environment variable holding the source DSN."""
    parser.add_argument("--source-dsn-env", default=DSN_VARIABLE,
                        help=f"environment variable holding the source DSN (default {DSN_VARIABLE})")


def add_copy_parallelism_argument(parser: argparse.ArgumentParser) -> None:
    """``--copy-parallelism``: connections a bootstrap copy uses."""
    def positive(text: str) -> int:
        if not text.isdigit() or int(text) < 1:
            raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, not {text!r}")
        return int(text)

    parser.add_argument("--copy-parallelism", type=positive, default=DEFAULT_COPY_PARALLELISM, metavar="N",
                        help="connections a bootstrap copy uses; large tables are split into ranges "
                             f"(default {DEFAULT_COPY_PARALLELISM})")


def add_watermark_argument(parser: argparse.ArgumentParser) -> None:
    """``--watermark``: an explicit W; text that is not an LSN is a usage error naming it."""
    def lsn(text: str) -> Lsn:
        try:
            return Lsn.parse(text)
        except ValueError as error:
            raise argparse.ArgumentTypeError(str(error)) from error

    parser.add_argument("--watermark", type=lsn, default=None, metavar="W",
                        help="pin this W explicitly, e.g. 0/16B3748")


def source_dsn(args: argparse.Namespace) -> str | None:
    """The source DSN from the environment variable ``--source-dsn-env`` names.

    ``None`` when it is unset, after printing which variable to set (the caller exits with 2).
    """
    dsn = os.environ.get(args.source_dsn_env) or None
    if dsn is None:
        print(f"error: set the source DSN in the environment variable {args.source_dsn_env}")
    return dsn


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
    except SyntaxError as error:
        raise DeclarationError(f"group reference {reference!r} cannot be loaded: {error.msg} "
                               f"({error.filename}, line {error.lineno})") from error
    except DeclarationError:
        raise  # names the group and member at fault
    except Exception as error:  # the file's own code failed: say where, not a traceback
        raise DeclarationError(f"group reference {reference!r} cannot be loaded: {type(error).__name__}: {error}") \
            from error
    group = getattr(module, variable, None)
    if not isinstance(group, RefreshGroup):
        raise DeclarationError(f"group reference {reference!r}: {variable!r} is not a RefreshGroup")
    return group


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra and (not isinstance(getattr(args, "target", None), list) or any(word.startswith("-") for word in extra)):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if extra:  # positionals after the options (``cuts diff --group G A B``), which argparse leaves over
        args.target += extra
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, format="%(levelname)s %(message)s")
    handler: Handler = args.handler
    return handler(args)


if __name__ == "__main__":
    sys.exit(main())
