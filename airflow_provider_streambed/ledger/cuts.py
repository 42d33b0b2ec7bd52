"""Published cuts in the ledger: recording a cut with its members, and reading cuts back.

A cut that expired under the group's retention is gone from these tables; reading it raises
:class:`~airflow_provider_streambed.exceptions.CutExpiredError` with the time it expired. Asking
which cut a run published still finds an expired cut (without members), so a cleared task of a
run whose cut expired knows the run published.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass

from sqlalchemy import ColumnElement, Connection, RowMapping, func, insert, select

from airflow_provider_streambed.exceptions import CutExpiredError, CutNotFoundError, LedgerError
from airflow_provider_streambed.ledger.database import LedgerDatabase
from airflow_provider_streambed.ledger.schema import as_utc, cut_members_table, cuts_table, expired_cuts_table, now
from airflow_provider_streambed.lsn import Lsn


def cut_tag(group: str, cut_id: int) -> str:
    """The Iceberg tag of a member snapshot in cut ``cut_id``: ``<group>-cut-<k>``."""
    return f"{group}-cut-{cut_id}"


@dataclass(frozen=True, slots=True)
class CutMember:
    """One member table's snapshot in a cut."""

    member: str
    table_identifier: str
    snapshot_id: int
    metadata_location: str

    @property
    def table_location(self) -> str:
        """The table's location: its metadata file's, less ``/metadata/<file>``."""
        return self.metadata_location.rsplit("/", 2)[0]


@dataclass(frozen=True, slots=True)
class CutRecord:
    """A published cut of a group: its number, watermark and member snapshots."""

    group: str
    cut_id: int
    watermark: Lsn
    prev_watermark: Lsn | None
    run_key: str
    published_at: dt.datetime
    members: Mapping[str, CutMember]
    pinned_at: dt.datetime | None = None
    expired_at: dt.datetime | None = None


class CutLedger(LedgerDatabase):
    """The ledger's cuts: numbered per group, each with its members' snapshots."""

    def record_cut(
        self,
        connection: Connection,
        group: str,
        run_key: str,
        watermark: Lsn,
        members: Mapping[str, CutMember],
    ) -> CutRecord:
        """Insert the next cut of ``group`` inside the caller's transaction.

        The caller commits it together with the member tables' pointer updates. The unique keys
        make a concurrent publisher of the same run or watermark fail with ``IntegrityError``
        at insert or commit time, so one run never yields two cuts.

        Raises:
            LedgerError: ``watermark`` does not exceed the group's last cut.
        """
        last = self.last_cut(group, connection)
        if last is not None and watermark <= last.watermark:
            raise LedgerError(
                f"group {group!r}: watermark {watermark} must be greater than cut {last.cut_id}'s {last.watermark}"
            )
        record = CutRecord(
            group=group,
            cut_id=1 if last is None else last.cut_id + 1,
            watermark=watermark,
            prev_watermark=None if last is None else last.watermark,
            run_key=run_key,
            published_at=now(),
            members=dict(members),
        )
        connection.execute(
            insert(cuts_table).values(
                group_name=group,
                cut_id=record.cut_id,
                watermark=watermark.value,
                prev_watermark=None if record.prev_watermark is None else record.prev_watermark.value,
                run_key=run_key,
                published_at=record.published_at,
            )
        )
        if members:
            connection.execute(
                insert(cut_members_table),
                [
                    {
                        "group_name": group,
                        "cut_id": record.cut_id,
                        "member": m.member,
                        "table_identifier": m.table_identifier,
                        "snapshot_id": m.snapshot_id,
                        "metadata_location": m.metadata_location,
                    }
                    for m in members.values()
                ],
            )
        return record

    def last_cut(self, group: str, connection: Connection | None = None) -> CutRecord | None:
        """The group's newest cut, or ``None`` before the first publish."""
        newest = select(func.max(cuts_table.c.cut_id)).where(cuts_table.c.group_name == group).scalar_subquery()
        found = self._cuts(group, cuts_table.c.cut_id == newest, connection)
        return found[0] if found else None

    def get_cut(
        self, group: str, cut_id: int, connection: Connection | None = None, *, include_expired: bool = False
    ) -> CutRecord:
        """Cut ``cut_id`` of ``group``; with ``include_expired``, an expired cut too (without members).

        Raises:
            CutExpiredError: the cut expired under the group's retention (and not ``include_expired``).
            CutNotFoundError: no such cut.
        """
        found = self._cuts(group, cuts_table.c.cut_id == cut_id, connection)
        if not found and include_expired:
            found = self._expired(group, expired_cuts_table.c.cut_id == cut_id, connection)
        if not found:
            self._raise_expired(group, expired_cuts_table.c.cut_id == cut_id, "", connection)
            raise CutNotFoundError(f"group {group!r} has no cut {cut_id}")
        return found[0]

    def cut_for_run(self, group: str, run_key: str, connection: Connection | None = None) -> CutRecord | None:
        """The cut a run published (an expired one without members, ``expired_at`` set), or ``None``
        if it has not published."""
        found = self._cuts(group, cuts_table.c.run_key == run_key, connection)
        if not found:
            found = self._expired(group, expired_cuts_table.c.run_key == run_key, connection)
        return found[0] if found else None

    def cut_before(self, group: str, cut_id: int, connection: Connection | None = None) -> CutRecord | None:
        """The newest kept cut older than cut ``cut_id``, or ``None``."""
        newest = (
            select(func.max(cuts_table.c.cut_id))
            .where(cuts_table.c.group_name == group, cuts_table.c.cut_id < cut_id)
            .scalar_subquery()
        )
        found = self._cuts(group, cuts_table.c.cut_id == newest, connection)
        return found[0] if found else None

    def cut_as_of(self, group: str, lsn: Lsn, connection: Connection | None = None) -> CutRecord:
        """The newest cut whose watermark is at most ``lsn``.

        Raises:
            CutExpiredError: that cut expired under the group's retention.
            CutNotFoundError: every cut is newer than ``lsn``, or there is none.
        """
        newest = (
            select(func.max(cuts_table.c.cut_id))
            .where(cuts_table.c.group_name == group, cuts_table.c.watermark <= lsn.value)
            .scalar_subquery()
        )
        found = self._cuts(group, cuts_table.c.cut_id == newest, connection)
        expired = expired_cuts_table.c
        newer_expired = (expired.watermark <= lsn.value) & (expired.cut_id > (found[0].cut_id if found else 0))
        self._raise_expired(group, newer_expired, f"the newest cut at or before LSN {lsn} is ", connection)
        if not found:
            raise CutNotFoundError(f"group {group!r} has no cut at or before LSN {lsn}")
        return found[0]

    def _expired(
        self, group: str, condition: ColumnElement[bool], connection: Connection | None
    ) -> list[CutRecord]:
        """Expired cuts of ``group`` matching ``condition``, as records without members."""
        expired = expired_cuts_table.c
        query = select(expired_cuts_table).where(expired.group_name == group, condition).order_by(expired.cut_id)
        with self.connection(connection) as conn:
            rows = conn.execute(query).all()
        return [
            CutRecord(group=group, cut_id=int(row.cut_id), watermark=Lsn(int(row.watermark)), prev_watermark=None,
                      run_key=row.run_key, published_at=as_utc(row.published_at), members={},
                      expired_at=as_utc(row.expired_at))
            for row in rows
        ]

    def _raise_expired(
        self, group: str, condition: ColumnElement[bool], prefix: str, connection: Connection | None
    ) -> None:
        """Raise :class:`CutExpiredError` for the newest expired cut of ``group`` matching ``condition``, if any."""
        found = self._expired(group, condition, connection)
        if found:
            newest = found[-1]
            raise CutExpiredError(
                f"group {group!r}: {prefix}cut {newest.cut_id} (W={newest.watermark}), which expired at "
                f"{newest.expired_at:%Y-%m-%d %H:%M:%S} UTC under the group's retention; pin cuts that must be kept",
                newest.expired_at,
            )

    def groups(self) -> list[str]:
        """The names of the groups that have published a cut kept in this ledger, sorted."""
        with self.engine.connect() as connection:
            query = select(cuts_table.c.group_name).distinct().order_by(cuts_table.c.group_name)
            return list(connection.execute(query).scalars())

    def list_cuts(self, group: str, connection: Connection | None = None) -> list[CutRecord]:
        """Every cut of ``group``, oldest first."""
        return self._cuts(group, None, connection)

    def _cuts(
        self, group: str, condition: ColumnElement[bool] | None, connection: Connection | None
    ) -> list[CutRecord]:
        """Cuts of ``group`` matching ``condition`` with their members, read in one query."""
        cuts, members = cuts_table, cut_members_table
        member_columns = [members.c[c] for c in ("member", "table_identifier", "snapshot_id", "metadata_location")]
        query = (
            select(cuts, *member_columns)
            .outerjoin(members, (members.c.group_name == cuts.c.group_name) & (members.c.cut_id == cuts.c.cut_id))
            .where(cuts.c.group_name == group)
            .order_by(cuts.c.cut_id, members.c.member)
        )
        if condition is not None:
            query = query.where(condition)
        with self.connection(connection) as conn:
            rows = conn.execute(query).mappings().all()
        heads: dict[int, RowMapping] = {}
        member_maps: dict[int, dict[str, CutMember]] = {}
        for row in rows:
            cut_id = int(row["cut_id"])
            heads.setdefault(cut_id, row)
            found = member_maps.setdefault(cut_id, {})
            if row["member"] is not None:
                found[row["member"]] = CutMember(
                    member=row["member"],
                    table_identifier=row["table_identifier"],
                    snapshot_id=int(row["snapshot_id"]),
                    metadata_location=row["metadata_location"],
                )
        return [
            CutRecord(
                group=row["group_name"],
                cut_id=cut_id,
                watermark=Lsn(int(row["watermark"])),
                prev_watermark=None if row["prev_watermark"] is None else Lsn(int(row["prev_watermark"])),
                run_key=row["run_key"],
                published_at=as_utc(row["published_at"]),
                members=member_maps[cut_id],
                pinned_at=None if row["pinned_at"] is None else as_utc(row["pinned_at"]),
            )
            for cut_id, row in heads.items()
        ]
