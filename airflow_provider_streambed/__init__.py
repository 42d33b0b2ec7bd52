"""airflow-provider-streambed: transaction-consistent cuts of PostgreSQL tables into Iceberg.

The package root imports no Airflow, so a Spark driver without Airflow can import the
declarations. The Airflow face (``StreambedRefreshGroup``, operators, hooks) lives in
``task_group``, ``operators`` and ``hooks``.
"""

from __future__ import annotations

from airflow_provider_streambed.declarations import CutRetention, RefreshGroup
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.member_declarations import Member, Mirror, PythonMember, SqlMember

__version__ = "0.1.0"

__all__ = [
    "CutRetention",
    "Lsn",
    "Member",
    "Mirror",
    "PythonMember",
    "RefreshGroup",
    "SqlMember",
    "StreambedRefreshGroup",
    "__version__",
]


def __getattr__(name: str) -> object:
    """Export the Airflow face lazily: importing the package must not import Airflow."""
    if name == "StreambedRefreshGroup":
        from airflow_provider_streambed.task_group import StreambedRefreshGroup

        return StreambedRefreshGroup
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
