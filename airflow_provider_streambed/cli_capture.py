"""``streambed capture``: run the capture step of a group once, for debugging.

The DSN comes from ``--dsn`` or the ``STREAMBED_SOURCE_DSN`` environment variable (preferred: a
command line is visible to other users); it is never printed. The warehouse is ``--out``; the
ledger is an SQLite file in it unless ``--catalog-uri`` names another database.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
from pathlib import Path

import psycopg

from airflow_provider_streambed.capture.run import capture_run
from airflow_provider_streambed.cli import load_group
from airflow_provider_streambed.exceptions import DeclarationError, StreambedError
from airflow_provider_streambed.ledger import Ledger
from airflow_provider_streambed.ledger.runs import UnchangedRun
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.run_key import make_run_key

logger = logging.getLogger(__name__)

LEDGER_FILE = "streambed-ledger.db"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Register the ``capture`` arguments."""
    parser.add_argument("--group", required=True, help="the declaration: file.py:variable or package.module:variable")
    parser.add_argument("--dsn", default=None, help="source libpq DSN (default: $STREAMBED_SOURCE_DSN)")
    parser.add_argument("--out", required=True, help="warehouse directory or URI")
    parser.add_argument("--catalog-uri", default=None, help="SQLAlchemy URI of the ledger database")
    parser.add_argument("--run-key", default=None, help="run key (default: a new one per call)")
    parser.add_argument("--watermark", default=None, help="explicit W as 'X/Y'")


def run(args: argparse.Namespace) -> int:
    """Capture once and print the run's summary as JSON; returns the exit code."""
    dsn = args.dsn or os.environ.get("STREAMBED_SOURCE_DSN")
    if not dsn:
        logger.error("no source DSN: pass --dsn or set STREAMBED_SOURCE_DSN")
        return 2
    try:
        group = load_group(args.group)
        warehouse = args.out if "://" in args.out else Path(args.out).resolve().as_uri()
        local = Path(args.out).resolve() if "://" not in args.out else None
        if local is not None:
            local.mkdir(parents=True, exist_ok=True)
        catalog_uri = args.catalog_uri or (None if local is None else f"sqlite:///{local / LEDGER_FILE}")
        if catalog_uri is None:
            raise DeclarationError("--catalog-uri is required when --out is not a local directory")
        ledger = Ledger(catalog_uri)
        run_key = args.run_key or make_run_key("cli", os.urandom(6).hex())
        watermark = Lsn.parse(args.watermark) if args.watermark else None
        with psycopg.connect(dsn, autocommit=True) as conn:
            result = capture_run(conn, group, ledger, run_key, warehouse, explicit_watermark=watermark)
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
