"""Applying a group's retention in its own process, killed (SIGKILL, by itself) at a chosen point.

Usage: ``python -m tests.integration.publish.retention_worker <props json> <group json> <point>``
where ``<point>`` is ``expiry-commit`` (the expiry's metadata files are written, the pointers
not moved) or ``gc-delete`` (half of the due garbage files are deleted). Exits 3 if the point is
never reached.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Mapping

from pyarrow import fs
from pyiceberg.catalog.sql import SqlCatalog

from airflow_provider_streambed.catalog import ledger_of, open_catalog
from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.retention import expiry, gc
from airflow_provider_streambed.retention.maintenance import apply_retention


def die(*_: object) -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def main() -> None:
    props, group, point = json.loads(sys.argv[1]), RefreshGroup.from_dict(json.loads(sys.argv[2])), sys.argv[3]
    catalog = open_catalog(props)
    assert isinstance(catalog, SqlCatalog)
    if point == "expiry-commit":
        expiry.swap_pointers = die  # type: ignore[assignment]  # the commit's first step
    else:
        delete = gc._delete

        def half(paths: list[str], listed: Mapping[str, tuple[fs.FileSystem, fs.FileInfo]]) -> None:
            delete(paths[: len(paths) // 2], listed)
            die()

        gc._delete = half  # type: ignore[assignment]
    apply_retention(catalog, ledger_of(catalog), group)
    sys.exit(3)


if __name__ == "__main__":
    main()
