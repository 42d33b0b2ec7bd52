"""The FastAPI app of the Streambed page, mounted by Airflow's api-server at ``/streambed``.

It reads the ledgers of the catalog connections :mod:`.connections` finds. Every route needs a
logged-in user who may read DAGs, as Airflow's own auth manager decides (``requires_access_dag``);
without a token the answer is 401. An error is a page of its own, in the page's look. The page
never writes.
"""

from __future__ import annotations

import logging

from airflow.api_fastapi.core_api.security import requires_access_dag
from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse
from pyiceberg.catalog import Catalog

from airflow_provider_streambed.hooks.catalog import StreambedCatalogHook
from airflow_provider_streambed.ledger import CutRecord, Ledger
from airflow_provider_streambed.read import snapshot_rows
from airflow_provider_streambed.ui.connections import catalog_connections
from airflow_provider_streambed.ui.page import CutRow, GroupSummary, render_error, render_group, render_index

logger = logging.getLogger(__name__)

#: The newest cuts a group's page shows.
MAX_CUTS = 50

app = FastAPI(title="Streambed", docs_url=None, redoc_url=None, openapi_url=None)
READ_DAGS = [Depends(requires_access_dag("GET"))]


@app.exception_handler(HTTPException)
def error_page(request: Request, error: HTTPException) -> HTMLResponse:
    """An error (a group or connection not found, a user not logged in) as a page, not JSON."""
    return HTMLResponse(render_error(error.status_code, str(error.detail)), status_code=error.status_code,
                        headers=error.headers)


@app.get("/", response_class=HTMLResponse, dependencies=READ_DAGS)
def index() -> str:
    """Every group of every configured catalog, with its newest cut."""
    groups, problems = [], []
    connections = catalog_connections()
    for conn_id in connections.conn_ids:
        try:
            _, ledger = StreambedCatalogHook(conn_id).get_catalog_and_ledger(create=False)
            for name in ledger.groups():
                last = ledger.last_cut(name)
                groups.append(GroupSummary(name, conn_id, last.cut_id if last else None,
                                           last.published_at if last else None))
        except Exception as error:  # one unreachable catalog must not hide the others
            logger.warning("streambed page: catalog connection %s: %s", conn_id, error)
            problems.append(f"catalog connection {conn_id!r} cannot be read: {type(error).__name__}")
    return render_index(groups, problems, connections.unlisted)


@app.get("/groups/{conn_id}/{group}", response_class=HTMLResponse, dependencies=READ_DAGS)
def group_page(conn_id: str, group: str, cut: int | None = None) -> str:
    """A group's last capture with its holdback figures, its newest cuts (rows per member, pins) and
    its freshness plot; ``cut`` is highlighted."""
    if conn_id not in catalog_connections().conn_ids:
        raise HTTPException(status_code=404, detail=f"catalog connection {conn_id!r} is not shown here")
    catalog, ledger = StreambedCatalogHook(conn_id).get_catalog_and_ledger(create=False)
    records = ledger.list_cuts(group)[-MAX_CUTS:]
    if not records:
        raise HTTPException(status_code=404, detail=f"group {group!r} has no cut in {conn_id!r}")
    last_run = next(iter(ledger.list_runs(group, limit=1)), None)
    return render_group(group, conn_id, cut_rows(catalog, ledger, records), last_run, highlight=cut)


def cut_rows(catalog: Catalog, ledger: Ledger, records: list[CutRecord]) -> list[CutRow]:
    """The page's rows: rows per member from the snapshot summaries (each table loaded once), and
    each cut's freshness: the lag from the commit of the newest source transaction it holds to its
    publish (from its run's pin, W's time, when its capture kept no transaction)."""
    tables = {}
    rows = []
    for record in records:
        counts = {}
        for name, member in record.members.items():
            if member.table_identifier not in tables:
                tables[member.table_identifier] = catalog.load_table(member.table_identifier)
            counts[name] = snapshot_rows(tables[member.table_identifier], member.snapshot_id)
        run = ledger.get_run(record.group, record.run_key)
        newest = None if run is None else run.newest_commit_at or run.pinned_at
        lag = None if newest is None else (record.published_at - newest).total_seconds()
        rows.append(CutRow(record.cut_id, str(record.watermark), record.published_at, record.run_key, counts,
                           record.pinned_at is not None, lag))
    return rows
