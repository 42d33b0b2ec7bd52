"""``CaptureWatermarkOperator``: pin the run's W and stage the source changes before it."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from airflow.providers.openlineage.extractors import OperatorLineage
from airflow.sdk import Context
from airflow.sdk.types import RuntimeTaskInstanceProtocol

from airflow_provider_streambed.capture.bootstrap import DEFAULT_COPY_PARALLELISM, CopyOptions
from airflow_provider_streambed.capture.copy import TableProgress
from airflow_provider_streambed.capture.run_records import CaptureSettings
from airflow_provider_streambed.capture.slot import DEFAULT_RETAINED_WARN_BYTES
from airflow_provider_streambed.capture.waits import DEFAULT_TIMEOUT_SECONDS
from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.exceptions import DeclarationError, InvalidWatermarkError
from airflow_provider_streambed.ledger import CutRecord, RunRecord
from airflow_provider_streambed.ledger.runs import DagRunRef, UnchangedRun
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.operators.base import StreambedBaseOperator
from airflow_provider_streambed.operators.lineage import StreambedRunFacet, lineage_of, source_datasets
from airflow_provider_streambed.operators.links import XCOM_KEY, HoldbackLink
from airflow_provider_streambed.operators.metrics import emit_copy_progress, emit_freshness, emit_metrics
from airflow_provider_streambed.triggers.changes import DEFAULT_POLL_INTERVAL, GroupChangesTrigger
from airflow_provider_streambed.ui.page import page_url

if TYPE_CHECKING:
    from airflow_provider_streambed import steps

logger = logging.getLogger(__name__)

#: DAG run states after which Airflow runs none of the run's tasks again (unless a person clears them).
ENDED_DAG_RUN_STATES = frozenset({"success", "failed"})

#: The trigger-form Param that lets one run supersede the group's pending (failed, unpublished) run.
SUPERSEDE_PARAM = "supersede_pending_runs"
#: The trigger-form Param that re-synchronises a group whose slot was lost (copies every table again).
RESYNC_PARAM = "resync"
#: The trigger-form Param that copies the named mirrors again in the run's cut (a resync of those members).
RESYNC_MEMBERS_PARAM = "resync_members"

DOC_MD = """
### capture_watermark
Pins this run's watermark **W** (`pg_current_wal_insert_lsn()`, held until flushed) in the run
ledger, keyed by (dag_id, run_id): a retry or a cleared task reuses the same W. Then reads the
group's replication slot up to W and stages the changes as Parquet changelogs (the first run
copies every table instead). Transactions open longer than `holdback_warn_seconds` are reported
(they are not in this cut). Nothing is consumed from the slot until the cut is published.

Trigger with Param `watermark_lsn` (e.g. `0/16B3748`) to pin an explicit W. While another run of
the group is pinned and unpublished this task fails; trigger with Param `supersede_pending_runs`
to abandon that run instead (its W is never published). When the group's replication slot was
lost or dropped, trigger with Param `resync`: the run copies every table again into a new cut.
Param `resync_members` (member names) copies only those mirrors again, in the run's cut.

With `deferrable=True` the first try waits in the triggerer (no worker slot) until the group's
source tables have commits the last cut does not hold, then pins W.
"""


class CaptureWatermarkOperator(StreambedBaseOperator):
    """Pin W for the run and capture the group's source changes up to it.

    Returns (XCom) :meth:`CaptureResult.summary`: W as text, counts and the holdback figures; for
    a run that already published (cleared in the UI) nothing is captured again and the XCom holds
    its W and ``published_cut_id``.

    Args:
        group: the refresh-group declaration.
        source_conn_id: the source connection (default: the group's ``source_conn_id``).
        catalog_conn_id: the catalog connection (default: the group's ``catalog_conn_id``).
        watermark_lsn: an explicit W (text such as ``0/16B3748``); empty: pin the current LSN.
        holdback_warn_seconds: report source transactions open longer than this.
        flush_timeout_seconds: how long to wait for the WAL to be flushed up to W.
        wal_retention_warn_bytes: warn when the group's slot retains more WAL than this (1 GiB).
        supersede_pending_runs: abandon another unpublished run of the group instead of failing
            (also when the run was triggered with the Param ``supersede_pending_runs`` set).
        copy_parallelism: connections a bootstrap copy uses; tables over 64 MiB are split into
            ctid ranges copied concurrently at one snapshot. Progress is logged every 10 s and sent
            as the gauge ``streambed.<group>.<member>.copied_rows``.
        slot_create_timeout_seconds: how long creating the group's slot (first run) and its
            publication DDL may wait for other sessions' transactions and locks (prepared ones
            too); the task logs them every 15 s and then fails naming them (retryable).
        resync: re-synchronise the group (also when the run was triggered with the Param
            ``resync`` set): for a group whose slot was lost or dropped, copy every table again
            at a new slot and publish the copies as a new cut; older cuts stay readable.
        resync_members: mirrors to copy again in every run's cut (with those of the Param
            ``resync_members``): each is copied at a snapshot consistent with the run's W and
            published whole, the other members keep merging (checked against the group when
            the DAG file is parsed).
        deferrable: on the task's first try, wait in the triggerer (holding no worker slot) until
            the group's source tables have commits the last cut does not hold
            (:class:`~airflow_provider_streambed.triggers.changes.GroupChangesTrigger`), then pin
            W. Retries, clears, an explicit W and a resync never wait.
        poll_interval: seconds between the deferred trigger's polls of the source.
    """

    template_fields = ("source_conn_id", "catalog_conn_id", "watermark_lsn")
    operator_extra_links = (HoldbackLink(),)

    def __init__(
        self,
        *,
        source_conn_id: str | None = None,
        watermark_lsn: str | None = None,
        holdback_warn_seconds: float = 60.0,
        flush_timeout_seconds: float = 30.0,
        wal_retention_warn_bytes: int = DEFAULT_RETAINED_WARN_BYTES,
        supersede_pending_runs: bool = False,
        copy_parallelism: int = DEFAULT_COPY_PARALLELISM,
        slot_create_timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
        resync: bool = False,
        resync_members: Sequence[str] = (),
        deferrable: bool = False,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("doc_md", DOC_MD)
        super().__init__(**kwargs)
        self.source_conn_id = source_conn_id or self.group.source_conn_id
        self.watermark_lsn = watermark_lsn or ""
        self.holdback_warn_seconds = holdback_warn_seconds
        self.flush_timeout_seconds = flush_timeout_seconds
        self.wal_retention_warn_bytes = wal_retention_warn_bytes
        self.supersede_pending_runs = supersede_pending_runs
        self.copy_parallelism = copy_parallelism
        CopyOptions(copy_parallelism)  # checked when the DAG file is parsed
        if not isinstance(slot_create_timeout_seconds, int | float) or slot_create_timeout_seconds <= 0:
            raise DeclarationError(f"slot_create_timeout_seconds must be a number of seconds > 0, "
                                   f"got {slot_create_timeout_seconds!r}")
        self.slot_create_timeout_seconds = float(slot_create_timeout_seconds)
        self.resync = resync
        self.resync_members = tuple(self.group.member(name).name for name in resync_members)
        self.deferrable = deferrable
        self.poll_interval = poll_interval

    def execute(self, context: Context) -> dict[str, Any]:
        """Wait for changes in the triggerer first when deferrable (see the class docstring), then capture."""
        if self.deferrable and self.waits_for_changes(context):
            trigger = GroupChangesTrigger.for_group(self.group, self.poll_interval, source_conn_id=self.source_conn_id,
                                                    catalog_conn_id=self.catalog_conn_id)
            self.defer(trigger=trigger, method_name=self.execute_complete.__name__)
        return super().execute(context)

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        """Resumed by the trigger's event: the source has new commits; pin W and capture."""
        logger.info("group=%s: resumed at source LSN %s: %s", self.group.name, event["lsn"], event["reason"])
        return super().execute(context)

    def waits_for_changes(self, context: Context) -> bool:
        """Whether this try waits for changes: a first try without an explicit W or a resync."""
        params = context["params"]
        explicit = watermark_text(self.watermark_lsn) is not None
        resync = self.resync or self.resync_members or params.get(RESYNC_PARAM) or params.get(RESYNC_MEMBERS_PARAM)
        return context["ti"].try_number == 1 and not explicit and not resync

    def run_step(self, context: Context, run: steps.Run) -> dict[str, Any]:
        """Pin W and capture; returns the capture summary (or the unchanged run's) for XCom."""
        from airflow_provider_streambed import steps

        params, ti = context["params"], context["ti"]
        result = steps.capture(run, source=self.source_connector(), settings=self.capture_settings(context),
                               supersede=self.supersede_pending_runs or bool(params.get(SUPERSEDE_PARAM)),
                               finished=lambda pending: dag_run_ended(ti, pending))
        if isinstance(result, CutRecord):
            return self.nothing_to_do(run, result)
        self.lineage = lineage_of(lambda: self.source_lineage(run.run_key, str(result.watermark)), self.task_id)
        ti.xcom_push(key=XCOM_KEY, value=page_url(self.catalog_conn_id, self.group.name))
        if isinstance(result, UnchangedRun):
            emit_freshness(run.ledger, self.group.name)  # the source was checked: nothing else will say so
            logger.info("group=%s run=%s W=%s: %s", self.group.name, run.run_key, result.watermark, result.message())
        else:
            emit_metrics(self.group.name, result.summary())
            logger.info("group=%s run=%s W=%s: captured (bootstrap=%s)", self.group.name, run.run_key,
                        result.watermark, result.bootstrap)
        return {"run_key": run.run_key, **result.summary()}

    def capture_settings(self, context: Context) -> CaptureSettings:
        """The capture's settings: this operator's arguments, the trigger Params and the DAG run.

        Raises:
            InvalidWatermarkError: the rendered ``watermark_lsn`` is not an LSN.
        """
        return CaptureSettings(
            explicit_watermark=explicit_watermark(self.group, self.watermark_lsn),
            holdback_warn_seconds=self.holdback_warn_seconds,
            flush_timeout_seconds=self.flush_timeout_seconds,
            wal_retention_warn_bytes=self.wal_retention_warn_bytes,
            dag_run=DagRunRef(context["dag"].dag_id, context["dag_run"].run_id),
            copy=CopyOptions(self.copy_parallelism, on_progress=self._copy_progress),
            slot_create_timeout_seconds=self.slot_create_timeout_seconds,
            resync=self.resync or bool(context["params"].get(RESYNC_PARAM)),
            resync_members=(*self.resync_members, *(context["params"].get(RESYNC_MEMBERS_PARAM) or ())),
        )

    def source_lineage(self, run_key: str, watermark: str) -> OperatorLineage:
        """The mirrored source tables as inputs, and the run (group, run key, W) as a run facet."""
        from airflow.sdk import BaseHook

        connection = BaseHook.get_connection(self.source_conn_id)
        inputs = source_datasets(connection.host, connection.port, connection.schema,
                                 (mirror.qualified_table for mirror in self.group.mirrors))
        return OperatorLineage(inputs=inputs,
                               run_facets={"streambed": StreambedRunFacet(self.group.name, run_key, watermark)})

    def _copy_progress(self, progress: TableProgress) -> None:
        emit_copy_progress(self.group.name, progress.member, progress.rows)


def dag_run_ended(ti: RuntimeTaskInstanceProtocol, run: RunRecord) -> bool:
    """Whether Airflow is done with the DAG run behind a pending run (no retry of it will come)."""
    if run.dag_run is None:
        return False
    try:
        state = ti.get_dagrun_state(run.dag_run.dag_id, run.dag_run.run_id)
    except Exception as error:  # unknown: keep treating the run as pending (the error message says what to do)
        logger.warning("group=%s run=%s: cannot read the state of %s: %s", run.group, run.run_key, run.dag_run, error)
        return False
    return state in ENDED_DAG_RUN_STATES


def watermark_text(text: str) -> str | None:
    """The rendered ``watermark_lsn`` stripped, ``None`` when empty (no explicit W)."""
    text = text.strip()
    return None if text in ("", "None") else text


def explicit_watermark(group: RefreshGroup, text: str) -> Lsn | None:
    """The rendered ``watermark_lsn`` as an LSN, ``None`` when empty.

    Raises:
        InvalidWatermarkError: the text is not an LSN (final: a retry renders the same text).
    """
    stripped = watermark_text(text)
    if stripped is None:
        return None
    try:
        return Lsn.parse(stripped)
    except ValueError as error:
        raise InvalidWatermarkError(f"group {group.name!r}: watermark_lsn {stripped!r} is not an LSN "
                                    "(expected two hex numbers as 'XXXXXXXX/XXXXXXXX', e.g. 0/16B3748)") from error
