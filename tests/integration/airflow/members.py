"""PythonMember functions of the Airflow end-to-end tests (imported by the Spark driver)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

FLAKY_FLAG = "STREAMBED_AIRFLOW_FLAKY_FLAG"


def flaky_counts(spark: Any, inputs: dict[str, Any], cut: Any) -> Any:
    """Transfers per sender; fails while the flag file named by ``$STREAMBED_AIRFLOW_FLAKY_FLAG`` is absent."""
    if not Path(os.environ[FLAKY_FLAG]).exists():
        raise RuntimeError("flaky member: flag file absent, failing on purpose")
    return inputs["transfers"].groupBy("src").count()
