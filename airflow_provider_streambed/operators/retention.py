"""``ExpireCutsOperator``: apply a group's cut retention from a maintenance DAG.

Publish already applies the retention after every cut; this operator is for groups that publish
rarely (a backlog of due cuts, files waiting for ``delete_files_after``) or for a dry run that
shows what would go. Its XCom is the report's summary.
"""

from __future__ import annotations

import logging
from typing import Any

from airflow.sdk import BaseOperator, Context
from pyiceberg.catalog.sql import SqlCatalog

from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.exceptions import CatalogCapabilityError
from airflow_provider_streambed.hooks.catalog import StreambedCatalogHook

logger = logging.getLogger(__name__)


class ExpireCutsOperator(BaseOperator):
    """Expire the cuts ``group``'s retention lets go and delete the files nothing needs any more.

    Args:
        group: the refresh-group declaration (it must declare a ``retention``).
        catalog_conn_id: the catalog connection (default: the group's ``catalog_conn_id``).
        dry_run: report what would go, change nothing.
    """

    ui_color = "#e8e1f3"

    def __init__(
        self, *, group: RefreshGroup, catalog_conn_id: str | None = None, dry_run: bool = False, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.group = group
        self.catalog_conn_id = catalog_conn_id or group.catalog_conn_id
        self.report_only = dry_run  # BaseOperator.dry_run is a method

    def execute(self, context: Context) -> dict[str, Any]:
        """Apply the retention; returns the report's summary (cuts expired, files deleted and pending)."""
        from airflow_provider_streambed.retention.maintenance import apply_retention

        catalog, ledger = StreambedCatalogHook(self.catalog_conn_id).get_catalog_and_ledger()
        if not isinstance(catalog, SqlCatalog):
            raise CatalogCapabilityError(f"group {self.group.name!r}: cut expiry needs a SQL catalog")
        summary = apply_retention(catalog, ledger, self.group, dry_run=self.report_only).summary()
        logger.info("group=%s: retention %s: %s", self.group.name, "dry run" if self.report_only else "applied",
                    summary)
        return {"group": self.group.name, "dry_run": self.report_only, **summary}
