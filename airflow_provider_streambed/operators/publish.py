"""``PublishCutOperator``: commit all members as one cut, advance the slot, emit Asset events."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from airflow.providers.openlineage.extractors import OperatorLineage
from airflow.sdk import AssetAlias, Context, TriggerRule
from pyiceberg.catalog import Catalog

from airflow_provider_streambed.assets import member_assets
from airflow_provider_streambed.compat.airflow import recent_inlet_events
from airflow_provider_streambed.ledger import CutRecord, Ledger
from airflow_provider_streambed.ledger.runs import UnchangedRun
from airflow_provider_streambed.operators.base import StreambedBaseOperator
from airflow_provider_streambed.operators.lineage import StreambedRunFacet, lineage_of, table_dataset
from airflow_provider_streambed.operators.links import XCOM_KEY, CutLink
from airflow_provider_streambed.operators.metrics import emit_freshness
from airflow_provider_streambed.ui.page import page_url

if TYPE_CHECKING:
    from airflow_provider_streambed import steps

logger = logging.getLogger(__name__)

DOC_MD = """
### publish_cut
Runs only if every member refreshed (`all_success`). Commits every member table's new snapshot
and the cut's ledger rows in **one catalog database transaction** (compare-and-swap on each
table), so readers see all members at the new cut or none. Then advances the replication slot
to W, and emits one Asset event per member table (`streambed://...`, extra: `cut_id`,
`watermark_lsn`, `group`). Idempotent: a run already published is not published again (a
cleared publish task finishes the slot advance and emits no second set of events).
"""


def asset_alias(group_name: str) -> AssetAlias:
    """The alias the publish task emits its member Asset events through."""
    return AssetAlias(name=f"streambed-{group_name}-cuts")


class PublishCutOperator(StreambedBaseOperator):
    """Publish the run's staged members as the group's next cut; XCom gets the cut's facts.

    Args:
        group: the refresh-group declaration.
        source_conn_id: the source connection, for advancing the slot (default: the group's).
        catalog_conn_id: the catalog connection (default: the group's ``catalog_conn_id``).
        staging_retention_hours: keep the staged files of runs that may still resume (pinned, or
            failed and not replaced) and of runs unknown to the ledger this long; superseded and
            replaced runs' staging is deleted at the next publish.
    """

    template_fields = ("source_conn_id", "catalog_conn_id")
    operator_extra_links = (CutLink(),)

    def __init__(
        self, *, source_conn_id: str | None = None, staging_retention_hours: float = 24.0, **kwargs: Any
    ) -> None:
        kwargs.setdefault("doc_md", DOC_MD)
        kwargs.setdefault("trigger_rule", TriggerRule.ALL_SUCCESS)
        group = kwargs["group"]
        assets = member_assets(group)
        kwargs.setdefault("outlets", [asset_alias(group.name)])
        kwargs.setdefault("inlets", assets)
        super().__init__(**kwargs)
        self.source_conn_id = source_conn_id or self.group.source_conn_id
        self.staging_retention_hours = staging_retention_hours
        self.member_assets = assets

    def run_step(self, context: Context, run: steps.Run) -> dict[str, Any]:
        """Publish (or find) the run's cut, advance the slot and emit the Asset events once.

        An unchanged run publishes nothing, leaves the slot and emits no Asset event.
        """
        from airflow_provider_streambed import steps

        cut = steps.publish(run, source=self.source_connector(),
                            staging_retention_hours=self.staging_retention_hours)
        if isinstance(cut, UnchangedRun):
            return self.nothing_to_do(run, cut)
        self.lineage = lineage_of(lambda: cut_lineage(run.catalog, run.ledger, self.group.name, cut), self.task_id)
        context["ti"].xcom_push(key=XCOM_KEY, value=page_url(self.catalog_conn_id, self.group.name, cut.cut_id))
        self.emit_asset_events(context, cut.cut_id, str(cut.watermark))
        logger.info("group=%s W=%s cut=%d: published", self.group.name, cut.watermark, cut.cut_id)
        emit_freshness(run.ledger, self.group.name)
        return {"run_key": run.run_key, "cut_id": cut.cut_id, "watermark_lsn": str(cut.watermark),
                "members": sorted(cut.members)}

    def emit_asset_events(self, context: Context, cut_id: int, watermark: str) -> None:
        """One event per member table for this cut, unless an earlier try already emitted them."""
        recent = recent_inlet_events(context, self.member_assets[0], limit=20)
        if any((event.extra or {}).get("cut_id") == cut_id for event in recent):
            logger.info("group=%s cut=%d: Asset events were emitted before; not again", self.group.name, cut_id)
            return
        extra: dict[str, Any] = {"group": self.group.name, "cut_id": cut_id, "watermark_lsn": watermark}
        alias_events = context["outlet_events"][asset_alias(self.group.name)]
        for asset in self.member_assets:
            alias_events.add(asset, extra=extra)


def cut_lineage(catalog: Catalog, ledger: Ledger, group: str, cut: CutRecord) -> OperatorLineage:
    """Every member table of the cut as an output (its snapshot id and rows), and the cut as a run facet."""
    from airflow_provider_streambed.catalog import warehouse_of
    from airflow_provider_streambed.read import CutReader

    rows = CutReader(catalog, group, ledger).get(cut.cut_id).row_counts()
    outputs = [
        table_dataset(member.table_location, warehouse_of(catalog), member.table_identifier,
                      snapshot_id=member.snapshot_id, rows=rows.get(name))
        for name, member in sorted(cut.members.items())
    ]
    facet = StreambedRunFacet(group, cut.run_key, str(cut.watermark), cut.cut_id)
    return OperatorLineage(outputs=outputs, run_facets={"streambed": facet})
