"""Reading the provider's own Spark settings (``spark.streambed.*``) from wherever they are set.

The settings are declared where they act (``duckdb_merge.IN_PROCESS_MERGE_CONF``,
``sources.INCREMENTAL_CONF``); how a setting is read, and what turns a switch off, is here.
"""

from __future__ import annotations

from typing import Protocol


class Settings(Protocol):
    """Spark configuration to read a setting from: a session's (``spark.conf``) or the refresh's
    own (a ``dict``, in the refresh task before any Spark application)."""

    def get(self, key: str, default: str, /) -> str | None: ...


def switched_on(settings: Settings, key: str) -> bool:
    """Whether the on/off setting ``key`` is on: it is unless set to ``false`` (any case)."""
    return str(settings.get(key, "true")).strip().lower() != "false"
