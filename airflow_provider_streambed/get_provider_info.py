"""Provider metadata, found by Airflow through the ``apache_airflow_provider`` entry point."""

from __future__ import annotations

from typing import Any


def get_provider_info() -> dict[str, Any]:
    """Describe this provider to Airflow's ``ProvidersManager``."""
    from airflow_provider_streambed import __version__

    return {
        "package-name": "airflow-provider-streambed",
        "name": "Streambed",
        "description": (
            "Refreshes a group of lakehouse (Iceberg) tables from PostgreSQL so that every "
            "published version of the group is one transaction-consistent cut of the source."
        ),
        "versions": [__version__],
    }
