"""Publish attempt records, so metadata files of an attempt that never committed get deleted.

Before a publish writes any Iceberg metadata it records the attempt under
``<warehouse>/_streambed/<group>/_attempts/<attempt id>.json``: per member table its current
metadata location (the compare-and-swap base), the metadata file it is about to write and the
commit UUID that names its manifests. If the process dies between the metadata write and the
pointer commit, the record stays. An attempt is dead once any of its tables' pointers has moved
away from its base to something else than its own new file: its compare-and-swap can then never
succeed, and its files are deleted. An attempt whose new files are the current pointers
committed; only its record is removed. Attempts still based on the current pointers are left
alone (they may be running).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pyarrow import fs
from pyiceberg.catalog.sql import SqlCatalog

from airflow_provider_streambed.publish.tables import MemberPlan, current_pointers
from airflow_provider_streambed.staging import group_staging_dir, join, read_json, write_json

logger = logging.getLogger(__name__)

ATTEMPTS_DIR = "_attempts"


@dataclass(frozen=True, slots=True)
class Attempt:
    """One publish attempt: its id (also the commit UUID of its manifests) and its tables."""

    attempt_id: str
    group: str
    run_key: str
    namespace: str
    tables: dict[str, dict[str, str | None]]

    @classmethod
    def start(cls, warehouse: str, group: str, run_key: str, namespace: str, plans: Iterable[MemberPlan]) -> Attempt:
        """Record a new attempt before any of its metadata files is written."""
        attempt = cls(
            attempt_id=str(uuid.uuid4()),
            group=group,
            run_key=run_key,
            namespace=namespace,
            tables={
                plan.identifier[1]: {
                    "base": plan.base_location,
                    "new": plan.new_location,
                    "metadata_dir": plan.new_location.rsplit("/", 1)[0],
                }
                for plan in plans
            },
        )
        write_json(attempt.uri(warehouse), attempt.to_dict())
        return attempt

    @property
    def commit_uuid(self) -> uuid.UUID:
        """The UUID in the names of this attempt's manifests and manifest lists."""
        return uuid.UUID(self.attempt_id)

    def uri(self, warehouse: str) -> str:
        """Where this attempt's record lives."""
        return join(group_staging_dir(warehouse, self.group), ATTEMPTS_DIR, f"{self.attempt_id}.json")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "attempt_id": self.attempt_id,
            "group": self.group,
            "run_key": self.run_key,
            "namespace": self.namespace,
            "tables": self.tables,
            "started_at": dt.datetime.now(dt.UTC).isoformat(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Attempt:
        """Inverse of :meth:`to_dict`."""
        return cls(data["attempt_id"], data["group"], data["run_key"], data["namespace"], data["tables"])

    def delete_files(self) -> int:
        """Delete every metadata file this attempt wrote; returns how many were deleted."""
        deleted = 0
        for table in self.tables.values():
            metadata_dir = str(table["metadata_dir"])
            filesystem, path = fs.FileSystem.from_uri(metadata_dir)
            selector = fs.FileSelector(path, allow_not_found=True)
            for info in filesystem.get_file_info(selector):
                if self.attempt_id in info.base_name or f"{metadata_dir}/{info.base_name}" == table["new"]:
                    with contextlib.suppress(FileNotFoundError):  # a concurrent sweep deleted it first
                        filesystem.delete_file(info.path)
                        deleted += 1
        return deleted

    def forget(self, warehouse: str) -> None:
        """Delete this attempt's record."""
        filesystem, path = fs.FileSystem.from_uri(self.uri(warehouse))
        with contextlib.suppress(FileNotFoundError):  # absent, or a concurrent sweep deleted it first
            filesystem.delete_file(path)


def attempt_state(attempt: Attempt, pointers: dict[str, str]) -> str:
    """``committed``, ``dead`` (can never commit) or ``open`` (may still commit)."""
    if any(pointers.get(name) == table["new"] for name, table in attempt.tables.items()):
        return "committed"
    if any(pointers.get(name) != table["base"] for name, table in attempt.tables.items()):
        return "dead"
    return "open"


def abandon(catalog: SqlCatalog, warehouse: str, attempt: Attempt) -> None:
    """Clean up after an attempt of this process whose transaction rolled back."""
    try:
        pointers = current_pointers(catalog, attempt.namespace, attempt.tables)
    except Exception:  # the outcome is unknown without the catalog: a later sweep decides
        logger.warning("group=%s: publish attempt %s left for a later sweep", attempt.group, attempt.attempt_id)
        return
    if attempt_state(attempt, pointers) == "committed":
        attempt.forget(warehouse)
        return
    deleted = attempt.delete_files()
    attempt.forget(warehouse)
    logger.info(
        "group=%s: rolled back attempt %s, deleted %d metadata files", attempt.group, attempt.attempt_id, deleted
    )


def sweep_attempts(catalog: SqlCatalog, warehouse: str, group: str) -> int:
    """Delete the files of every dead attempt of ``group`` and the records of committed ones.

    Returns:
        The number of orphaned metadata files deleted.
    """
    directory = join(group_staging_dir(warehouse, group), ATTEMPTS_DIR)
    filesystem, path = fs.FileSystem.from_uri(directory)
    deleted = 0
    for info in filesystem.get_file_info(fs.FileSelector(path, allow_not_found=True)):
        if not info.base_name.endswith(".json"):
            continue
        data = read_json(join(directory, info.base_name))
        if data is None:
            continue
        attempt = Attempt.from_dict(data)
        state = attempt_state(attempt, current_pointers(catalog, attempt.namespace, attempt.tables))
        if state == "dead":
            deleted += attempt.delete_files()
        if state != "open":
            attempt.forget(warehouse)
    if deleted:
        logger.info("group=%s: deleted %d orphaned metadata files of failed publish attempts", group, deleted)
    return deleted
