"""What the three streambed operators share: the group, the run key, the catalog, ledger and failures.

Every step runs inside :meth:`StreambedBaseOperator.execute`, which settles a failure in the
ledger the same way for all three: a final error fails the task without retries
(``AirflowFailException``) and marks the run failed, freeing the group; a retryable error keeps
the run's W and claim while Airflow will retry the task, and frees the group on its last try.
"""

from __future__ import annotations

import logging
from typing import Any

from airflow.providers.openlineage.extractors import OperatorLineage
from airflow.sdk import BaseOperator, Context
from airflow.sdk.exceptions import AirflowFailException
from pyiceberg.catalog import Catalog

from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.dependencies import naming_dependencies
from airflow_provider_streambed.exceptions import LedgerError, is_final
from airflow_provider_streambed.ledger import Ledger, RunRecord, RunState
from airflow_provider_streambed.ledger.claims import admit_run, settle_failure
from airflow_provider_streambed.ledger.runs import UnchangedRun
from airflow_provider_streambed.run_key import make_run_key

logger = logging.getLogger(__name__)


class StreambedBaseOperator(BaseOperator):
    """Base of the capture, refresh and publish operators of one refresh group.

    Hooks and the catalog are made in ``execute`` only, so parsing a DAG opens nothing. The run's
    W and cut id are in each task's XCom and log lines.

    Args:
        group: the refresh-group declaration.
        catalog_conn_id: the catalog connection (default: the group's ``catalog_conn_id``).
    """

    ui_color = "#d6ecf3"

    def __init__(self, *, group: RefreshGroup, catalog_conn_id: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.group = group
        self.catalog_conn_id = catalog_conn_id or group.catalog_conn_id
        self.lineage: OperatorLineage | None = None

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> OperatorLineage:
        """The datasets this step read and wrote, as recorded by ``execute`` (:mod:`.lineage`)."""
        return self.lineage or OperatorLineage()

    def execute(self, context: Context) -> dict[str, Any]:
        """Run the step; a failure is settled in the ledger (see the module docstring) and raised.

        A dependency that is down (source, catalog database, warehouse) fails the step with a
        :class:`~airflow_provider_streambed.exceptions.DependencyError` naming it.
        """
        from airflow_provider_streambed.catalog import staging_of

        run_key = self.run_key(context)
        source = getattr(self, "source_conn_id", None)  # capture and publish use the source
        names = {"catalog": f"connection {self.catalog_conn_id!r}",
                 "source": f"connection {source!r}" if source else None}
        with naming_dependencies(**names):
            catalog, ledger = self.open_catalog()
        with naming_dependencies(**names, warehouse=staging_of(catalog)):
            try:
                return self.run_step(context, catalog, ledger, run_key)
            except Exception as error:
                settle_failure(ledger, self.group.name, run_key, error, will_retry=will_retry(context))
                if is_final(error):
                    raise AirflowFailException(f"{type(error).__name__}: {error}") from error
                raise

    def run_step(self, context: Context, catalog: Catalog, ledger: Ledger, run_key: str) -> dict[str, Any]:
        """The step itself; returns its XCom."""
        raise NotImplementedError

    def run_key(self, context: Context) -> str:
        """The run key of this DAG run: the same for every try and every clear of the run."""
        return make_run_key(context["dag"].dag_id, context["dag_run"].run_id)

    def open_catalog(self) -> tuple[Catalog, Ledger]:
        """The catalog of ``catalog_conn_id`` and the ledger in its database."""
        return open_catalog(self.catalog_conn_id)

    def already_published(self, ledger: Ledger, run_key: str) -> dict[str, Any] | None:
        """For a run that already published (a cleared run), the XCom of a step that has nothing to do.

        Capture and refresh return it instead of working again; ``None`` while the run is unpublished.
        """
        cut = ledger.cut_for_run(self.group.name, run_key)
        if cut is None:
            return None
        logger.info("group=%s run=%s: already published as cut %d (W=%s); %s has nothing to do",
                    self.group.name, run_key, cut.cut_id, cut.watermark, self.task_id)
        return {"run_key": run_key, "watermark_lsn": str(cut.watermark), "published_cut_id": cut.cut_id}


def open_catalog(catalog_conn_id: str, *, create: bool = True) -> tuple[Catalog, Ledger]:
    """The catalog of the Airflow connection ``catalog_conn_id`` and the ledger in its database
    (its tables created, unless ``create`` is false: a reader that must not write)."""
    from airflow_provider_streambed.catalog import ledger_of
    from airflow_provider_streambed.hooks.catalog import StreambedCatalogHook

    catalog = StreambedCatalogHook(catalog_conn_id).get_conn()
    ledger = ledger_of(catalog)
    if create:
        ledger.create()
    return catalog, ledger


def will_retry(context: Context) -> bool:
    """Whether Airflow retries this task if the current try fails (as the execution API decides it)."""
    ti = context["ti"]
    return ti.max_tries != 0 and ti.try_number <= ti.max_tries


def require_run(ledger: Ledger, group: RefreshGroup, run_key: str) -> RunRecord:
    """The run's ledger record (its pinned W), which every step after capture needs.

    A failed run that no other run took over from is resumed (it claims the group again).

    Raises:
        LedgerError: nothing was pinned for the run (the capture step has not run).
        RunSupersededError: the run was superseded or replaced (final).
        GroupBusyError: a failed run is resumed while another run of the group is pending.
    """
    if ledger.get_run(group.name, run_key) is None:
        raise LedgerError(
            f"group {group.name!r}, run {run_key!r}: no pinned W in the ledger; run capture_watermark first"
        )
    record = admit_run(ledger, group.name, run_key)
    assert record is not None
    return record


def unchanged_result(record: RunRecord, task_id: str) -> dict[str, Any] | None:
    """For an unchanged run, the XCom of a step with nothing to do (logged); else ``None``."""
    if record.state != RunState.UNCHANGED:
        return None
    unchanged = UnchangedRun.of(record)
    logger.info("group=%s run=%s W=%s: %s; %s has nothing to do", record.group, record.run_key, record.watermark,
                unchanged.message(), task_id)
    return unchanged.summary()
