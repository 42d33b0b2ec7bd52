"""A source table model that writes changelog segments in the capture step's layout.

The model holds the truth (the table's rows after every applied change) and records each change
as a changelog row (``_commit_lsn``, ``_xid``, ``_seq``, ``_op``, ``_toast_<column>``), so a
mirror merge can be checked against the truth without the capture step.
"""

from __future__ import annotations

import datetime as dt
import decimal
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_provider_streambed.staging import COMMIT_LSN, OP, SEQ, TOAST_MARKER_PREFIX, XID, TableCapture

Row = dict[str, Any]


@dataclass
class TableModel:
    """A keyed table: rows by key, plus the changelog rows of the changes since the last flush."""

    name: str
    schema: pa.Schema
    key: tuple[str, ...]
    toastable: tuple[str, ...] = ()
    rows: dict[tuple[Any, ...], Row] = field(default_factory=dict)
    pending: list[Row] = field(default_factory=list)
    lsn: int = 1000
    _seq: int = 0

    def key_of(self, row: Row) -> tuple[Any, ...]:
        return tuple(row[name] for name in self.key)

    def commit(self) -> None:
        """End the current transaction: later changes get a higher commit LSN."""
        self.lsn += 100
        self._seq = 0

    def _log(self, op: str, row: Row, toast: tuple[str, ...] = (), lsn: int | None = None) -> None:
        record: Row = {name: row.get(name) for name in self.schema.names}
        for name in toast:
            record[name] = None
        record.update({COMMIT_LSN: self.lsn if lsn is None else lsn, XID: self.lsn, SEQ: self._seq, OP: op})
        record.update({TOAST_MARKER_PREFIX + name: name in toast for name in self.toastable})
        self.pending.append(record)
        self._seq += 1

    def insert(self, row: Row) -> None:
        self.rows[self.key_of(row)] = dict(row)
        self._log("I", row)

    def update(self, key: tuple[Any, ...], changes: Row, unchanged_toast: bool = False) -> None:
        """Update a row in place; with ``unchanged_toast`` its toastable columns are marked unchanged."""
        new = {**self.rows[key], **changes}
        if self.key_of(new) != key:
            self.delete(key)
            self.insert(new)  # a key change: D of the old key, then the new image (see staging.py)
            self.pending[-1][OP] = "U"
            return
        self.rows[key] = new
        toast = tuple(name for name in self.toastable if unchanged_toast and name not in changes)
        self._log("U", new, toast)

    def delete(self, key: tuple[Any, ...]) -> None:
        row = self.rows.pop(key)
        self._log("D", {name: row[name] for name in self.key})

    def truncate(self) -> None:
        self.rows.clear()
        self._log("T", {})

    def copy_rows(self) -> None:
        """Log the current rows as inserts at commit LSN 0, before every change (a copy in the changelog)."""
        for row in self.rows.values():
            self._log("I", row, lsn=0)

    def truth(self) -> list[Row]:
        return [self.rows[key] for key in sorted(self.rows)]

    def flush(self, directory: Path, member: str, segments: int = 2) -> TableCapture:
        """Write the pending changelog rows as Parquet segments and return their capture record."""
        directory.mkdir(parents=True, exist_ok=True)
        fields = [
            *self.schema,
            pa.field(COMMIT_LSN, pa.int64()),
            pa.field(XID, pa.int64()),
            pa.field(SEQ, pa.int32()),
            pa.field(OP, pa.string()),
            *[pa.field(TOAST_MARKER_PREFIX + name, pa.bool_()) for name in self.toastable],
        ]
        table = pa.Table.from_pylist(self.pending, schema=pa.schema(fields))
        chunk = max(1, -(-len(self.pending) // segments))
        files = []
        for index in range(segments if self.pending else 1):
            path = directory / f"segment-{index:04d}.parquet"
            pq.write_table(table.slice(index * chunk, chunk), path)
            files.append(path.as_uri())
        changes = len(self.pending)
        self.pending = []
        return TableCapture(
            member=member,
            source_table=f"public.{self.name}",
            columns=tuple(self.schema.names),
            key_columns=self.key,
            files=tuple(files),
            changes=changes,
        )


ACCOUNT_SCHEMA = pa.schema(
    [
        pa.field("region", pa.string()),
        pa.field("id", pa.int64()),
        pa.field("balance", pa.decimal128(12, 2)),
        pa.field("note", pa.string()),
        pa.field("opened", pa.timestamp("us")),
    ]
)


def account_row(rng: random.Random, region: str, ident: int) -> Row:
    return {
        "region": region,
        "id": ident,
        "balance": decimal.Decimal(rng.randint(-(10**6), 10**6)) / 100,
        "note": rng.choice([None, "x" * rng.randint(1, 40)]),
        "opened": dt.datetime(2024, 1, 1) + dt.timedelta(microseconds=rng.randint(0, 10**12)),
    }


def random_changes(model: TableModel, rng: random.Random, transactions: int, truncates: bool = True) -> None:
    """Random inserts, updates (some with unchanged TOAST), deletes, key updates; rare truncates
    (unless not ``truncates``)."""
    next_id = max((key[1] for key in model.rows), default=0) + 1
    for _ in range(transactions):
        for _ in range(rng.randint(1, 4)):
            choice = rng.random()
            keys = list(model.rows)
            if choice < 0.35 or not keys:
                model.insert(account_row(rng, rng.choice("ab"), next_id))
                next_id += 1
            elif choice < 0.65:
                model.update(rng.choice(keys), {"balance": decimal.Decimal(rng.randint(0, 10**5)) / 100}, True)
            elif choice < 0.75:
                model.update(rng.choice(keys), {"note": "changed", "opened": dt.datetime(2030, 1, 1)})
            elif choice < 0.9:
                model.delete(rng.choice(keys))
            elif choice < 0.99 or not truncates:
                model.update(rng.choice(keys), {"id": next_id, "region": rng.choice("ab")})
                next_id += 1
            else:
                model.truncate()
        model.commit()
