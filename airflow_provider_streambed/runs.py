"""Serialising the runs of a group: at most one unpublished run holds a pinned W at a time.

Two runs of one group that pinned their watermarks concurrently would race to publish; the
ledger already refuses a cut whose W is not above the last one, but the loser would have done
its work for nothing. :func:`claim_group` makes the second run fail clearly before it pins
(and, after pinning, resolves a race between two runs that both passed the check: the run
pinned later gives way). A run that failed and will not be retried can be superseded, which
frees the group for the next run.
"""

from __future__ import annotations

import logging

from sqlalchemy import and_, exists, select

from airflow_provider_streambed.exceptions import LedgerError
from airflow_provider_streambed.ledger import Ledger, RunRecord, RunState, cuts_table, runs_table

logger = logging.getLogger(__name__)


class GroupBusyError(LedgerError):
    """Another run of the group holds a pinned, unpublished watermark."""


def pending_runs(ledger: Ledger, group: str) -> list[RunRecord]:
    """Runs of ``group`` that are pinned and have no cut, oldest pin first."""
    published = exists().where(and_(cuts_table.c.group_name == group, cuts_table.c.run_key == runs_table.c.run_key))
    query = (
        select(runs_table.c.run_key)
        .where(runs_table.c.group_name == group, runs_table.c.state == RunState.PINNED.value, ~published)
        .order_by(runs_table.c.pinned_at, runs_table.c.run_key)
    )
    with ledger.engine.connect() as connection:
        keys = list(connection.execute(query).scalars())
    records = [ledger.get_run(group, key) for key in keys]
    return [record for record in records if record is not None]


def claim_group(ledger: Ledger, group: str, run_key: str, *, supersede: bool = False) -> None:
    """Check, before pinning, that no other run of ``group`` is pinned and unpublished.

    Args:
        ledger: the group's ledger.
        group: the group name.
        run_key: the run that wants to pin.
        supersede: mark the other pending runs superseded (they can then never publish)
            instead of failing.

    Raises:
        GroupBusyError: another run is pending and ``supersede`` is false.
    """
    others = [record for record in pending_runs(ledger, group) if record.run_key != run_key]
    if not others:
        return
    if not supersede:
        other = others[0]
        raise GroupBusyError(
            f"group {group!r}: run {other.run_key!r} pinned W={other.watermark} at {other.pinned_at:%Y-%m-%d %H:%M:%S} "
            f"and has not published; runs of a group are serialised, so run {run_key!r} cannot start. "
            "Retry (clear) that run so it publishes, or start this one with supersede_pending_runs=True "
            "to abandon it."
        )
    for other in others:
        ledger.set_run_state(group, other.run_key, RunState.SUPERSEDED)
        logger.warning("group=%s run=%s W=%s: superseded by run %s", group, other.run_key, other.watermark, run_key)


def confirm_claim(ledger: Ledger, group: str, run_key: str) -> None:
    """After pinning: if a run pinned earlier is also pending, this run gives way.

    Closes the window between :func:`claim_group` and the pin, when two runs start at once:
    both see both pins, and only the earlier one goes on.

    Raises:
        GroupBusyError: a run pinned before this one is pending; this run is marked superseded.
    """
    pending = pending_runs(ledger, group)
    keys = [record.run_key for record in pending]
    if run_key not in keys or keys[0] == run_key:
        return
    ledger.set_run_state(group, run_key, RunState.SUPERSEDED)
    raise GroupBusyError(
        f"group {group!r}: run {keys[0]!r} pinned its W first and is still unpublished; run {run_key!r} "
        "started at the same time and was superseded (trigger a new run after the other publishes)"
    )
