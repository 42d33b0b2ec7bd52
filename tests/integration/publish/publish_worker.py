"""A publish in its own process, stopped between the metadata write and the pointer commit.

Usage: ``python -m tests.integration.publish.publish_worker <props json> <run key> <ready file>``.
Inside the publish transaction (pointers swapped, not committed) it creates ``<ready file>``
and sleeps, so the test can kill it with SIGKILL at exactly that point.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from sqlalchemy import Connection

from airflow_provider_streambed.catalog import open_catalog
from airflow_provider_streambed.ledger import Ledger
from airflow_provider_streambed.publish import publish_cut
from airflow_provider_streambed.staging import staging_root
from airflow_provider_streambed.staging.members import read_member_manifest
from tests.integration.publish.helpers import make_group


def main() -> None:
    props, run_key, ready = json.loads(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
    catalog = open_catalog(props)
    group = make_group()
    root = staging_root(props["warehouse"], group.name, run_key)
    manifests = {m.name: read_member_manifest(root, m.name) for m in group.members}

    def stop_here(connection: Connection) -> None:
        ready.write_text("in transaction")
        time.sleep(600)

    publish_cut(catalog, Ledger(catalog.engine), group, run_key, manifests, before_commit=stop_here)  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
