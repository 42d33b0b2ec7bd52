"""The group's replication slot: health checks, creation with an exported snapshot, and advancing.

The slot is only ever advanced to a published cut's watermark (:func:`advance_slot`, called
after publish), so a failed run loses nothing: the next run decodes again from the confirmed
position, which is the previous cut's W.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from airflow_provider_streambed.capture.names import slot_name
from airflow_provider_streambed.capture.source import source_conninfo
from airflow_provider_streambed.capture.waits import DEFAULT_TIMEOUT_SECONDS, run_watched, running_transactions
from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.exceptions import SlotError
from airflow_provider_streambed.lsn import Lsn

logger = logging.getLogger(__name__)

#: What to do when the slot is gone: a fresh slot would silently skip transactions.
REMEDY = (
    "the changes since the last cut cannot be decoded any more; re-synchronise the group: trigger a run with "
    "the Param resync (or run `streambed resync --group ...`), which drops the slot, copies every table again "
    "and publishes the copies as a new cut (the older cuts stay readable)"
)

_STATUS_QUERY = """
SELECT confirmed_flush_lsn::text, restart_lsn::text, active, active_pid, wal_status,
       pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::int8, safe_wal_size, two_phase
FROM pg_replication_slots WHERE slot_name = %s AND database = current_database()
"""


@dataclass(frozen=True, slots=True)
class SlotStatus:
    """A healthy slot's position and the WAL it holds back."""

    confirmed_flush: Lsn
    restart_lsn: Lsn
    retained_bytes: int
    safe_wal_size: int | None


#: Above this much WAL retained by a group's slot, each capture logs a warning (1 GiB).
DEFAULT_RETAINED_WARN_BYTES = 1 << 30


def check_slot(conn: psycopg.Connection[Any], group: RefreshGroup) -> SlotStatus:
    """Check the group's slot exists, is idle and has not lost WAL (:func:`warn_retention` reads its WAL figures).

    Raises:
        SlotError: the slot is missing, in use by another session, lost, or decodes two-phase.
    """
    name = slot_name(group)
    row = conn.execute(_STATUS_QUERY, (name,)).fetchone()
    if row is None:
        raise SlotError(f"group {group.name!r}: replication slot {name!r} does not exist; {REMEDY}")
    confirmed, restart, active, active_pid, wal_status, retained, safe_size, two_phase = row
    if wal_status == "lost":
        raise SlotError(f"group {group.name!r}: replication slot {name!r} has lost required WAL; {REMEDY}")
    if active and active_pid != conn.info.backend_pid:
        raise SlotError(
            f"group {group.name!r}: replication slot {name!r} is in use by process {active_pid}; "
            "another run of the group is reading it, retry when it has finished"
        )
    if two_phase:
        raise SlotError(f"group {group.name!r}: slot {name!r} was created with two_phase, which streambed does not "
                        "decode; re-synchronise the group: trigger a run with the Param resync, or `streambed resync`")
    return SlotStatus(Lsn.parse(confirmed), Lsn.parse(restart), int(retained or 0), safe_size)


def slot_position(conn: psycopg.Connection[Any], group: RefreshGroup) -> Lsn | None:
    """The group's slot's ``confirmed_flush_lsn`` whatever its health, or ``None`` when it does not exist."""
    row = conn.execute(
        "SELECT confirmed_flush_lsn::text FROM pg_replication_slots "
        "WHERE slot_name = %s AND database = current_database()",
        (slot_name(group),),
    ).fetchone()
    return None if row is None or row[0] is None else Lsn.parse(row[0])


def warn_retention(group: RefreshGroup, status: SlotStatus, threshold_bytes: int) -> None:
    """Log a warning when the group's slot retains more than ``threshold_bytes`` of WAL."""
    if status.retained_bytes > threshold_bytes:
        logger.warning(
            "group=%s: slot %s retains %d bytes of WAL (safe_wal_size=%s); publish cuts to release it",
            group.name, slot_name(group), status.retained_bytes, status.safe_wal_size,
        )


def advance_slot(conn: psycopg.Connection[Any], group: RefreshGroup, watermark: Lsn) -> None:
    """Confirm every transaction with commit LSN < ``watermark`` as consumed; idempotent.

    Call it only after the cut at ``watermark`` is published. A slot already at or past
    ``watermark`` is left alone (never moved backwards).

    Raises:
        SlotError: the slot is missing or could not reach ``watermark``.
    """
    name = slot_name(group)
    with conn.transaction():
        position = slot_position(conn, group)
        if position is None:
            raise SlotError(f"group {group.name!r}: cannot advance slot {name!r} to W={watermark}: it does not exist")
        if position >= watermark:
            logger.info("group=%s W=%s: slot %s already at %s", group.name, watermark, name, position)
            return
        reached = conn.execute(
            "SELECT end_lsn::text FROM pg_replication_slot_advance(%s, %s::text::pg_lsn)", (name, str(watermark))
        ).fetchone()
    if reached is None or Lsn.parse(reached[0]) < watermark:
        raise SlotError(
            f"group {group.name!r}: slot {name!r} reached {reached[0] if reached else '?'}, not W={watermark}"
        )
    logger.info("group=%s W=%s: advanced slot %s", group.name, watermark, name)


def replication_conninfo(conn: psycopg.Connection[Any]) -> str:
    """The connection's parameters (password included) for a ``replication=database`` session.

    Secret: never log the result.
    """
    return source_conninfo(conn, replication="database")


@dataclass(frozen=True, slots=True)
class CreatedSlot:
    """A new slot's consistent point and the snapshot exported at it."""

    consistent_point: Lsn
    snapshot_name: str


@contextmanager
def create_slot_with_snapshot(
    conn: psycopg.Connection[Any], group: RefreshGroup, timeout: float = DEFAULT_TIMEOUT_SECONDS
) -> Iterator[CreatedSlot]:
    """Create the group's ``pgoutput`` slot and export the snapshot at its consistent point.

    The snapshot stays importable (``SET TRANSACTION SNAPSHOT``) while the ``with`` block runs:
    a copy taken in it holds exactly the transactions the slot will not decode. Creation waits
    for the transactions running when it starts (prepared ones included), logging them every
    15 s, for at most ``timeout`` seconds (:func:`.waits.run_watched`).

    Raises:
        CaptureError: the creation waited ``timeout`` seconds; names the transactions, no slot is left.
        SlotError: the slot cannot be created (rights, capacity, pg_hba for replication).
    """
    name = slot_name(group)
    try:
        replication = psycopg.connect(replication_conninfo(conn), autocommit=True)
    except psycopg.Error as error:
        raise SlotError(
            f"group {group.name!r}: cannot open a replication connection to create slot {name!r} "
            f"(pg_hba.conf must allow it and the role needs REPLICATION): {error.diag.message_primary}"
        ) from error
    with replication:
        command = sql.SQL("CREATE_REPLICATION_SLOT {} LOGICAL pgoutput EXPORT_SNAPSHOT").format(sql.Identifier(name))
        try:
            row = run_watched(lambda: replication.execute(command).fetchone(), what=f"group {group.name!r}: creating "
                              f"slot {name}", conninfo=source_conninfo(conn), waiter=replication.info.backend_pid,
                              timeout=timeout, find=running_transactions)
        except psycopg.Error as error:
            raise SlotError(f"group {group.name!r}: cannot create slot {name!r}: {error}") from error
        assert row is not None
        created = CreatedSlot(Lsn.parse(row[1]), row[2])
        logger.info("group=%s: created slot %s at consistent point %s", group.name, name, created.consistent_point)
        yield created


def drop_slot(conn: psycopg.Connection[Any], group: RefreshGroup) -> None:
    """Drop the group's slot if it exists (only before the group's first cut)."""
    conn.execute(
        "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
        "WHERE slot_name = %s AND database = current_database()",
        (slot_name(group),),
    )
