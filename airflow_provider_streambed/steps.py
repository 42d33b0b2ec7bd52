"""The three steps of a run, composed once: capture, refresh and publish as functions.

``refresh_once`` (:mod:`.local`) and the three operators call these functions; each face adds
only its own concerns (the operators: connections, XCom, Assets, lineage and logs;
``refresh_once``: timing, a spark-submit subprocess or a Spark Connect client). A step takes the
:class:`Run` and a few keyword arguments, and returns a small record:

- a :class:`~airflow_provider_streambed.ledger.CutRecord` when the run had published before (a
  cleared or retried run): the step has nothing to do;
- an :class:`~airflow_provider_streambed.ledger.runs.UnchangedRun` when the run's W equals the
  last cut's (a quiet source): nothing to refresh or publish;
- else what the step made (:class:`~.capture.run_records.CaptureResult`, :class:`Refreshed`, the new cut).

A failed step is recorded in the ledger by :func:`settling`, the same way for every face.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
from pyiceberg.catalog import Catalog

from airflow_provider_streambed.capture.resyncs import LastCutMirror
from airflow_provider_streambed.capture.run import capture_run
from airflow_provider_streambed.capture.run_records import CaptureResult, CaptureSettings
from airflow_provider_streambed.capture.slot import advance_slot
from airflow_provider_streambed.catalog import staging_of
from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.exceptions import LedgerError, PublishError
from airflow_provider_streambed.ledger import CutRecord, Ledger, RunRecord, RunState
from airflow_provider_streambed.ledger.claims import admit_run, confirm_claim, settle_failure
from airflow_provider_streambed.ledger.runs import UnchangedRun
from airflow_provider_streambed.publish import check_before_run, publish_cut
from airflow_provider_streambed.read import Cut
from airflow_provider_streambed.read.snapshot_files import column_names
from airflow_provider_streambed.refresh import build_job_spec, collect_member_manifests, write_job_spec
from airflow_provider_streambed.refresh.in_process import stage_in_process
from airflow_provider_streambed.refresh.mirrors.copies import stage_unchanged_copies
from airflow_provider_streambed.refresh.mirrors.duckdb_merge import IN_PROCESS_MERGE_CONF
from airflow_provider_streambed.refresh.plan.settings import switched_on
from airflow_provider_streambed.refresh.plan.work import members_to_compute
from airflow_provider_streambed.retention.maintenance import apply_retention_after_publish
from airflow_provider_streambed.retention.plan import publish_expiry
from airflow_provider_streambed.snapshot_properties import SOURCE_PROPERTY_PREFIX
from airflow_provider_streambed.staging import (
    JOB_SPEC_PATH,
    JobSpec,
    MemberManifest,
    capture_manifest_uri,
    join,
    read_json,
    staging_root,
)

logger = logging.getLogger(__name__)

#: Opens a connection to the group's source database (closed when its ``with`` block ends).
SourceConnector = Callable[[], AbstractContextManager[psycopg.Connection[Any]]]
#: Computes members of a run in Spark: ``(spec, the spec's URI, members)``, all members when empty.
Launcher = Callable[[JobSpec, str, Sequence[str]], None]


@dataclass(frozen=True, slots=True)
class Run:
    """One run of a group, as every step sees it.

    Attributes:
        group: the group declaration.
        run_key: the run's key (the same for every try and clear of the run).
        catalog: the catalog of the member tables.
        ledger: the run ledger.
    """

    group: RefreshGroup
    run_key: str
    catalog: Catalog
    ledger: Ledger

    @property
    def staging_root(self) -> str:
        """Where the run stages its files."""
        return staging_root(staging_of(self.catalog), self.group.name, self.run_key)


@dataclass(frozen=True, slots=True)
class Refreshed:
    """What the refresh step staged: the run's job spec (restricted to the step's members) and
    the manifest of every member staged for the run's W."""

    spec: JobSpec
    manifests: dict[str, MemberManifest]


@contextmanager
def settling(run: Run, *, will_retry: bool) -> Iterator[None]:
    """Record a failure of the step run inside the block in the ledger, then let it propagate.

    A final error releases the group at once; a retryable one keeps the run's W and claim while
    ``will_retry`` (:func:`~airflow_provider_streambed.ledger.claims.settle_failure`).
    """
    try:
        yield
    except Exception as error:
        settle_failure(run.ledger, run.group.name, run.run_key, error, will_retry=will_retry)
        raise


def capture(
    run: Run,
    *,
    source: SourceConnector,
    settings: CaptureSettings | None = None,
    supersede: bool = False,
    finished: Callable[[RunRecord], bool] | None = None,
) -> CaptureResult | UnchangedRun | CutRecord:
    """Pin the run's W and capture the group's changes up to it.

    Refuses a group its catalog cannot publish before anything is pinned, claims the group, and
    after the pin gives way to a run pinned earlier (:func:`~.ledger.claims.confirm_claim`).

    Args:
        run: the run.
        source: opens a connection to the source database.
        settings: how the capture runs (:class:`~.capture.run_records.CaptureSettings`).
        supersede: abandon another unpublished run of the group instead of failing.
        finished: whether Airflow is done with a pending run's DAG run (it then no longer blocks).

    Returns:
        The capture; an :class:`UnchangedRun` on a quiet source; the run's cut when it had published.

    Raises:
        StreambedError: see :func:`~.publish.check_before_run`, :func:`~.ledger.claims.admit_run`
            and :func:`~.capture.run.capture_run`.
    """
    check_before_run(run.catalog, run.ledger, run.group)
    if (cut := published_cut(run)) is not None:
        return cut
    admit_run(run.ledger, run.group.name, run.run_key, supersede=supersede, finished=finished)
    resync = settings is not None and settings.resync  # copies every table: nothing to compare
    previous = None if resync else last_cut_mirrors(run.catalog, run.group, run.ledger.last_cut(run.group.name))
    with source() as conn:
        captured = capture_run(conn, run.group, run.ledger, run.run_key, staging_of(run.catalog), settings, previous)
    confirm_claim(run.ledger, run.group.name, run.run_key)
    return captured


def last_cut_mirrors(catalog: Catalog, group: RefreshGroup, last: CutRecord | None) -> dict[str, LastCutMirror]:
    """Each mirror as the group's last cut has it (what the capture compares its table with): its
    columns, what its snapshot recorded of its source table, and its files' column names (the
    table's name mapping: every name of each column, and the names of dropped ones)."""
    if last is None:
        return {}
    cut = Cut.from_record(last, catalog)
    mirrors = {}
    for mirror in (mirror for mirror in group.mirrors if mirror.name in last.members):
        table = cut.table(mirror.name)
        snapshot = table.snapshot_by_id(cut.member(mirror.name).snapshot_id)
        summary = None if snapshot is None else snapshot.summary
        recorded = {} if summary is None else summary.additional_properties
        source = {name.removeprefix(SOURCE_PROPERTY_PREFIX): value for name, value in recorded.items()
                  if name.startswith(SOURCE_PROPERTY_PREFIX)}
        schema = table.schema()
        names = column_names(table, schema)
        live = {field.field_id for field in schema.fields}
        retired = {name for field in table.metadata.name_mapping() or () if field.field_id not in live
                   for name in field.names}
        mirrors[mirror.name] = LastCutMirror.of(schema.as_arrow(), source, names, retired)
    return mirrors


def refresh(
    run: Run,
    *,
    spark: Callable[[], Launcher],
    compact: str = "auto",
    spark_conf: Mapping[str, Any] | None = None,
    members: Sequence[str] = (),
    application_per_member: bool = False,
) -> Refreshed | UnchangedRun | CutRecord:
    """Compute and stage the run's members as of its W.

    Members whose inputs did not change are carried over; bootstrap copies that are the mirror
    as they are, mirrors that merge in-process and incremental SQL members updated in-process
    (unless ``spark_conf`` turns that off) are staged here; what is left is computed by the
    launcher, in one application or one per member.
    Members already staged for W (an earlier try) are skipped.

    Args:
        run: the run.
        spark: returns the launcher; called only when the run has something to refresh (so a
            face can check its Spark connection then).
        compact: which mirrors due for compaction are rewritten whole (``auto``, ``all``, ``none``).
        spark_conf: Spark configuration (``spark.streambed.mirror.inProcessMerge``,
            ``spark.streambed.incrementalMembers``).
        members: compute only these members (a task per member); default all.
        application_per_member: one application per member still to compute, sources first.

    Returns:
        What was staged; an :class:`UnchangedRun`; the run's cut when it had published.

    Raises:
        LedgerError: the run pinned no W (its capture has not run).
        StreambedError: see :func:`~.refresh.plan.build_job_spec` and the launcher.
    """
    if (cut := published_cut(run)) is not None:
        return cut
    if (record := require_run(run)).state == RunState.UNCHANGED:
        return UnchangedRun.of(record)
    launch = spark()
    spec = build_job_spec(run.group, run.catalog, run.ledger, capture_manifest_uri(run.staging_root), run.run_key,
                          compact)
    spec_uri = write_job_spec(spec)  # the whole run's spec: publish reads it
    if members:
        spec = dataclasses.replace(spec, members=tuple(members))
        for name in (name for name in members if name in spec.carried):
            logger.info("group=%s W=%s cut=%d: member %s carried over (%s)", run.group.name, spec.watermark,
                        spec.cut_number, name, spec.carried[name])
    stage_unchanged_copies(spec)
    if switched_on(spark_conf or {}, IN_PROCESS_MERGE_CONF):
        stage_in_process(spec, members, spark_conf)  # members computed here need no Spark application
    for application in applications(run.group, spec, members, per_member=application_per_member):
        logger.info("group=%s run=%s W=%s cut=%d: computing %s", run.group.name, run.run_key, spec.watermark,
                    spec.cut_number, ", ".join(application) or "all members")
        launch(spec, spec_uri, application)
    return Refreshed(spec, collect_member_manifests(spec))


def publish(
    run: Run,
    *,
    source: SourceConnector,
    refreshed: Refreshed | None = None,
    staging_retention_hours: float = 24.0,
) -> CutRecord | UnchangedRun:
    """Publish the run's staged members as the group's next cut (expiring what the group's retention
    lets go in the same commit, then applying the rest of it), then advance the slot to its W.

    A run that had published finishes the slot advance only (a retry after a crash between the
    two); an unchanged run publishes nothing and leaves the slot.

    Args:
        run: the run.
        source: opens a connection to the source database (for the slot).
        refreshed: what the refresh step staged, when the caller has it; else read from staging.
        staging_retention_hours: how long staging of pinned (possibly running) runs is kept.

    Returns:
        The run's cut, or the :class:`UnchangedRun`.

    Raises:
        PublishError: the run has no job spec (its refresh has not run); see :func:`~.publish.publish_cut`.
    """
    cut = published_cut(run)
    if cut is None:
        if (record := require_run(run)).state == RunState.UNCHANGED:
            return UnchangedRun.of(record)
        staged = refreshed or read_refreshed(run)
        cut = publish_cut(run.catalog, run.ledger, run.group, run.run_key, staged.manifests,
                          carried=staged.spec.carried, staging_retention_hours=staging_retention_hours,
                          expire=publish_expiry(run.ledger, run.group))
        apply_retention_after_publish(run.catalog, run.ledger, run.group)
    with source() as conn:
        advance_slot(conn, run.group, cut.watermark)
    return cut


def published_cut(run: Run) -> CutRecord | None:
    """The run's cut when it had published (logged), else ``None``."""
    cut = run.ledger.cut_for_run(run.group.name, run.run_key)
    if cut is not None:
        logger.info("group=%s run=%s: already published as cut %d (W=%s)", run.group.name, run.run_key, cut.cut_id,
                    cut.watermark)
    return cut


def require_run(run: Run) -> RunRecord:
    """The run's ledger record (its pinned W), which every step after capture needs.

    A failed run that no other run took over from is resumed (it claims the group again).

    Raises:
        LedgerError: nothing was pinned for the run (the capture step has not run).
        RunSupersededError: the run was superseded or replaced (final).
        GroupBusyError: a failed run is resumed while another run of the group is pending.
    """
    if run.ledger.get_run(run.group.name, run.run_key) is None:
        raise LedgerError(f"group {run.group.name!r}, run {run.run_key!r}: no pinned W in the ledger; run the "
                          "capture step (capture_watermark) first")
    record = admit_run(run.ledger, run.group.name, run.run_key)
    assert record is not None
    return record


def read_refreshed(run: Run) -> Refreshed:
    """What the refresh step staged for the run, read from its staging.

    Raises:
        PublishError: the run has no job spec (the refresh step has not run).
    """
    data = read_json(join(run.staging_root, JOB_SPEC_PATH))
    if data is None:
        raise PublishError(f"group {run.group.name!r}, run {run.run_key!r}: no job spec; run the refresh step "
                           "(refresh_group) first")
    spec = JobSpec.from_dict(data)
    return Refreshed(spec, collect_member_manifests(spec))


def applications(
    group: RefreshGroup, spec: JobSpec, members: Sequence[str] = (), *, per_member: bool = False
) -> list[list[str]]:
    """The member lists of the Spark applications to submit, in order.

    Empty when no member is left to compute (every one carried over, or already staged for W: by
    an earlier try, in-process, or a bootstrap copy adopted as is); else one application for all
    members to compute (``[[]]``, or ``members``), or with ``per_member`` one per member still to
    compute, sources first.
    """
    computed = set(members_to_compute(spec, members))
    if not computed:
        return []
    if not per_member:
        return [[name for name in members if name in computed]] if members else [[]]
    return [[member.name] for member in group.topological_members() if member.name in computed]
