"""``refresh_once``: one run of a group in this process, without Airflow or a scheduler.

The same three steps as the Airflow task group (capture, refresh, publish), composed from the
engine: for notebooks, tests, benchmarks and the ``streambed refresh`` command. Spark runs as a
``spark-submit`` subprocess (``master`` defaults to ``local[2]``), or, given ``spark_remote``, in
this process as a client of a Spark Connect server.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import psycopg

from airflow_provider_streambed import steps
from airflow_provider_streambed.capture.bootstrap import DEFAULT_COPY_PARALLELISM, CopyOptions
from airflow_provider_streambed.capture.run_records import CaptureSettings
from airflow_provider_streambed.catalog import LEDGER_URI_PROPERTY, STAGING_URI_PROPERTY, open_with_ledger
from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.dependencies import describe_catalog, describe_source, naming_dependencies
from airflow_provider_streambed.ledger import CutRecord, RunState
from airflow_provider_streambed.ledger.runs import UnchangedRun, unchanged_message
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.refresh import run_local_spark_submit
from airflow_provider_streambed.refresh.spark.connect import run_on_connect
from airflow_provider_streambed.run_key import make_run_key
from airflow_provider_streambed.staging import JobSpec

logger = logging.getLogger(__name__)


@dataclass(slots=True)
class StepTimes:
    """Seconds spent in each step of the last :func:`refresh_once` call (for benchmarks)."""

    capture: float = 0.0
    refresh: float = 0.0
    publish: float = 0.0


@dataclass(frozen=True, slots=True)
class RunResult:
    """The outcome of one :func:`refresh_once` run.

    Attributes:
        outcome: ``RunState.PUBLISHED`` (a new cut) or ``RunState.UNCHANGED`` (W equals the last
            cut's W: the source wrote no WAL since it, so nothing was published); both compare
            equal to their names, ``"published"`` and ``"unchanged"``.
        cut: the cut the run published, or for an unchanged run the cut that stays current.
        run_key: the run's key.
        checked_at: when the run checked the source (pinned W).
    """

    outcome: RunState
    cut: CutRecord
    run_key: str
    checked_at: dt.datetime

    def message(self) -> str:
        """One line for people: what the run did."""
        if self.outcome == RunState.UNCHANGED:
            return f"group {self.cut.group}: {unchanged_message(self.cut.cut_id, self.cut.watermark, self.checked_at)}"
        return f"group {self.cut.group}: published cut {self.cut.cut_id} at W={self.cut.watermark} (run {self.run_key})"


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
    compact: str = "auto",
    spark_remote: str | None = None,
    copy_parallelism: int = DEFAULT_COPY_PARALLELISM,
    resync: bool = False,
    resync_members: Sequence[str] = (),
) -> RunResult:
    """Capture, refresh and publish one cut of ``group``; returns what the run did.

    A run whose W equals the last cut's W (a quiet source) is ``unchanged``: it starts no Spark
    application and publishes nothing, and the result names the current cut.

    Args:
        group: the group declaration.
        source_dsn: libpq connection string of the source database (never logged).
        catalog_properties: pyiceberg catalog properties (``uri``, ``warehouse``, ...).
        run_key: the run key; default: a new one (``make_run_key("local", <UTC time>)``). Pass
            the key of a failed run to retry it with its pinned W; the key of a published or
            unchanged run returns its result (after making sure the slot was advanced) and runs nothing.
        master: the Spark master.
        spark_conf: extra Spark configuration (``spark.streambed.mirror.inProcessMerge``: ``false``
            has Spark merge every mirror, see :mod:`~airflow_provider_streambed.refresh.mirrors.duckdb_merge`).
        explicit_watermark: pin this W instead of the current WAL position.
        supersede_pending_runs: abandon another unpublished run of the group instead of failing.
        times: filled with the seconds each step took.
        compact: which mirrors due for compaction are rewritten whole: ``"auto"`` (at most one),
            ``"all"`` or ``"none"`` (see :mod:`~airflow_provider_streambed.refresh.plan.compaction`).
        spark_remote: a Spark Connect URL (``sc://host:port``): run the refresh on that server
            instead of spark-submit (``master`` is then unused, and of ``spark_conf`` only its
            ``spark.streambed.*`` settings reach the session).
        copy_parallelism: connections a bootstrap copy uses (large tables are split into ranges).
        resync: re-synchronise the group after its slot was lost or dropped: copy every table
            again and publish the copies as a new cut (see :func:`.capture.run.capture_run`).
        resync_members: mirrors to copy again in this run's cut (a resync of those members only;
            the others keep merging).

    Raises:
        StreambedError: a step failed. After a retryable error the run stays pinned and can be
            retried with the same ``run_key``; after a final one it is failed and frees the group.
            A dependency that is down (the source, the catalog database, the warehouse, the Spark
            master) gives a ``DependencyError`` naming it.
    """
    times = times if times is not None else StepTimes()
    run_key = run_key or make_run_key("local", dt.datetime.now(dt.UTC).isoformat())
    uri = catalog_properties.get(LEDGER_URI_PROPERTY) or catalog_properties.get("uri")  # the ledger's database
    staging = catalog_properties.get(STAGING_URI_PROPERTY) or catalog_properties.get("warehouse")
    with naming_dependencies(source=describe_source(source_dsn), catalog=describe_catalog(uri) if uri else None,
                             warehouse=staging):
        run = steps.Run(group, run_key, *open_with_ledger(catalog_properties))
        with steps.settling(run, will_retry=True):
            return _run(run, lambda: psycopg.connect(source_dsn), _Spark(master, spark_conf or {}, spark_remote),
                        CaptureSettings(explicit_watermark=explicit_watermark, copy=CopyOptions(copy_parallelism),
                                        resync=resync, resync_members=tuple(resync_members)),
                        supersede=supersede_pending_runs, compact=compact, times=times)


@dataclass(frozen=True, slots=True)
class _Spark:
    """Where ``refresh_once`` computes members: a Spark Connect server, else spark-submit on ``master``."""

    master: str
    conf: Mapping[str, str]
    remote: str | None

    def launch(self, spec: JobSpec, spec_uri: str, members: Sequence[str]) -> None:
        if self.remote:
            run_on_connect(spec, self.remote, members, settings=self.conf)
        else:
            run_local_spark_submit(spec_uri, master=self.master, conf=dict(self.conf), members=members)


def _run(
    run: steps.Run, source: steps.SourceConnector, spark: _Spark, settings: CaptureSettings, *, supersede: bool,
    compact: str, times: StepTimes,
) -> RunResult:
    """The three steps of :func:`refresh_once`, timed."""
    group, ledger = run.group, run.ledger
    started = time.perf_counter()
    captured = steps.capture(run, source=source, settings=settings, supersede=supersede)
    times.capture = time.perf_counter() - started
    if isinstance(captured, UnchangedRun):
        found = ledger.get_cut(group.name, captured.cut_id, include_expired=True)
        return RunResult(RunState.UNCHANGED, found, run.run_key, captured.checked_at)
    if isinstance(captured, CutRecord):  # published before: publish only makes sure the slot was advanced
        cut = steps.publish(run, source=source)
    else:
        logger.info("group=%s run=%s W=%s: captured in %.2f s", group.name, run.run_key, captured.watermark,
                    times.capture)
        started = time.perf_counter()
        staged = steps.refresh(run, spark=lambda: spark.launch, compact=compact, spark_conf=spark.conf)
        assert isinstance(staged, steps.Refreshed)  # the capture above pinned the run, and W moved
        times.refresh = time.perf_counter() - started
        logger.info("group=%s W=%s cut=%d: refreshed in %.2f s", group.name, staged.spec.watermark,
                    staged.spec.cut_number, times.refresh)
        started = time.perf_counter()
        cut = steps.publish(run, source=source, refreshed=staged)
        times.publish = time.perf_counter() - started
        assert isinstance(cut, CutRecord)
        logger.info("group=%s W=%s cut=%d: published in %.2f s", group.name, cut.watermark, cut.cut_id,
                    times.publish)
    assert isinstance(cut, CutRecord)
    record = ledger.get_run(group.name, run.run_key)
    assert record is not None
    return RunResult(RunState.PUBLISHED, cut, run.run_key, record.pinned_at)
