"""The cut's overwrite snapshot of one member table: every live data file replaced, parent read once.

pyiceberg's ``_OverwriteFiles`` reads each manifest of the parent snapshot two or three times
(to find live files, to build the deleted entries, to decide which manifests to keep), and it
carries every earlier manifest that holds only deleted entries into the new snapshot, so the
manifest list of a member table grew by one manifest per cut and each publish re-read all of
them. :class:`ReplaceAll` reads the parent's manifest list once and only the manifests that
still have live data files, once. The new snapshot lists one manifest holding the added files
and a ``DELETED`` entry for every previous data file (deletions stay on record for incremental
readers and snapshot expiry), and the parent's delete-file manifests, unchanged; it
drops data manifests without live files, as Iceberg's Java ``MergingSnapshotProducer`` does
("only keep manifests that have live data files or that were written by this commit"). Readers
of the new snapshot see exactly the added files; older snapshots are untouched.

It relies on pyiceberg 0.12 internals: ``_OverwriteFiles`` and, in :meth:`ReplaceAll._commit` (a
copy of ``_SnapshotProducer._commit`` for format-version-2 tables), ``_new_manifest_list_file_name``,
``_summary``, ``_written_manifest_lists`` and the producer's attributes; see also :mod:`.manifests`.
"""

from __future__ import annotations

import logging
import uuid
from collections import defaultdict

from pyiceberg.exceptions import CommitFailedException
from pyiceberg.manifest import ManifestContent, ManifestEntry, ManifestEntryStatus, ManifestFile, ManifestWriter
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.table import Transaction
from pyiceberg.table.refs import MAIN_BRANCH, SnapshotRefType
from pyiceberg.table.snapshots import Operation, Snapshot
from pyiceberg.table.update import (
    AddSnapshotUpdate,
    AssertRefSnapshotId,
    SetSnapshotRefUpdate,
    UpdatesAndRequirements,
)
from pyiceberg.table.update.snapshot import _new_manifest_list_file_name, _OverwriteFiles

from airflow_provider_streambed.publish.manifests import (
    ReusedFormatManifestListWriter,
    ReusedFormatManifestWriter,
    read_live_entries,
    read_manifest_list,
)

logger = logging.getLogger(__name__)


class ReplaceAll(_OverwriteFiles):
    """One overwrite snapshot (an append on an empty table) whose data files are exactly the added ones.

    Use as a context manager on a non-autocommit transaction, like pyiceberg's producers; add the
    new files with :meth:`append_data_file`. Every live data file of the parent is deleted. The
    snapshot gets the main branch and the tag ``tag``.
    """

    def __init__(
        self, transaction: Transaction, commit_uuid: uuid.UUID | None, snapshot_properties: dict[str, str], tag: str
    ) -> None:
        metadata = transaction.table_metadata
        self._tag = tag
        operation = Operation.OVERWRITE if metadata.current_snapshot() is not None else Operation.APPEND
        super().__init__(
            operation=operation,
            transaction=transaction,
            io=transaction._table.io,
            commit_uuid=commit_uuid,
            snapshot_properties=snapshot_properties,
        )
        self._parent_entries: list[ManifestEntry] = []
        self._kept_manifests: list[ManifestFile] = []
        parent = None if self._parent_snapshot_id is None else metadata.snapshot_by_id(self._parent_snapshot_id)
        if parent is None:
            return
        for manifest in read_manifest_list(self._io, parent.manifest_list):
            if manifest.content == ManifestContent.DELETES:
                self._kept_manifests.append(manifest)  # delete files are not ours to drop (none are expected)
            elif manifest.has_added_files() or manifest.has_existing_files():
                self._parent_entries.extend(read_live_entries(self._io, manifest))
        for entry in self._parent_entries:
            self.delete_data_file(entry.data_file)

    def _manifests(self) -> list[ManifestFile]:
        """The added files and the parent's live files (as ``DELETED``) in one data manifest per spec,
        then the parent's delete-file manifests (its data manifests hold no live file any more).

        One manifest instead of pyiceberg's two (added, deleted) saves an Avro write per member;
        mixed entries in one manifest are what Iceberg's Java manifest merging writes too.
        """
        current = self._transaction.table_metadata.spec().spec_id
        deleted: dict[int, list[ManifestEntry]] = defaultdict(list)
        for entry in self._parent_entries:
            deleted[entry.data_file.spec_id].append(entry)
        written = []
        for spec_id in sorted(deleted.keys() | ({current} if self._added_data_files else set())):
            with self.new_manifest_writer(self.spec(spec_id)) as writer:
                for data_file in self._added_data_files if spec_id == current else ():
                    writer.add_entry(
                        ManifestEntry.from_args(
                            status=ManifestEntryStatus.ADDED,
                            snapshot_id=self._snapshot_id,
                            sequence_number=None,
                            file_sequence_number=None,
                            data_file=data_file,
                        )
                    )
                for entry in deleted[spec_id]:
                    writer.delete(entry)
            written.append(writer.to_manifest_file())
        return written + self._kept_manifests

    def new_manifest_writer(self, spec: PartitionSpec) -> ManifestWriter:
        """pyiceberg's manifest writer; for format version 2 one that reuses the entry format."""
        if self._transaction.table_metadata.format_version != 2:
            return super().new_manifest_writer(spec)
        output = self.new_manifest_output()
        return ReusedFormatManifestWriter(spec, self.schema(), output, self._snapshot_id, self._compression)

    def _commit(self) -> UpdatesAndRequirements:
        """pyiceberg's ``_SnapshotProducer._commit`` on the main branch of a format-version-2 table, with
        the reused-format manifest list writer, plus the tag on the new snapshot.

        The tag is staged here rather than with ``ManageSnapshots`` afterwards, which copies the table
        metadata once more. The main-branch requirement (and, on the group path, the compare-and-swap
        on the metadata location) refuses any concurrent change of the table.
        """
        tag = SetSnapshotRefUpdate.model_validate(
            {"ref-name": self._tag, "type": SnapshotRefType.TAG, "snapshot-id": self._snapshot_id}
        )
        metadata = self._transaction.table_metadata
        if metadata.format_version != 2:
            updates, requirements = super()._commit()
            return (*updates, tag), requirements
        manifests = self._manifests()
        sequence_number = metadata.next_sequence_number()
        name = _new_manifest_list_file_name(snapshot_id=self._snapshot_id, attempt=0, commit_uuid=self.commit_uuid)
        location = self._transaction._table.location_provider().new_metadata_location(name)
        self._written_manifest_lists.append(location)
        output = self._io.new_output(location)
        with ReusedFormatManifestListWriter(
            output, self._snapshot_id, self._parent_snapshot_id, sequence_number, self._compression
        ) as writer:
            writer.add_manifests(manifests)
        snapshot = Snapshot.model_validate({
            "snapshot-id": self._snapshot_id,
            "parent-snapshot-id": self._parent_snapshot_id,
            "manifest-list": location,
            "sequence-number": sequence_number,
            "summary": self._summary(self.snapshot_properties),
            "schema-id": metadata.current_schema_id,
        })
        main = SetSnapshotRefUpdate.model_validate(
            {"ref-name": MAIN_BRANCH, "type": SnapshotRefType.BRANCH, "snapshot-id": self._snapshot_id}
        )
        head = metadata.refs[MAIN_BRANCH].snapshot_id if MAIN_BRANCH in metadata.refs else None
        unmoved = AssertRefSnapshotId.model_validate({"ref": MAIN_BRANCH, "snapshot-id": head})
        return (AddSnapshotUpdate(snapshot=snapshot), main, tag), (unmoved,)

    def _refresh_for_retry(self) -> None:
        """No rebase onto a newer parent: a concurrent change of a member table is a conflict."""
        raise CommitFailedException(
            f"table {'.'.join(self._transaction._table.name())}: changed by another writer since its cut was built"
        )
