"""Run keys: the stable name of one refresh run, used in the ledger and in staging paths."""

from __future__ import annotations

import hashlib
import re

from airflow_provider_streambed.exceptions import ConfigurationError

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def make_run_key(dag_id: str, run_id: str) -> str:
    """The run key of an Airflow DAG run: path-safe, readable and unique per ``(dag_id, run_id)``.

    Characters that are unsafe in URIs and file names are replaced by ``_``; a short hash of the
    exact pair keeps keys distinct when two runs differ only in such characters, e.g.
    ``("bank", "manual__2026-11-23T08:00:00+00:00")`` gives
    ``"bank.manual__2026-11-23T08_00_00_00_00-<10 hex digits>"``.

    Raises:
        ConfigurationError: ``dag_id`` or ``run_id`` is empty.
    """
    if not dag_id or not run_id:
        raise ConfigurationError(f"run key needs a dag_id and a run_id, got {dag_id!r} and {run_id!r}")
    digest = hashlib.sha256(f"{dag_id}\0{run_id}".encode()).hexdigest()[:10]
    readable = _UNSAFE.sub("_", f"{dag_id}.{run_id}")[:120]
    return f"{readable}-{digest}"
