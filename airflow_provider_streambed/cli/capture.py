"""``streambed capture``: run the capture step of a group once, for debugging.

Pins a new W (or ``--watermark``), stages the changes under the run's staging root in
``--warehouse`` and prints the run's summary as JSON. The ledger is the catalog database of
``--catalog-uri``; without one, an SQLite file in a local warehouse directory.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
from pathlib import Path

import psycopg

from airflow_provider_streambed.capture.bootstrap import CopyOptions
from airflow_provider_streambed.capture.run import capture_run
from airflow_provider_streambed.capture.run_records import CaptureSettings
from airflow_provider_streambed.capture.waits import DEFAULT_TIMEOUT_SECONDS
from airflow_provider_streambed.cli import (
    add_catalog_arguments,
    add_copy_parallelism_argument,
    add_group_argument,
    add_source_dsn_argument,
    add_watermark_argument,
    load_group,
    source_dsn,
)
from airflow_provider_streambed.exceptions import DeclarationError, StreambedError
from airflow_provider_streambed.ledger import Ledger
from airflow_provider_streambed.ledger.runs import UnchangedRun
from airflow_provider_streambed.run_key import make_run_key

logger = logging.getLogger(__name__)

LEDGER_FILE = "streambed-ledger.db"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the ``capture`` arguments."""
    add_group_argument(parser)
    add_catalog_arguments(parser, warehouse_required=False)
    add_source_dsn_argument(parser)
    parser.add_argument("--run-key", default=None, help="run key (default: a new one per call)")
    add_watermark_argument(parser)
    add_copy_parallelism_argument(parser)
    parser.add_argument("--slot-create-timeout", type=positive_seconds, default=DEFAULT_TIMEOUT_SECONDS,
                        metavar="SECONDS", help="how long creating the slot and the publication may wait for other "
                        f"sessions' transactions and locks (default {DEFAULT_TIMEOUT_SECONDS:g})")


def positive_seconds(text: str) -> float:
    """A number of seconds greater than 0 (``argparse`` type)."""
    try:
        seconds = float(text)
    except ValueError:
        seconds = 0.0
    if not seconds > 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds greater than 0, not {text!r}")
    return seconds


def ledger_uri(args: argparse.Namespace) -> str:
    """``--catalog-uri``, else an SQLite ledger in the local ``--warehouse`` directory (created).

    Raises:
        DeclarationError: no warehouse, or a remote one without ``--catalog-uri``.
    """
    if args.warehouse is None:
        raise DeclarationError("pass --warehouse, where the run's changes are staged")
    if args.catalog_uri:
        return str(args.catalog_uri)
    if "://" in args.warehouse and not args.warehouse.startswith("file://"):
        raise DeclarationError("--catalog-uri is required when --warehouse is not a local directory")
    local = Path(args.warehouse.removeprefix("file://")).resolve()
    local.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{local / LEDGER_FILE}"


def run(args: argparse.Namespace) -> int:
    """Capture once and print the run's summary as JSON; returns the exit code."""
    if (dsn := source_dsn(args)) is None:
        return 2
    try:
        group = load_group(args.group)
        ledger = Ledger(ledger_uri(args))
        warehouse = args.warehouse if "://" in args.warehouse else Path(args.warehouse).resolve().as_uri()
        run_key = args.run_key or make_run_key("cli", os.urandom(6).hex())
        with psycopg.connect(dsn, autocommit=True) as conn:
            settings = CaptureSettings(explicit_watermark=args.watermark, copy=CopyOptions(args.copy_parallelism),
                                       slot_create_timeout_seconds=args.slot_create_timeout)
            result = capture_run(conn, group, ledger, run_key, warehouse, settings)
    except (StreambedError, ValueError) as error:
        logger.error("%s", error)
        return 1
    except psycopg.OperationalError as error:
        logger.error("cannot connect to the source database: %s", error.diag.message_primary or type(error).__name__)
        return 1
    if isinstance(result, UnchangedRun):
        print(json.dumps(result.summary(), indent=1))
    else:
        print(json.dumps({**result.summary(), "outcome": "captured", "manifest": result.manifest_uri}, indent=1))
    return 0
