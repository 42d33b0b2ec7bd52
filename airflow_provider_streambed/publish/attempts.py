"""Publish attempt records, so metadata files of an attempt that never committed get deleted.

Before a publish (or a cut expiry) writes any Iceberg metadata it records the attempt under
``<warehouse>/_streambed/<group>/_attempts/<attempt id>.json``: per member table its current
metadata location (the compare-and-swap base), the metadata file it is about to write and the
commit UUID that names its manifests, and the cuts an expiry removes. If the process dies
between the metadata write and the pointer commit, or between the commit and the removal of the
record, the record stays. An attempt committed when the ledger holds its outcome (the run's cut
names its metadata files; an expiry's cuts expired) or its new files are the current pointers:
only its record is removed (its files are in use). Otherwise it is dead once any of its tables' pointers
has moved away from its base: its compare-and-swap can then never succeed, and its files are
deleted. Attempts still based on the current pointers are left alone (they may be running).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from pyarrow import fs
from pyiceberg.catalog.sql import SqlCatalog

from airflow_provider_streambed import storage
from airflow_provider_streambed.ledger import Ledger
from airflow_provider_streambed.publish.iceberg.pointers import current_pointers
from airflow_provider_streambed.publish.members import MemberPlan
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
    expires: tuple[int, ...] = ()

    @classmethod
    def start(
        cls, warehouse: str, group: str, run_key: str, namespace: str, plans: Iterable[MemberPlan],
        expires: tuple[int, ...] = (),
    ) -> Attempt:
        """Record a new attempt before any of its metadata files is written.

        Args:
            warehouse: the warehouse URI.
            group: the group name.
            run_key: the run that publishes (for a standalone expiry: a name of the expiry).
            namespace: the member tables' namespace.
            plans: the member tables and their next metadata files.
            expires: for a standalone expiry, the cuts it expires (its outcome in the ledger).
        """
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
            expires=expires,
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
            "expires": list(self.expires),
            "started_at": dt.datetime.now(dt.UTC).isoformat(),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Attempt:
        """Inverse of :meth:`to_dict`."""
        return cls(data["attempt_id"], data["group"], data["run_key"], data["namespace"], data["tables"],
                   tuple(data.get("expires", ())))

    def recorded(self, ledger: Ledger) -> bool:
        """Whether the ledger holds this attempt's outcome: its run's cut names one of its metadata
        files, or, for a standalone expiry, its cuts expired.

        When the cut has expired since (its member rows are gone) or another expiry removed the
        same cuts, the answer is yes: the files of the losing attempt then stay for the garbage
        collection, which deletes whatever nothing references (a retention is on in both cases).
        """
        if self.expires:
            return ledger.all_expired(self.group, self.expires)
        cut = ledger.cut_for_run(self.group, self.run_key)
        if cut is None:
            return False
        written = {table["new"] for table in self.tables.values()}
        return cut.expired_at is not None or any(m.metadata_location in written for m in cut.members.values())

    def delete_files(self) -> int:
        """Delete every metadata file this attempt wrote; returns how many were deleted."""
        deleted = 0
        for table in self.tables.values():
            metadata_dir = str(table["metadata_dir"])
            filesystem, path = storage.filesystem(metadata_dir)
            selector = fs.FileSelector(path, allow_not_found=True)
            for info in filesystem.get_file_info(selector):
                if self.attempt_id in info.base_name or f"{metadata_dir}/{info.base_name}" == table["new"]:
                    with contextlib.suppress(FileNotFoundError):  # a concurrent sweep deleted it first
                        filesystem.delete_file(info.path)
                        deleted += 1
        return deleted

    def forget(self, warehouse: str) -> None:
        """Delete this attempt's record."""
        filesystem, path = storage.filesystem(self.uri(warehouse))
        with contextlib.suppress(FileNotFoundError):  # absent, or a concurrent sweep deleted it first
            filesystem.delete_file(path)


def attempt_state(attempt: Attempt, pointers: dict[str, str], recorded: bool) -> str:
    """``committed``, ``dead`` (can never commit) or ``open`` (may still commit).

    ``recorded``: the ledger holds the attempt's outcome (:meth:`Attempt.recorded`); a committed
    attempt whose tables moved on since is known by it alone.
    """
    if recorded or any(pointers.get(name) == table["new"] for name, table in attempt.tables.items()):
        return "committed"
    if any(pointers.get(name) != table["base"] for name, table in attempt.tables.items()):
        return "dead"
    return "open"


def abandon(catalog: SqlCatalog, ledger: Ledger, warehouse: str, attempt: Attempt) -> None:
    """Clean up after an attempt of this process whose transaction rolled back (or seemed to)."""
    try:
        pointers = current_pointers(catalog, attempt.namespace, attempt.tables)
        recorded = attempt.recorded(ledger)
    except Exception:  # the outcome is unknown without the catalog: a later sweep decides
        logger.warning("group=%s: publish attempt %s left for a later sweep", attempt.group, attempt.attempt_id)
        return
    if attempt_state(attempt, pointers, recorded) == "committed":
        attempt.forget(warehouse)
        return
    deleted = attempt.delete_files()
    attempt.forget(warehouse)
    logger.info(
        "group=%s: rolled back attempt %s, deleted %d metadata files", attempt.group, attempt.attempt_id, deleted
    )


@contextmanager
def settled(catalog: SqlCatalog, ledger: Ledger, warehouse: str, attempt: Attempt) -> Iterator[None]:
    """Run an attempt's build and commit: on any failure clean up after it (:func:`abandon`) and
    re-raise, on success forget its record."""
    try:
        yield
    except BaseException:
        abandon(catalog, ledger, warehouse, attempt)
        raise
    attempt.forget(warehouse)


def sweep_attempts(catalog: SqlCatalog, ledger: Ledger, warehouse: str, group: str) -> int:
    """Delete the files of every dead attempt of ``group`` and the records of committed ones.

    Returns:
        The number of orphaned metadata files deleted.
    """
    directory = join(group_staging_dir(warehouse, group), ATTEMPTS_DIR)
    filesystem, path = storage.filesystem(directory)
    deleted = 0
    for info in filesystem.get_file_info(fs.FileSelector(path, allow_not_found=True)):
        if not info.base_name.endswith(".json"):
            continue
        data = read_json(join(directory, info.base_name))
        if data is None:
            continue
        attempt = Attempt.from_dict(data)
        state = attempt_state(attempt, current_pointers(catalog, attempt.namespace, attempt.tables),
                              attempt.recorded(ledger))
        if state == "dead":
            deleted += attempt.delete_files()
        if state != "open":
            attempt.forget(warehouse)
    if deleted:
        logger.info("group=%s: deleted %d orphaned metadata files of failed publish attempts", group, deleted)
    return deleted
