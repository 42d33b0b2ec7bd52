"""The ledger's side of cut retention: pinning cuts, listing what may expire, expiring cuts.

Expiring a cut moves it from ``streambed_cuts`` (and its ``streambed_cut_members`` rows) to a
one-row tombstone in ``streambed_expired_cuts``, inside the caller's transaction: the commit that
also removes the cut's tags and snapshots from the member tables (:mod:`airflow_provider_streambed.retention`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from sqlalchemy import Connection, delete, func, insert, literal, select, update

from airflow_provider_streambed.exceptions import LedgerError
from airflow_provider_streambed.ledger.cuts import CutLedger, CutRecord
from airflow_provider_streambed.ledger.schema import as_utc, cut_members_table, cuts_table, expired_cuts_table, now


@dataclass(frozen=True, slots=True)
class CutHead:
    """What retention needs to know of a published cut: its number, age and pin."""

    cut_id: int
    published_at: dt.datetime
    pinned: bool


class RetentionLedger(CutLedger):
    """Pins and expiry of a group's cuts."""

    def pin_cut(self, group: str, cut_id: int, pinned: bool = True) -> CutRecord:
        """Pin cut ``cut_id`` (kept forever, whatever the retention) or, with ``pinned=False``, unpin it.

        Raises:
            CutExpiredError: the cut expired already.
            CutNotFoundError: no such cut.
        """
        statement = (
            update(cuts_table)
            .where(cuts_table.c.group_name == group, cuts_table.c.cut_id == cut_id)
            .values(pinned_at=now() if pinned else None)
        )
        with self.begin() as connection:
            if connection.execute(statement).rowcount == 0:
                self.get_cut(group, cut_id, connection)  # raises, saying whether it expired
            return self.get_cut(group, cut_id, connection)

    def cut_heads(self, group: str, connection: Connection | None = None) -> list[CutHead]:
        """Every cut of ``group``, oldest first, without its members."""
        query = (
            select(cuts_table.c.cut_id, cuts_table.c.published_at, cuts_table.c.pinned_at)
            .where(cuts_table.c.group_name == group)
            .order_by(cuts_table.c.cut_id)
        )
        with self.connection(connection) as conn:
            return [
                CutHead(int(row.cut_id), as_utc(row.published_at), row.pinned_at is not None)
                for row in conn.execute(query)
            ]

    def all_expired(self, group: str, cut_ids: Collection[int]) -> bool:
        """Whether every cut in ``cut_ids`` of ``group`` has expired."""
        expired = expired_cuts_table.c
        query = select(func.count()).where(expired.group_name == group, expired.cut_id.in_(list(cut_ids)))
        with self.engine.connect() as conn:
            return conn.execute(query).scalar_one() == len(set(cut_ids))

    def cuts_by_id(self, group: str, cut_ids: Collection[int]) -> dict[int, CutRecord]:
        """The cuts ``cut_ids`` of ``group`` with their members (missing ones are left out)."""
        return {record.cut_id: record for record in self._cuts(group, cuts_table.c.cut_id.in_(list(cut_ids)), None)}

    def snapshots_in_use(
        self, group: str, snapshots: Mapping[str, Collection[int]], excluding: Collection[int]
    ) -> dict[str, set[int]]:
        """Of ``snapshots`` (per table identifier), those a cut not in ``excluding`` still uses."""
        members = cut_members_table.c
        wanted = {snapshot for ids in snapshots.values() for snapshot in ids}
        if not wanted:
            return {}
        query = select(members.table_identifier, members.snapshot_id).where(
            members.group_name == group,
            members.cut_id.not_in(list(excluding)),
            members.snapshot_id.in_(list(wanted)),
        )
        used: dict[str, set[int]] = {}
        with self.engine.connect() as conn:
            for row in conn.execute(query):
                if int(row.snapshot_id) in snapshots.get(row.table_identifier, ()):
                    used.setdefault(row.table_identifier, set()).add(int(row.snapshot_id))
        return used

    def expire_cuts(self, connection: Connection, group: str, cut_ids: Collection[int]) -> None:
        """Replace the cuts ``cut_ids`` by tombstones inside the caller's transaction.

        The cut rows are locked first (``SELECT ... FOR UPDATE`` on PostgreSQL; SQLite's writer
        lock is already held), so a concurrent pin either lands before (and this fails) or waits
        and then finds the cut expired.

        Raises:
            LedgerError: a cut was pinned or expired meanwhile (nothing was changed).
        """
        if not cut_ids:
            return
        ids = sorted(cut_ids)
        mine = (cuts_table.c.group_name == group) & cuts_table.c.cut_id.in_(ids)
        rows = connection.execute(
            select(cuts_table.c.cut_id, cuts_table.c.pinned_at).where(mine).with_for_update()
        ).all()
        missing = set(ids) - {int(row.cut_id) for row in rows}
        pinned = sorted(int(row.cut_id) for row in rows if row.pinned_at is not None)
        if missing or pinned:
            what = f"cuts {sorted(missing)} expired" if missing else f"cuts {pinned} were pinned"
            raise LedgerError(f"group {group!r}: {what} meanwhile; nothing was expired")
        expired = cuts_table.c
        connection.execute(
            insert(expired_cuts_table).from_select(
                ["group_name", "cut_id", "watermark", "run_key", "published_at", "expired_at"],
                select(expired.group_name, expired.cut_id, expired.watermark, expired.run_key, expired.published_at,
                       literal(now(), expired_cuts_table.c.expired_at.type)).where(mine),
            )
        )
        members = cut_members_table.c
        connection.execute(delete(cut_members_table).where(members.group_name == group, members.cut_id.in_(ids)))
        connection.execute(delete(cuts_table).where(mine))
