"""``streambed refresh``: one run of a declared group in this process (``refresh_once``).

Prints what the run did: the cut it published, or that the source is unchanged since the last cut.
"""

from __future__ import annotations

import argparse
import json
import logging

from airflow_provider_streambed.cli import (
    add_catalog_arguments,
    add_copy_parallelism_argument,
    add_group_argument,
    add_source_dsn_argument,
    add_watermark_argument,
    load_group,
    source_dsn,
)
from airflow_provider_streambed.exceptions import StreambedError

logger = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``streambed refresh``."""
    add_group_argument(parser)
    add_catalog_arguments(parser)
    add_source_dsn_argument(parser)
    parser.add_argument("--run-key", default=None, help="retry this run (default: a new run)")
    parser.add_argument("--master", default="local[2]", help="Spark master for spark-submit (default local[2])")
    parser.add_argument("--spark-remote", default=None, metavar="sc://HOST:PORT",
                        help="run the refresh on this Spark Connect server instead of spark-submit")
    add_watermark_argument(parser)
    parser.add_argument("--supersede-pending", action="store_true", help="abandon another unpublished run")
    add_copy_parallelism_argument(parser)
    parser.add_argument("--json", action="store_true", help="print the cut as JSON")
    parser.set_defaults(resync=False, members=[])


def run(args: argparse.Namespace) -> int:
    """Handle ``streambed refresh`` (and ``streambed resync``); returns the exit code."""
    from airflow_provider_streambed.local import refresh_once

    if (dsn := source_dsn(args)) is None:
        return 2
    try:
        group = load_group(args.group)
        result = refresh_once(
            group,
            source_dsn=dsn,
            catalog_properties={"uri": args.catalog_uri, "warehouse": args.warehouse},
            run_key=args.run_key,
            master=args.master,
            spark_remote=args.spark_remote,
            explicit_watermark=args.watermark,
            supersede_pending_runs=args.supersede_pending,
            copy_parallelism=args.copy_parallelism,
            resync=args.resync and not args.members,
            resync_members=args.members,
        )
    except StreambedError as error:
        print(f"error: {error}")
        return 1
    cut = result.cut
    facts = {"group": cut.group, "outcome": str(result.outcome), "cut_id": cut.cut_id,
             "watermark": str(cut.watermark), "run_key": result.run_key, "checked_at": result.checked_at.isoformat(),
             "members": sorted(cut.members)}
    print(json.dumps(facts, indent=1) if args.json else result.message())
    return 0
