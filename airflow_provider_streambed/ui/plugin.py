"""The Airflow plugin of the provider (entry point ``airflow.plugins``): the Streambed page."""

from __future__ import annotations

from typing import Any

from airflow.plugins_manager import AirflowPlugin

from airflow_provider_streambed.ui.app import app
from airflow_provider_streambed.ui.page import URL_PREFIX


class StreambedPlugin(AirflowPlugin):
    """Mounts the Streambed page at ``/streambed`` and adds it to the UI's Browse menu."""

    name = "streambed"
    fastapi_apps: list[Any] = [{"app": app, "url_prefix": URL_PREFIX, "name": "Streambed"}]  # noqa: RUF012
    external_views: list[Any] = [  # noqa: RUF012  (declared so by AirflowPlugin)
        {"name": "Streambed", "href": f"{URL_PREFIX}/", "url_route": "streambed", "category": "Browse"},
    ]
