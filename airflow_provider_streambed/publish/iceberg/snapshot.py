"""The cut's snapshot of one member table, parent read once: a whole rewrite or a row delta.

pyiceberg's ``_OverwriteFiles`` reads each manifest of the parent snapshot two or three times
(to find live files, to build the deleted entries, to decide which manifests to keep), and it
carries every earlier manifest that holds only deleted entries into the new snapshot, so the
manifest list of a member table grew by one manifest per cut and each publish re-read all of
them. :class:`ReplaceAll` (a member written whole) reads the parent's manifest list once and only
the manifests that still have live files, once. The new snapshot lists one manifest holding the
added files and a ``DELETED`` entry for every previous data file, and one with a ``DELETED``
entry for every previous delete file (deletions stay on record for incremental readers and
snapshot expiry); it drops manifests without live files, as Iceberg's Java
``MergingSnapshotProducer`` does ("only keep manifests that have live data files or that were
written by this commit"). Readers of the new snapshot see exactly the added files; older
snapshots are untouched.

:class:`RowDelta` (a merge-on-read mirror) lists a manifest of the added data files, a delete
manifest of the added position-delete files, and every manifest of the parent unchanged: files
that held no changed row are not touched. pyiceberg 0.12 writes no delete manifests nor row
deltas, hence these classes.

They rely on pyiceberg 0.12 internals: ``_OverwriteFiles`` and, in :meth:`_CutSnapshot._commit` (a
copy of ``_SnapshotProducer._commit`` for format-version-2 tables), ``_new_manifest_list_file_name``,
``_summary``, ``_written_manifest_lists`` and the producer's attributes, and ``_refresh_for_retry``
(overridden: no rebase); see also :mod:`.manifests`. ``tests/unit/publish/iceberg/test_snapshot.py``
checks them against the installed pyiceberg.
"""

from __future__ import annotations

import logging
import uuid
from collections import defaultdict
from collections.abc import Iterable

from pyiceberg.exceptions import CommitFailedException
from pyiceberg.manifest import (
    DataFileContent,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    ManifestWriter,
)
from pyiceberg.partitioning import PartitionSpec
from pyiceberg.table import Transaction
from pyiceberg.table.refs import MAIN_BRANCH, SnapshotRefType
from pyiceberg.table.snapshots import Operation, Snapshot, Summary
from pyiceberg.table.update import (
    AddSnapshotUpdate,
    AssertRefSnapshotId,
    SetSnapshotRefUpdate,
    UpdatesAndRequirements,
)
from pyiceberg.table.update.snapshot import _new_manifest_list_file_name, _OverwriteFiles
from pyiceberg.typedef import EMPTY_DICT

from airflow_provider_streambed.exceptions import PublishError
from airflow_provider_streambed.publish.iceberg.manifests import (
    DeleteManifestWriter,
    ReusedFormatManifestListWriter,
    ReusedFormatManifestWriter,
    read_live_entries,
    read_manifest_list,
)

logger = logging.getLogger(__name__)


class _CutSnapshot(_OverwriteFiles):
    """One snapshot of a member table for a cut, on the main branch and tagged ``tag``.

    Use as a context manager on a non-autocommit transaction, like pyiceberg's producers; add
    the new data and delete files with :meth:`append_data_file`. Subclasses say which manifests
    the snapshot lists.
    """

    def __init__(
        self,
        transaction: Transaction,
        commit_uuid: uuid.UUID | None,
        snapshot_properties: dict[str, str],
        tag: str,
        operation: Operation,
    ) -> None:
        self._tag = tag
        super().__init__(
            operation=operation,
            transaction=transaction,
            io=transaction._table.io,
            commit_uuid=commit_uuid,
            snapshot_properties=snapshot_properties,
        )

    def _parent_manifests(self) -> list[ManifestFile]:
        metadata = self._transaction.table_metadata
        parent = None if self._parent_snapshot_id is None else metadata.snapshot_by_id(self._parent_snapshot_id)
        return [] if parent is None else read_manifest_list(self._io, parent.manifest_list)

    def _write_manifest(
        self, spec_id: int, content: ManifestContent, added: Iterable[ManifestEntry], deleted: Iterable[ManifestEntry]
    ) -> ManifestFile:
        """One manifest of ``content``: ``added`` entries of this snapshot, ``deleted`` (live) parent entries."""
        with self.new_manifest_writer(self.spec(spec_id), content) as writer:
            for entry in added:
                writer.add_entry(entry)
            for entry in deleted:
                writer.delete(entry)
        return writer.to_manifest_file()

    def _added_entries(self, content: DataFileContent) -> list[ManifestEntry]:
        return [
            ManifestEntry.from_args(
                status=ManifestEntryStatus.ADDED,
                snapshot_id=self._snapshot_id,
                sequence_number=None,
                file_sequence_number=None,
                data_file=data_file,
            )
            for data_file in self._added_data_files
            if data_file.content == content
        ]

    def new_manifest_writer(
        self, spec: PartitionSpec, content: ManifestContent = ManifestContent.DATA
    ) -> ManifestWriter:
        """pyiceberg's manifest writer; for format version 2 one that reuses the entry format."""
        if self._transaction.table_metadata.format_version != 2:
            if content != ManifestContent.DATA:
                raise PublishError("delete files need an Iceberg table of format version 2")
            return super().new_manifest_writer(spec)
        output = self.new_manifest_output()
        writer = DeleteManifestWriter if content == ManifestContent.DELETES else ReusedFormatManifestWriter
        return writer(spec, self.schema(), output, self._snapshot_id, self._compression)

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


class ReplaceAll(_CutSnapshot):
    """A snapshot whose live files are exactly the added ones: every live data and delete file of
    the parent is deleted (a whole rewrite of the member). The added files may include position
    deletes over the added data files (a first cut that adopts a bootstrap copy)."""

    def __init__(
        self, transaction: Transaction, commit_uuid: uuid.UUID | None, snapshot_properties: dict[str, str], tag: str
    ) -> None:
        first = transaction.table_metadata.current_snapshot() is None
        super().__init__(transaction, commit_uuid, snapshot_properties, tag,
                         Operation.APPEND if first else Operation.OVERWRITE)
        self._parent_entries: list[ManifestEntry] = []
        for manifest in self._parent_manifests():
            if manifest.has_added_files() or manifest.has_existing_files():
                self._parent_entries.extend(read_live_entries(self._io, manifest))
        for entry in self._parent_entries:
            self.delete_data_file(entry.data_file)

    def _manifests(self) -> list[ManifestFile]:
        """Per spec, one data manifest with the added data files and the parent's live data files (as
        ``DELETED``), and one delete manifest with the added delete files and the parent's live
        delete files (as ``DELETED``).

        One data manifest instead of pyiceberg's two (added, deleted) saves an Avro write per
        member; mixed entries in one manifest are what Iceberg's Java manifest merging writes too.
        """
        spec_id = self._transaction.table_metadata.spec().spec_id
        added = {
            (spec_id, ManifestContent.DATA): self._added_entries(DataFileContent.DATA),
            (spec_id, ManifestContent.DELETES): self._added_entries(DataFileContent.POSITION_DELETES),
        }
        deleted: dict[tuple[int, ManifestContent], list[ManifestEntry]] = defaultdict(list)
        for entry in self._parent_entries:
            data = entry.data_file.content == DataFileContent.DATA
            deleted[(entry.data_file.spec_id, ManifestContent.DATA if data else ManifestContent.DELETES)].append(entry)
        for key, entries in added.items():
            if entries:
                deleted.setdefault(key, [])
        return [
            self._write_manifest(spec, content, added.get((spec, content), []), entries)
            for (spec, content), entries in sorted(deleted.items())
        ]


class RowDelta(_CutSnapshot):
    """A snapshot that adds data files and position-delete files to the parent's, keeping every
    parent manifest as it is (merge-on-read): the parent's files stay live, less the rows the
    new delete files name."""

    def __init__(
        self, transaction: Transaction, commit_uuid: uuid.UUID | None, snapshot_properties: dict[str, str], tag: str
    ) -> None:
        if transaction.table_metadata.current_snapshot() is None:
            raise PublishError(f"table {'.'.join(transaction._table.name())}: a row delta needs a previous snapshot")
        super().__init__(transaction, commit_uuid, snapshot_properties, tag, Operation.OVERWRITE)

    def _summary(self, snapshot_properties: dict[str, str] = EMPTY_DICT) -> Summary:
        """The summary, with Iceberg's operation of a row delta: ``append`` when it only adds data
        files, ``delete`` when it only adds deletes, else ``overwrite`` (incremental readers rely on it)."""
        contents = {data_file.content for data_file in self._added_data_files}
        if contents == {DataFileContent.DATA}:
            self._operation = Operation.APPEND
        elif contents == {DataFileContent.POSITION_DELETES}:
            self._operation = Operation.DELETE
        return super()._summary(snapshot_properties)

    def _manifests(self) -> list[ManifestFile]:
        """The added data files and the added delete files in a manifest each, then the parent's manifests."""
        spec_id = self._transaction.table_metadata.spec().spec_id
        written = []
        for file_content, content in ((DataFileContent.DATA, ManifestContent.DATA),
                                      (DataFileContent.POSITION_DELETES, ManifestContent.DELETES)):
            if entries := self._added_entries(file_content):
                written.append(self._write_manifest(spec_id, content, entries, []))
        return written + self._parent_manifests()
