"""What the three streambed operators share: the group, the run key, the catalog, ledger and failures.

Every step runs inside :meth:`StreambedBaseOperator.execute`, which settles a failure in the
ledger the same way for all three: a final error fails the task without retries
(``AirflowFailException``) and marks the run failed, freeing the group; a retryable error keeps
the run's W and claim while Airflow will retry the task, and frees the group on its last try.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from airflow.providers.openlineage.extractors import OperatorLineage
from airflow.sdk import BaseOperator, Context

from airflow_provider_streambed.catalog import staging_of
from airflow_provider_streambed.compat.airflow import AirflowFailException
from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.dependencies import naming_dependencies
from airflow_provider_streambed.exceptions import is_final
from airflow_provider_streambed.hooks.catalog import StreambedCatalogHook
from airflow_provider_streambed.hooks.source import StreambedSourceHook
from airflow_provider_streambed.ledger import CutRecord
from airflow_provider_streambed.ledger.runs import UnchangedRun
from airflow_provider_streambed.run_key import make_run_key

if TYPE_CHECKING:
    from airflow_provider_streambed import steps

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
        from airflow_provider_streambed import steps  # the engine: imported when a task runs, not when a DAG parses

        run_key = make_run_key(context["dag"].dag_id, context["dag_run"].run_id)
        source = getattr(self, "source_conn_id", None)  # capture and publish use the source
        names = {"catalog": f"connection {self.catalog_conn_id!r}",
                 "source": f"connection {source!r}" if source else None}
        try:
            with naming_dependencies(**names):
                catalog, ledger = StreambedCatalogHook(self.catalog_conn_id).get_catalog_and_ledger()
            run = steps.Run(self.group, run_key, catalog, ledger)
            with naming_dependencies(**names, warehouse=staging_of(catalog)), \
                    steps.settling(run, will_retry=will_retry(context)):
                return self.run_step(context, run)
        except Exception as error:  # a final error (a wrong setting too) fails the task without its retries
            if is_final(error):
                raise AirflowFailException(f"{type(error).__name__}: {error}") from error
            raise

    def run_step(self, context: Context, run: steps.Run) -> dict[str, Any]:
        """The step itself; returns its XCom."""
        raise NotImplementedError

    def source_connector(self) -> steps.SourceConnector:
        """Opens connections to the source database of ``source_conn_id`` (capture and publish)."""
        return StreambedSourceHook(getattr(self, "source_conn_id", self.group.source_conn_id)).get_conn

    def nothing_to_do(self, run: steps.Run, outcome: CutRecord | UnchangedRun) -> dict[str, Any]:
        """The XCom of a step with nothing to do: the run had published (a cleared run), or is unchanged."""
        if isinstance(outcome, UnchangedRun):
            logger.info("group=%s run=%s W=%s: %s; %s has nothing to do", run.group.name, run.run_key,
                        outcome.watermark, outcome.message(), self.task_id)
            return {"run_key": run.run_key, **outcome.summary()}
        logger.info("group=%s run=%s: %s has nothing to do", run.group.name, run.run_key, self.task_id)
        return {"run_key": run.run_key, "watermark_lsn": str(outcome.watermark), "published_cut_id": outcome.cut_id}


def will_retry(context: Context) -> bool:
    """Whether Airflow retries this task if the current try fails (as the execution API decides it)."""
    ti = context["ti"]
    return ti.max_tries != 0 and ti.try_number <= ti.max_tries
