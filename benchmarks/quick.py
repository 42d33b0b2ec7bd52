"""The ``--quick`` flag every benchmark takes: its smallest sizes, a smoke run of every code path.

The slow suite runs each benchmark once with ``--quick`` (``tests/integration/test_benchmarks.py``),
so that a module moved in the package cannot break one unnoticed. The full sizes stay the defaults.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence

SMOKE_LINE = "smoke run (--quick): the smallest sizes, every code path once; the figures below mean nothing"


def parse_arguments(parser: argparse.ArgumentParser, quick: Mapping[str, object],
                    argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The benchmark's arguments; with ``--quick``, its smoke sizes and a line saying so.

    Args:
        parser: the benchmark's parser (``--quick`` is added here).
        quick: the smoke run's defaults by destination (``{"rows": 1_000}``); options given on the
            command line still win.
        argv: the arguments (default: the command line's).

    Raises:
        ValueError: ``quick`` names a destination the parser does not have.
    """
    parser.add_argument("--quick", action="store_true",
                        help="the smallest sizes at which every code path runs, for a smoke run")
    arguments = parser.parse_args(argv)
    unknown = sorted(set(quick) - set(vars(arguments)))
    if unknown:
        raise ValueError(f"quick sizes for unknown options {unknown}: name them by their destination")
    if arguments.quick:
        parser.set_defaults(**quick)
        arguments = parser.parse_args(argv)
        print(SMOKE_LINE, flush=True)
    return arguments
