"""The record of a member's staged output, and the files of the member snapshot it applies to."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from airflow_provider_streambed.lsn import Lsn


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
            (:meth:`.capture_manifest.TableCapture.source_record`), kept with its snapshot.
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
