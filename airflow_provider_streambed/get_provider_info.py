"""Provider metadata, found by Airflow through the ``apache_airflow_provider`` entry point."""

from __future__ import annotations

from typing import Any

_PACKAGE = "airflow_provider_streambed"


def get_provider_info() -> dict[str, Any]:
    """Describe this provider to Airflow's ``ProvidersManager``.

    The task group ``airflow_provider_streambed.task_group.StreambedRefreshGroup`` is not
    listed: the provider schema has no entry for task groups.
    """
    from airflow_provider_streambed import __version__

    return {
        "package-name": "airflow-provider-streambed",
        "name": "Streambed",
        "description": (
            "Refreshes a group of lakehouse (Iceberg) tables from PostgreSQL so that every "
            "published version of the group is one transaction-consistent cut of the source."
        ),
        "versions": [__version__],
        "integrations": [{"integration-name": "Streambed", "tags": ["software"]}],
        "hooks": [
            {
                "integration-name": "Streambed",
                "python-modules": [f"{_PACKAGE}.hooks.source", f"{_PACKAGE}.hooks.catalog"],
            }
        ],
        "operators": [
            {
                "integration-name": "Streambed",
                "python-modules": [
                    f"{_PACKAGE}.operators.capture",
                    f"{_PACKAGE}.operators.refresh",
                    f"{_PACKAGE}.operators.publish",
                    f"{_PACKAGE}.operators.retention",
                ],
            }
        ],
        "triggers": [
            {"integration-name": "Streambed", "python-modules": [f"{_PACKAGE}.triggers.changes"]},
        ],
        "connection-types": [
            {
                "connection-type": "postgres",
                "hook-class-name": f"{_PACKAGE}.hooks.source.StreambedSourceHook",
                "hook-name": "Streambed source (PostgreSQL)",
            },
            {
                "connection-type": "streambed_catalog",
                "hook-class-name": f"{_PACKAGE}.hooks.catalog.StreambedCatalogHook",
                "hook-name": "Streambed Iceberg SQL catalog",
            },
        ],
        "asset-uris": [{"schemes": ["streambed"], "handler": f"{_PACKAGE}.assets.sanitize_uri"}],
        "extra-links": [f"{_PACKAGE}.operators.links.CutLink", f"{_PACKAGE}.operators.links.HoldbackLink"],
        "plugins": [{"name": "streambed", "plugin-class": f"{_PACKAGE}.ui.plugin.StreambedPlugin"}],
    }
