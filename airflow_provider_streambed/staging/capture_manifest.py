"""The capture step's record: its manifest, with each mirrored table's changelog for the run."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from airflow_provider_streambed.lsn import Lsn


def row_identity(key_columns: tuple[str, ...], keyless: bool) -> str:
    """What names one row of a source table: ``key:<columns>``, ``keyless`` (the whole row, a
    multiset), or empty (no key: an append-only table)."""
    if keyless:
        return "keyless"
    return f"key:{','.join(key_columns)}" if key_columns else ""


@dataclass(frozen=True, slots=True)
class TableCapture:
    """The changelog of one mirrored table for one run.

    Attributes:
        member: the Mirror member's name.
        source_table: ``schema.table`` in the source database.
        columns: the row columns in source order (without the ``_``-prefixed changelog columns).
        key_columns: the primary key (or replica identity) columns; empty when keyless or
            append-only.
        files: changelog segment URIs (Parquet), at least one (an empty file carries the schema).
        changes: number of row changes in ``files``.
        copy_files: a bootstrap copy of the table (Parquet of the mirror's columns only, typed as
            the changelog), taken at a snapshot that the changes may overlap: they must be applied
            to it idempotently. Empty: no copy this run.
        copied_rows: rows in ``copy_files``.
        filled_columns: columns whose rows from before an ``ADD COLUMN ... DEFAULT`` read the
            default from the source's catalog, not from any WAL record.
        keyless: the table has no key (``REPLICA IDENTITY FULL`` without a primary key): the
            mirror is a multiset, an insert adds its row, a delete removes one row equal to its
            old image, and an update is a delete of its old image followed by an insert.
        resynced: why the table was copied again this run although its mirror has cuts (a resync
            of the member, :mod:`~airflow_provider_streambed.capture.resyncs`); empty otherwise.
        storage: the table's storage when the run began (``oid:relfilenode`` of each leaf
            partition of a partitioned table, ``none`` without any), recorded with the mirror's
            snapshot: the next run compares it.
        leaves: a partitioned table's partitions' replica identities when the run began, when they
            held until after the pin of W (:attr:`.capture.source.SourceTable.leaves`; empty
            otherwise), recorded with the mirror's snapshot: the next run's deletes carry their
            rows only when its reading equals it.
        attnums: each column's ``attnum`` by name when the run began (a column's identity).
        renamed: the columns renamed since the last cut (old name -> new): publish renames them,
            keeping their field ids.
        aliases: each column's other names (older ones) in the mirror's files and the changelog,
            by its name now: the merges read a column under any of its names.
        reshaped: the table's columns differ from its mirror's in the last cut (dropped, renamed,
            added, widened): the cut evolves the mirror's schema even without a change of its rows.
        old_images: (a keyed table) every update and delete in ``files`` carries the row's whole
            old image (``REPLICA IDENTITY FULL``, on every partition of a partitioned table since
            the last cut): an update is written as a delete of its old image followed by its new
            image, so the first change in a run of a key the previous cut holds is a delete of
            that row.
        field_ids: each column's Iceberg field id in the mirror's last cut, by name (empty: no
            cut yet); the position deletes' rows carry them.
    """

    member: str
    source_table: str
    columns: tuple[str, ...]
    key_columns: tuple[str, ...]
    files: tuple[str, ...]
    changes: int
    copy_files: tuple[str, ...] = ()
    copied_rows: int = 0
    filled_columns: tuple[str, ...] = ()
    keyless: bool = False
    resynced: str = ""
    storage: str = ""
    leaves: str = ""
    attnums: Mapping[str, int] = field(default_factory=dict)
    renamed: Mapping[str, str] = field(default_factory=dict)
    aliases: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    reshaped: bool = False
    old_images: bool = False
    field_ids: Mapping[str, int] = field(default_factory=dict)

    @property
    def bootstrap(self) -> bool:
        """Whether the run copied the table."""
        return bool(self.copy_files)

    @property
    def deleted_row_ids(self) -> Mapping[str, int] | None:
        """The field ids of the columns a keyed mirror's merge writes the deleted rows in (Iceberg's
        ``row`` of its position deletes), or ``None`` when it writes none: not every change carried
        its old row, the columns changed, or a column has no field id in the last cut (none yet)."""
        if not self.old_images or self.reshaped or any(name not in self.field_ids for name in self.columns):
            return None
        return self.field_ids

    @property
    def identity(self) -> str:
        """What names one row of the table (:func:`row_identity`)."""
        return row_identity(self.key_columns, self.keyless)

    def source_record(self) -> dict[str, str]:
        """What the next capture compares the table with, recorded with the mirror's snapshot:
        ``storage``, ``leaves``, ``identity`` and ``attnums`` (JSON), the empty ones left out."""
        record = {"storage": self.storage, "leaves": self.leaves, "identity": self.identity,
                  "attnums": json.dumps(dict(self.attnums)) if self.attnums else ""}
        return {name: value for name, value in record.items() if value}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TableCapture:
        """Inverse of ``dataclasses.asdict``."""
        data = {key: value for key, value in data.items() if key != "bootstrap"}  # a field of older releases
        lists = ("columns", "key_columns", "files", "copy_files", "filled_columns")
        aliases = {name: tuple(names) for name, names in data.get("aliases", {}).items()}
        return cls(**{**data, **{k: tuple(data.get(k, ())) for k in lists}, "aliases": aliases})


@dataclass(frozen=True, slots=True)
class CaptureManifest:
    """What the capture step of one run produced; written last under ``_capture/``.

    Attributes:
        group: the group name.
        run_key: the run key.
        watermark: the pinned W; the changelogs hold exactly the transactions with commit LSN < W
            that the slot had not confirmed before (``start``).
        start: the slot's confirmed position when the changes were read.
        transactions: committed source transactions in the changelogs.
        tables: one entry per mirrored table.
    """

    group: str
    run_key: str
    watermark: Lsn
    start: Lsn
    transactions: int
    tables: tuple[TableCapture, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (LSNs as ``X/Y`` text)."""
        data = asdict(self)
        data.update(watermark=str(self.watermark), start=str(self.start))
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CaptureManifest:
        """Inverse of :meth:`to_dict`."""
        return cls(
            group=data["group"],
            run_key=data["run_key"],
            watermark=Lsn.parse(data["watermark"]),
            start=Lsn.parse(data["start"]),
            transactions=int(data["transactions"]),
            tables=tuple(TableCapture.from_dict(table) for table in data["tables"]),
        )
