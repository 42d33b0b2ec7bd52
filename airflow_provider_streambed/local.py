"""``refresh_once``: one run of a group in this process, without Airflow or a scheduler.

The same three steps as the Airflow task group (capture, refresh, publish), composed from the
engine: for notebooks, tests, benchmarks and the ``streambed refresh`` command. Spark runs as a
``spark-submit`` subprocess (``master`` defaults to ``local[2]``).
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass

import psycopg

from airflow_provider_streambed.catalog import ledger_of, open_catalog, warehouse_of
from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.ledger import CutRecord
from airflow_provider_streambed.ledger.runs import claim_group, confirm_claim
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.run_key import make_run_key

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class StepTimes:
    """Seconds spent in each step of the last :func:`refresh_once` call (for benchmarks)."""

    capture: float = 0.0
    refresh: float = 0.0
    publish: float = 0.0


def refresh_once(
    group: RefreshGroup,
    *,
    source_dsn: str,
    catalog_properties: Mapping[str, str],
    run_key: str | None = None,
    master: str = "local[2]",
    spark_conf: Mapping[str, str] | None = None,
    explicit_watermark: Lsn | None = None,
    supersede_pending_runs: bool = False,
    times: StepTimes | None = None,
) -> CutRecord:
    """Capture, refresh and publish one cut of ``group``; returns the cut.

    Args:
        group: the group declaration.
        source_dsn: libpq connection string of the source database (never logged).
        catalog_properties: pyiceberg catalog properties (``uri``, ``warehouse``, ...).
        run_key: the run key; default: a new one (``make_run_key("local", <UTC time>)``). Pass
            the key of a failed run to retry it with its pinned W; the key of a published run
            returns its cut (after making sure the slot was advanced) and runs nothing.
        master: the Spark master.
        spark_conf: extra Spark configuration.
        explicit_watermark: pin this W instead of the current WAL position.
        supersede_pending_runs: abandon another unpublished run of the group instead of failing.
        times: filled with the seconds each step took.

    Raises:
        StreambedError: a step failed; the run stays unpublished and can be retried with the
            same ``run_key``.
    """
    from airflow_provider_streambed.capture.run import capture_run
    from airflow_provider_streambed.capture.slot import advance_slot
    from airflow_provider_streambed.publish.cut import publish_cut
    from airflow_provider_streambed.refresh import (
        build_job_spec,
        collect_member_manifests,
        run_local_spark_submit,
        write_job_spec,
    )

    times = times if times is not None else StepTimes()
    run_key = run_key or make_run_key("local", dt.datetime.now(dt.UTC).isoformat())
    catalog = open_catalog(catalog_properties)
    ledger = ledger_of(catalog)
    ledger.create()
    if (published := ledger.cut_for_run(group.name, run_key)) is not None:
        logger.info("group=%s run=%s: already published as cut %d", group.name, run_key, published.cut_id)
        with psycopg.connect(source_dsn) as conn:
            advance_slot(conn, group, published.watermark)
        return published
    started = time.perf_counter()
    if ledger.get_run(group.name, run_key) is None:
        claim_group(ledger, group.name, run_key, supersede=supersede_pending_runs)
    with psycopg.connect(source_dsn) as conn:
        captured = capture_run(conn, group, ledger, run_key, warehouse_of(catalog),
                               explicit_watermark=explicit_watermark)
    confirm_claim(ledger, group.name, run_key)
    times.capture = time.perf_counter() - started
    logger.info("group=%s run=%s W=%s: captured in %.2f s", group.name, run_key, captured.watermark, times.capture)

    started = time.perf_counter()
    spec = build_job_spec(group, catalog, ledger, captured.manifest_uri, run_key)
    run_local_spark_submit(write_job_spec(spec), master=master, conf=dict(spark_conf or {}))
    manifests = collect_member_manifests(spec)
    times.refresh = time.perf_counter() - started
    logger.info("group=%s W=%s cut=%d: refreshed in %.2f s", group.name, spec.watermark, spec.cut_number,
                times.refresh)

    started = time.perf_counter()
    cut = publish_cut(catalog, ledger, group, run_key, manifests)
    with psycopg.connect(source_dsn) as conn:
        advance_slot(conn, group, cut.watermark)
    times.publish = time.perf_counter() - started
    logger.info("group=%s W=%s cut=%d: published in %.2f s", group.name, cut.watermark, cut.cut_id, times.publish)
    return cut
