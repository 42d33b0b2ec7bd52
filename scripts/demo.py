"""`make demo`: start a throwaway PostgreSQL cluster and show the example refresh group."""

from __future__ import annotations

import sys
from pathlib import Path

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "dags"))

from example_bank import bank

from airflow_provider_streambed.testing.postgres import ThrowawayCluster


def main() -> None:
    """Start the cluster, print its logical-decoding settings and the declared group."""
    with ThrowawayCluster() as cluster, psycopg.connect(cluster.dsn()) as conn:
        version, wal_level = conn.execute("SELECT version(), current_setting('wal_level')").fetchone()
        print(f"PostgreSQL cluster on 127.0.0.1:{cluster.port}: {version.split(',')[0]}, wal_level={wal_level}")
        print(f"refresh group {bank.name!r}: source connection {bank.source_conn_id!r}, "
              f"catalog {bank.catalog_conn_id!r}, namespace {bank.namespace!r}")
        for member in bank.topological_members():
            sources = ", ".join(member.sources) or getattr(member, "qualified_table", "")
            print(f"  {type(member).__name__:<8} {member.name:<10} <- {sources}")
    print("cluster stopped and removed")


if __name__ == "__main__":
    main()
