"""Extra links from the tasks to the Streambed page: ``Cut`` on publish, ``Holdback`` on capture.

Airflow 3 builds a task's links on the api-server from XCom, so each task pushes the path of its
page (:data:`XCOM_KEY`) while it runs; a task that pushed none (failed early) shows no link.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseOperatorLink
from airflow.sdk.execution_time.xcom import XCom

#: The XCom key holding the path of the task's page.
XCOM_KEY = "streambed_page"


class _PageLink(BaseOperatorLink):
    """A link to the page path the task pushed under :data:`XCOM_KEY`."""

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        """The pushed path, or empty (no link) when the task pushed none."""
        return str(XCom.get_value(ti_key=ti_key, key=XCOM_KEY) or "")


class CutLink(_PageLink):
    """From ``publish_cut`` to its cut on the group's page."""

    name = "Cut"


class HoldbackLink(_PageLink):
    """From ``capture_watermark`` to the group's page."""

    name = "Holdback"
