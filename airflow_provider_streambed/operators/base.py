"""What the three streambed operators share: the group, the run key, the catalog and ledger."""

from __future__ import annotations

import logging
from typing import Any

from airflow.sdk import BaseOperator, Context
from pyiceberg.catalog import Catalog

from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.ledger import Ledger, RunRecord
from airflow_provider_streambed.run_key import make_run_key

logger = logging.getLogger(__name__)


class StreambedBaseOperator(BaseOperator):
    """Base of the capture, refresh and publish operators of one refresh group.

    Hooks and the catalog are made in ``execute`` only, so parsing a DAG opens nothing.
    ``pinned_watermark`` and ``cut_id`` are display fields: the operator fills them in during
    ``execute`` and sends the rendered fields again, so the task's "Rendered Template" view shows
    the run's W and cut; they are not inputs.

    Args:
        group: the refresh-group declaration.
        catalog_conn_id: the catalog connection (default: the group's ``catalog_conn_id``).
    """

    ui_color = "#d6ecf3"

    def __init__(self, *, group: RefreshGroup, catalog_conn_id: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.group = group
        self.catalog_conn_id = catalog_conn_id or group.catalog_conn_id
        self.pinned_watermark = ""
        self.cut_id = ""

    def run_key(self, context: Context) -> str:
        """The run key of this DAG run: the same for every try and every clear of the run."""
        return make_run_key(context["dag"].dag_id, context["dag_run"].run_id)

    def open_catalog(self) -> tuple[Catalog, Ledger]:
        """The catalog of ``catalog_conn_id`` and the ledger in its database."""
        from airflow_provider_streambed.catalog import ledger_of
        from airflow_provider_streambed.hooks.catalog import StreambedCatalogHook

        catalog = StreambedCatalogHook(self.catalog_conn_id).get_conn()
        ledger = ledger_of(catalog)
        ledger.create()
        return catalog, ledger

    def already_published(self, ledger: Ledger, run_key: str) -> dict[str, Any] | None:
        """For a run that already published (a cleared run), the XCom of a step that has nothing to do.

        Capture and refresh return it instead of working again; ``None`` while the run is unpublished.
        """
        cut = ledger.cut_for_run(self.group.name, run_key)
        if cut is None:
            return None
        logger.info("group=%s run=%s: already published as cut %d (W=%s); %s has nothing to do",
                    self.group.name, run_key, cut.cut_id, cut.watermark, self.task_id)
        self.show(watermark=cut.watermark, cut_id=cut.cut_id)
        return {"run_key": run_key, "watermark_lsn": str(cut.watermark), "published_cut_id": cut.cut_id}

    def show(self, *, watermark: object = None, cut_id: int | None = None) -> None:
        """Fill the display fields and send the rendered fields again (best effort)."""
        if watermark is not None:
            self.pinned_watermark = str(watermark)
        if cut_id is not None:
            self.cut_id = str(cut_id)
        try:
            from airflow.sdk.execution_time.comms import SetRenderedFields
            from airflow.sdk.execution_time.task_runner import SUPERVISOR_COMMS, _serialize_rendered_fields
        except ImportError:  # not running under the task runner (e.g. execute() called directly)
            return
        try:
            SUPERVISOR_COMMS.send(msg=SetRenderedFields(rendered_fields=_serialize_rendered_fields(self)))
        except (AttributeError, RuntimeError) as error:
            logger.debug("rendered fields not updated: %s", error)


def require_run(ledger: Ledger, group: RefreshGroup, run_key: str) -> RunRecord:
    """The run's ledger record (its pinned W), which every step after capture needs.

    Raises:
        LedgerError: nothing was pinned for the run (the capture step has not run).
    """
    from airflow_provider_streambed.exceptions import LedgerError

    record = ledger.get_run(group.name, run_key)
    if record is None:
        raise LedgerError(
            f"group {group.name!r}, run {run_key!r}: no pinned W in the ledger; run capture_watermark first"
        )
    return record
