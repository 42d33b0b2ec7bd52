"""The run ledger: pinned watermarks per run and published cuts per group.

The ledger lives in the Iceberg ``SqlCatalog``'s own database (an SQLite file or a PostgreSQL
database), so a cut's ledger rows and the member tables' pointer updates can be written in one
database transaction. :mod:`.schema` holds the tables, :mod:`.runs` the runs, :mod:`.claims`
their serialisation per group, :mod:`.cuts` the published cuts, :mod:`.retention` their pins and
expiry; :class:`Ledger` reads and writes runs and cuts. Read and written by the worker's steps,
the command line and the Streambed page; never by Spark.
"""

from __future__ import annotations

from airflow_provider_streambed.ledger.cuts import CutMember, CutRecord, cut_tag
from airflow_provider_streambed.ledger.retention import CutHead, RetentionLedger
from airflow_provider_streambed.ledger.runs import RunLedger, RunRecord, RunState
from airflow_provider_streambed.ledger.schema import cut_members_table, cuts_table, runs_table

__all__ = [
    "CutHead",
    "CutMember",
    "CutRecord",
    "Ledger",
    "RunRecord",
    "RunState",
    "cut_members_table",
    "cut_tag",
    "cuts_table",
    "runs_table",
]


class Ledger(RunLedger, RetentionLedger):
    """Reads and writes the run ledger in a catalog database.

    Args:
        engine: an SQLAlchemy engine on the catalog database (the one pyiceberg's ``SqlCatalog``
            uses, e.g. ``catalog.engine``), or a database URI.
    """
