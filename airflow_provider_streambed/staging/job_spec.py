"""The Spark job's spec: what the job computes for a run and the files it reads, never credentials."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.staging.member_manifest import MemberManifest, SnapshotFiles


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
        capture_manifest: URI of the capture step's :class:`.capture_manifest.CaptureManifest`.
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
            (:attr:`.member_manifest.MemberManifest.shape`).
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
