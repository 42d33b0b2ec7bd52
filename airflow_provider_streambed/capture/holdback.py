"""The visibility report at pin time: transactions still open that the cut cannot contain.

A transaction open when W is pinned commits at an LSN >= W, so it lands in a later cut. Long
ones (and prepared two-phase transactions) are logged as a warning and counted for XCom and
metrics. The probe is fail-safe: an error is logged and never blocks the pin.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import psycopg

logger = logging.getLogger(__name__)

_PROBE = """
SELECT pid, datname::text, state, extract(epoch FROM now() - xact_start)::float8 AS age, false AS prepared, NULL::text
FROM pg_stat_activity
WHERE (backend_xid IS NOT NULL OR backend_xmin IS NOT NULL) AND pid <> pg_backend_pid() AND xact_start IS NOT NULL
  AND backend_type = 'client backend'
UNION ALL
SELECT NULL, database::text, 'prepared', extract(epoch FROM now() - prepared)::float8, true, gid
FROM pg_prepared_xacts
ORDER BY age DESC
"""


@dataclass(frozen=True, slots=True)
class HoldbackReport:
    """Transactions open longer than the threshold at pin time (absent from this cut).

    Attributes:
        count: how many.
        oldest_age_seconds: the oldest one's age (0 when none).
        details: per transaction: pid (None when prepared), database, state, age, prepared, gid.
        probe_failed: the probe itself failed (logged); the figures are then empty.
    """

    count: int = 0
    oldest_age_seconds: float = 0.0
    details: tuple[dict[str, Any], ...] = field(default=())
    probe_failed: bool = False

    def summary(self) -> dict[str, Any]:
        """Small JSON-able figures (no per-transaction details)."""
        return {
            "holdback_count": self.count,
            "holdback_oldest_age_seconds": round(self.oldest_age_seconds, 3),
            "holdback_probe_failed": self.probe_failed,
        }


def probe_holdback(conn: psycopg.Connection[Any], group: str, warn_seconds: float) -> HoldbackReport:
    """Report the transactions open longer than ``warn_seconds``; never raises.

    Args:
        conn: a connection to the source database (autocommit).
        group: the group name, for the log lines.
        warn_seconds: the age from which an open transaction is reported.
    """
    try:
        rows = conn.execute(_PROBE).fetchall()
    except psycopg.Error as error:
        logger.warning("group=%s: the holdback probe failed, continuing without it: %s", group, error)
        return HoldbackReport(probe_failed=True)
    details = tuple(
        {"pid": pid, "database": database, "state": state, "age_seconds": round(age, 3), "prepared": prepared,
         "gid": gid}
        for pid, database, state, age, prepared, gid in rows
        if age is not None and age >= warn_seconds
    )
    for item in details:
        logger.warning(
            "group=%s: transaction open for %.1f s is not in this cut (pid=%s state=%s database=%s prepared=%s)",
            group, item["age_seconds"], item["pid"], item["state"], item["database"], item["prepared"],
        )
    oldest = max((item["age_seconds"] for item in details), default=0.0)
    return HoldbackReport(count=len(details), oldest_age_seconds=float(oldest), details=details)
