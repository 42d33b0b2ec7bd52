"""The records that describe a run's staged files: capture and member manifests, the job spec.

A record whose file exists is complete (it is written after everything it names). The records
are pure data with a JSON form; :mod:`.json_io` reads and writes them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from airflow_provider_streambed.lsn import Lsn

#: Columns of an Iceberg position-delete file, and their reserved field ids. :data:`DELETE_FIELD_IDS`
#: names the two every delete file has; the optional ``row`` holds each deleted row's values: the
#: merges write it when the capture gives them (:attr:`TableCapture.deleted_row_ids`), and
#: the change feed reads removed rows from it.
DELETE_FILE_PATH, DELETE_POS, DELETE_ROW = "file_path", "pos", "row"
DELETE_FIELD_IDS = {DELETE_FILE_PATH: 2147483546, DELETE_POS: 2147483545}
DELETE_ROW_FIELD_ID = 2147483544
#: The Arrow field metadata key under which Parquet files keep a column's (Iceberg) field id.
FIELD_ID = b"PARQUET:field_id"


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


@dataclass(frozen=True, slots=True)
class SnapshotFiles:
    """The files of one member snapshot: Parquet data files and the position-delete files over them.

    A row of a data file is live unless a delete file names its ``(file_path, pos)``. ``copies``
    maps a file Spark cannot read at its URI to a local copy of it (:mod:`.inputs`); the files keep
    their URIs (delete files name them), only reading goes to the copies.
    """

    data: tuple[str, ...] = ()
    deletes: tuple[str, ...] = ()
    copies: tuple[tuple[str, str], ...] = ()

    def readable(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """Where to read the data and delete files: each file's copy, else its URI."""
        copies = dict(self.copies)
        return (tuple(copies.get(uri, uri) for uri in self.data), tuple(copies.get(uri, uri) for uri in self.deletes))

    def then(self, manifest: MemberManifest) -> SnapshotFiles:
        """The files of the snapshot that publishing ``manifest`` on top of this one makes."""
        if not manifest.incremental:
            return SnapshotFiles(manifest.files, manifest.delete_files)
        return SnapshotFiles(self.data + manifest.files, self.deletes + manifest.delete_files, self.copies)


#: What :attr:`MemberManifest.inputs` records of a source carried over: its previous snapshot.
CARRIED = "carried"


@dataclass(frozen=True, slots=True)
class MemberManifest:
    """A member's staged output for one run; written last in ``<root>/<member>/``.

    Attributes:
        member: the member's name.
        watermark: the W the output was computed at (a retry reuses it only for the same W).
        files: Parquet data file URIs.
        row_count: rows over all files.
        key_columns: the member's key (mirrors), empty otherwise.
        written_at: ISO-8601 UTC time the manifest was written (to the microsecond): also what
            names this staged output in its derived members' :attr:`inputs`.
        definition: digest of the member declaration the output was computed from (empty: unknown).
        incremental: ``False``: ``files`` are the member's whole table, less the rows
            ``delete_files`` name (a mirror's first cut that adopts its bootstrap copy). ``True`` (a
            mirror's merge-on-read output): ``files`` hold the new images of changed keys and are
            added to the member's previous snapshot, whose changed and deleted rows ``delete_files``
            remove.
        delete_files: Iceberg position-delete files (``file_path``, ``pos``) over the previous
            snapshot's data files (``incremental``) or over ``files``.
        deleted_rows: rows over all delete files.
        reason: why the output is whole or incremental (for logs), e.g. ``compaction: ...``.
        sizes: bytes of every data and delete file as staged, by URI (empty: staged by an older
            release): a retry and the publish check the files against them
            (:func:`~airflow_provider_streambed.staging.members.damage`).
        base_snapshot_id: for an ``incremental`` output, the snapshot of the member's table it
            applies to (the previous cut's; ``None``: staged by an older release); publish refuses
            it on any other snapshot.
        resynced: why a mirror's output is a copy taken again (a resync of the member); it then
            replaces the table's columns as the source has them now, a changed type included.
        source: what the capture recorded of a mirror's source table
            (:meth:`TableCapture.source_record`), kept with its snapshot.
        renamed: a resynced mirror's columns renamed since the last cut (old name -> new).
        shape: an incremental SQL member's query shape, recorded with its snapshot for later
            runs (JSON, :mod:`airflow_provider_streambed.refresh.derived.member_shape`; empty: none).
        inputs: what a derived member's output was computed from, by source: that source's
            staged output (its ``written_at``) or :data:`CARRIED` (its previous snapshot); empty
            for a mirror, or staged by an older release. A retry reuses the output only while its
            sources are still the same (:meth:`computed_from`).
    """

    member: str
    watermark: Lsn
    files: tuple[str, ...]
    row_count: int
    key_columns: tuple[str, ...] = ()
    written_at: str = ""
    definition: str = ""
    incremental: bool = False
    delete_files: tuple[str, ...] = ()
    deleted_rows: int = 0
    reason: str = ""
    sizes: Mapping[str, int] = field(default_factory=dict)
    base_snapshot_id: int | None = None
    resynced: str = ""
    source: Mapping[str, str] = field(default_factory=dict)
    renamed: Mapping[str, str] = field(default_factory=dict)
    shape: str = ""
    inputs: Mapping[str, str] = field(default_factory=dict)

    def computed_from(self, sources: Mapping[str, str]) -> bool:
        """Whether this output was computed from ``sources`` (as :attr:`inputs` records them: each
        source's staged output's ``written_at``, or :data:`CARRIED`); ``True`` when it records
        nothing (:attr:`inputs`)."""
        return not self.inputs or dict(self.inputs) == dict(sources)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        data = asdict(self)
        data["watermark"] = str(self.watermark)
        data["sizes"] = dict(self.sizes)
        data["source"] = dict(self.source)
        data["renamed"] = dict(self.renamed)
        data["inputs"] = dict(self.inputs)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MemberManifest:
        """Inverse of :meth:`to_dict`."""
        return cls(
            member=data["member"],
            watermark=Lsn.parse(data["watermark"]),
            files=tuple(data["files"]),
            row_count=int(data["row_count"]),
            key_columns=tuple(data.get("key_columns", ())),
            written_at=data.get("written_at", ""),
            definition=data.get("definition", ""),
            incremental=bool(data.get("incremental", False)),
            delete_files=tuple(data.get("delete_files", ())),
            deleted_rows=int(data.get("deleted_rows", 0)),
            reason=data.get("reason", ""),
            sizes={uri: int(size) for uri, size in data.get("sizes", {}).items()},
            base_snapshot_id=None if data.get("base_snapshot_id") is None else int(data["base_snapshot_id"]),
            resynced=data.get("resynced", ""),
            source=dict(data.get("source", {})),
            renamed=dict(data.get("renamed", {})),
            shape=data.get("shape", ""),
            inputs=dict(data.get("inputs", {})),
        )


@dataclass(frozen=True, slots=True)
class JobSpec:
    """Everything the Spark job needs; carries paths, W and names only, never credentials.

    Attributes:
        group: the declaration as ``RefreshGroup.to_dict()``.
        run_key: the run key.
        watermark: W of this run.
        prev_watermark: W of the previous cut, ``None`` before the first cut.
        cut_number: the number the cut will get if published.
        staging_root: this run's staging root.
        capture_manifest: URI of the capture step's :class:`CaptureManifest`.
        previous_files: per member, the Parquet data files of its snapshot in the previous cut.
        members: the members to compute (all by default; one when run per member).
        previous_key_columns: per mirror, its key in the previous cut (empty: not known); a
            changed key fails the refresh.
        carried: members that keep their snapshot of the previous cut, with the reason (nothing
            changed for them); the job computes none of them and reads them from ``previous_files``.
        previous_deletes: per member, the position-delete files of its snapshot in the previous cut.
        rewrite: mirrors to write whole rather than merge-on-read, with the reason (compaction).
        copies: local copies of previous files Spark cannot read at their URIs (URI to copy).
        previous_snapshots: per member, its snapshot id in the previous cut (an incremental output
            records it as its base).
        incremental: derived members that may update their previous snapshot (made from their
            definition now; its files are in ``previous_files``) from their sources' changes.
        shapes: per incremental SQL member, the query shape recorded with its previous snapshot
            (:attr:`MemberManifest.shape`).
    """

    group: dict[str, Any]
    run_key: str
    watermark: Lsn
    prev_watermark: Lsn | None
    cut_number: int
    staging_root: str
    capture_manifest: str
    previous_files: dict[str, tuple[str, ...]] = field(default_factory=dict)
    members: tuple[str, ...] = ()
    previous_key_columns: dict[str, tuple[str, ...]] = field(default_factory=dict)
    carried: dict[str, str] = field(default_factory=dict)
    previous_deletes: dict[str, tuple[str, ...]] = field(default_factory=dict)
    rewrite: dict[str, str] = field(default_factory=dict)
    copies: dict[str, str] = field(default_factory=dict)
    previous_snapshots: dict[str, int] = field(default_factory=dict)
    incremental: tuple[str, ...] = ()
    shapes: dict[str, str] = field(default_factory=dict)

    def previous_snapshot(self, member: str) -> SnapshotFiles:
        """The files of ``member``'s snapshot in the previous cut (none: no previous cut, or not needed)."""
        data, deletes = self.previous_files.get(member, ()), self.previous_deletes.get(member, ())
        copies = tuple((uri, self.copies[uri]) for uri in (*data, *deletes) if uri in self.copies)
        return SnapshotFiles(data, deletes, copies)

    def fits(self, manifest: MemberManifest) -> bool:
        """Whether a member's staged output can serve this spec: an incremental one only when it
        applies to the previous snapshot this spec reads (a retry planned on a newer cut recomputes)."""
        base = self.previous_snapshots.get(manifest.member)
        return not manifest.incremental or manifest.base_snapshot_id in (None, base)

    def computed_members(self) -> tuple[str, ...]:
        """The members this spec computes: the requested ones (default all) that are not carried."""
        names = self.members or tuple(member["name"] for member in self.group["members"])
        carried = {name.lower() for name in self.carried}
        return tuple(name for name in names if name.lower() not in carried)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        data = asdict(self)
        data.update(
            watermark=str(self.watermark),
            prev_watermark=None if self.prev_watermark is None else str(self.prev_watermark),
        )
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JobSpec:
        """Inverse of :meth:`to_dict`."""
        prev = data.get("prev_watermark")
        return cls(
            group=data["group"],
            run_key=data["run_key"],
            watermark=Lsn.parse(data["watermark"]),
            prev_watermark=None if prev is None else Lsn.parse(prev),
            cut_number=int(data["cut_number"]),
            staging_root=data["staging_root"],
            capture_manifest=data["capture_manifest"],
            previous_files={k: tuple(v) for k, v in data.get("previous_files", {}).items()},
            members=tuple(data.get("members", ())),
            previous_key_columns={k: tuple(v) for k, v in data.get("previous_key_columns", {}).items()},
            carried=dict(data.get("carried", {})),
            previous_deletes={k: tuple(v) for k, v in data.get("previous_deletes", {}).items()},
            rewrite=dict(data.get("rewrite", {})),
            copies=dict(data.get("copies", {})),
            previous_snapshots={k: int(v) for k, v in data.get("previous_snapshots", {}).items()},
            incremental=tuple(data.get("incremental", ())),
            shapes=dict(data.get("shapes", {})),
        )
