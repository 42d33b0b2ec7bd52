"""``GroupChangesTrigger``: an event trigger that fires when a group's source tables have new commits.

It runs in Airflow's triggerer, in an ``AssetWatcher`` (:func:`group_asset`), so a DAG scheduled
on the group's source Asset runs seconds after a commit and never on a quiet source; a deferrable
capture waits on it too. What it polls and how it decides is in
:mod:`airflow_provider_streambed.capture.change_signal`: one cheap statement per poll on the source
(``pg_stat_user_tables`` counters and the WAL insert position; no slot, no decoding), the
ledger's last cut W read only when a counter moved, and one event per new counter state, its
payload carrying the poll's LSN as the position. A new trigger (a triggerer restart) starts from
the ledger's last cut, not from memory.

Its arguments are names only (group, tables, connection ids, poll interval): the source and
catalog connections are resolved in the triggerer, so no secret is stored with the trigger.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from typing import Any

import psycopg
from airflow.sdk import Asset, AssetWatcher
from airflow.triggers.base import BaseEventTrigger, TriggerEvent
from asgiref.sync import sync_to_async
from sqlalchemy.exc import SQLAlchemyError

from airflow_provider_streambed.capture.change_signal import (
    TableCounters,
    check_counters_tracked,
    counters_moved,
    decide,
    read_source_state,
)
from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.exceptions import DeclarationError
from airflow_provider_streambed.hooks.catalog import StreambedCatalogHook
from airflow_provider_streambed.hooks.source import StreambedSourceHook
from airflow_provider_streambed.ledger import Ledger
from airflow_provider_streambed.lsn import Lsn

logger = logging.getLogger(__name__)

#: Seconds between two polls: the counters are flushed about once a second, and a poll costs
#: the source well under a millisecond (``benchmarks/bench_trigger_poll.py``).
DEFAULT_POLL_INTERVAL = 2.0
#: The URI scheme of a group's source-changes Asset: ``streambed-source://<source conn id>/<group>``.
SOURCE_SCHEME = "streambed-source"


class GroupChangesTrigger(BaseEventTrigger):
    """Fires once per new state of a group's source tables holding commits the last cut does not.

    Each event's payload holds ``group``, ``lsn`` (the position: the source's WAL insert
    position at the poll that saw the change), ``last_cut_lsn`` and ``reason``.

    Args:
        group: the refresh group's name (its cuts are read from the ledger).
        tables: the group's source tables as ``schema.table``.
        source_conn_id: the Airflow connection of the source database.
        catalog_conn_id: the Airflow connection of the catalog (its database holds the ledger).
        poll_interval: seconds between polls.
    """

    def __init__(
        self,
        *,
        group: str,
        tables: list[str],
        source_conn_id: str,
        catalog_conn_id: str,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
    ) -> None:
        super().__init__()
        if not tables:
            raise DeclarationError(f"group {group!r}: the change trigger needs the group's source tables")
        if not isinstance(poll_interval, int | float) or poll_interval <= 0:
            raise DeclarationError(f"group {group!r}: poll_interval must be a number of seconds > 0, "
                                   f"got {poll_interval!r}")
        self.group = group
        self.tables = sorted(tables)
        self.source_conn_id = source_conn_id
        self.catalog_conn_id = catalog_conn_id
        self.poll_interval = float(poll_interval)

    @classmethod
    def for_group(
        cls,
        group: RefreshGroup,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        *,
        source_conn_id: str | None = None,
        catalog_conn_id: str | None = None,
    ) -> GroupChangesTrigger:
        """The trigger of ``group``: its mirrors' source tables and its connections (unless others are given)."""
        return cls(group=group.name, tables=[mirror.qualified_table for mirror in group.mirrors],
                   source_conn_id=source_conn_id or group.source_conn_id,
                   catalog_conn_id=catalog_conn_id or group.catalog_conn_id, poll_interval=poll_interval)

    def serialize(self) -> tuple[str, dict[str, Any]]:
        """The class path and the arguments (names only) that rebuild this trigger."""
        return f"{type(self).__module__}.{type(self).__qualname__}", {
            "group": self.group,
            "tables": list(self.tables),
            "source_conn_id": self.source_conn_id,
            "catalog_conn_id": self.catalog_conn_id,
            "poll_interval": self.poll_interval,
        }

    async def run(self) -> AsyncIterator[TriggerEvent]:
        """Poll until cancelled, yielding an event per new state of changes (see the module docstring).

        An unreachable source or catalog database is logged and polled again; the counters seen
        before stay the baseline, so nothing is missed meanwhile.
        """
        conninfo, ledger = await sync_to_async(self._resolve)()
        logger.info("group=%s: watching %s every %.1f s", self.group, ", ".join(self.tables), self.poll_interval)
        try:
            async with aclosing(self._watch(conninfo, ledger)) as events:
                async for event in events:
                    yield event
        finally:
            ledger.engine.dispose()  # the triggerer lives on: no pooled catalog connection outlives the trigger

    async def _watch(self, conninfo: str, ledger: Ledger) -> AsyncGenerator[TriggerEvent, None]:
        """The poll loop of :meth:`run`; the counters seen survive a reconnection."""
        seen: tuple[TableCounters, ...] | None = None
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as connection:
                    await check_counters_tracked(connection, self.group)
                    while True:
                        state = await read_source_state(connection, self.tables)
                        if counters_moved(seen, state):
                            last_cut = await asyncio.to_thread(self._last_cut_watermark, ledger)
                            decision = decide(seen, state, last_cut)
                            seen = decision.seen
                            logger.info("group=%s LSN=%s: %s %s", self.group, state.lsn,
                                        "fire:" if decision.fire else "no event:", decision.reason)
                            if decision.fire:
                                yield TriggerEvent({"group": self.group, "lsn": str(state.lsn),
                                                    "last_cut_lsn": None if last_cut is None else str(last_cut),
                                                    "reason": decision.reason})
                        await asyncio.sleep(self.poll_interval)
            except (psycopg.OperationalError, SQLAlchemyError) as error:
                logger.warning("group=%s: polling the source or the ledger failed (%s: %s); polling again in %.1f s",
                               self.group, type(error).__name__, error, self.poll_interval)
                await asyncio.sleep(self.poll_interval)

    def _resolve(self) -> tuple[str, Ledger]:
        """The source's libpq connection string (secret) and the ledger, from the Airflow connections."""
        conninfo = StreambedSourceHook(self.source_conn_id).conninfo
        _, ledger = StreambedCatalogHook(self.catalog_conn_id).get_catalog_and_ledger()
        return conninfo, ledger

    def _last_cut_watermark(self, ledger: Ledger) -> Lsn | None:
        """The W of the group's last cut, ``None`` before its first."""
        last = ledger.last_cut(self.group)
        return None if last is None else last.watermark


def group_asset(group: RefreshGroup, poll_interval: float = DEFAULT_POLL_INTERVAL) -> Asset:
    """The Asset of ``group``'s source changes, watched by its :class:`GroupChangesTrigger`.

    A DAG with ``schedule=[group_asset(group)]`` runs when the group's source tables have commits
    its last cut does not hold (Airflow collapses events that arrive while a run is queued).

    Args:
        group: the refresh-group declaration.
        poll_interval: seconds between the trigger's polls of the source.
    """
    return Asset(
        name=f"streambed_{group.name}_source_changes",
        uri=f"{SOURCE_SCHEME}://{group.source_conn_id}/{group.name}",
        group=f"streambed-{group.name}",
        watchers=[AssetWatcher(name=f"streambed_{group.name}_changes",
                               trigger=GroupChangesTrigger.for_group(group, poll_interval))],
    )
