"""The manifest readers and writers with reused Avro schemas agree with pyiceberg's own (its Avro
internals, ``_inherit_from_manifest`` and ``ManifestWriter``'s ``_with_partition`` and ``_meta``)."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pyarrow as pa
from pyiceberg.avro.file import AvroFile
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.manifest import (
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    write_manifest,
    write_manifest_list,
)
from pyiceberg.table import Table
from pyiceberg.typedef import Record

from airflow_provider_streambed.publish.iceberg.manifests import (
    DeleteManifestWriter,
    ReusedFormatManifestListWriter,
    ReusedFormatManifestWriter,
    read_live_entries,
    read_manifest_list,
)


def _table(tmp_path: Path, name: str, partitioned: bool = False) -> Table:
    catalog = SqlCatalog("t", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=tmp_path.as_uri())
    catalog.create_namespace_if_not_exists("ns")
    data = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "kind": pa.array(["a", "b", "a"])})
    table = catalog.create_table(f"ns.{name}", schema=data.schema)
    if partitioned:
        with table.update_spec() as spec:
            spec.add_identity("kind")
    table.append(data)
    table.overwrite(data.slice(0, 2))  # live, existing and deleted entries across manifests
    return table


def test_reads_match_pyiceberg(tmp_path: Path) -> None:
    table = _table(tmp_path, "reads", partitioned=True)
    for snapshot in table.snapshots():
        manifests = read_manifest_list(table.io, snapshot.manifest_list)
        assert manifests == list(snapshot.manifests(table.io))
        for ours, theirs in zip(manifests, snapshot.manifests(table.io), strict=True):
            assert repr(ours) == repr(theirs)  # every field (equality compares paths only)
            assert read_live_entries(table.io, ours) == theirs.fetch_manifest_entry(table.io, discard_deleted=True)


def test_written_manifest_reads_back_like_pyiceberg_s(tmp_path: Path) -> None:
    for partitioned in (False, True):
        table = _table(tmp_path, f"writes_{partitioned}", partitioned)
        metadata = table.metadata
        snapshot = table.current_snapshot()
        assert snapshot is not None
        entries = snapshot.manifests(table.io)[0].fetch_manifest_entry(table.io)
        written = []
        for name in ("ours", "theirs"):
            output = table.io.new_output(f"{metadata.location}/metadata/{name}-{partitioned}.avro")
            writer = (ReusedFormatManifestWriter if name == "ours" else partial(write_manifest, 2))(
                metadata.spec(), metadata.schema(), output, 42, "deflate"
            )
            with writer:
                for entry in entries:
                    writer.delete(entry)
            written.append(writer.to_manifest_file())
        ours, theirs = written
        assert ours.deleted_files_count == theirs.deleted_files_count == len(entries)
        assert ours.partitions == theirs.partitions
        read_ours = ours.fetch_manifest_entry(table.io, discard_deleted=False)
        assert read_ours == theirs.fetch_manifest_entry(table.io, discard_deleted=False)
        assert {entry.status for entry in read_ours} == {ManifestEntryStatus.DELETED}
        assert [entry.data_file for entry in read_ours] == [entry.data_file for entry in entries]
        assert _header(table, ours.manifest_path) == _header(table, theirs.manifest_path)


def _header(table: Table, path: str) -> dict[str, str]:
    with AvroFile[ManifestEntry](table.io.new_input(path)) as reader:
        return reader.header.meta


def test_written_manifest_list_reads_back_like_pyiceberg_s(tmp_path: Path) -> None:
    table = _table(tmp_path, "lists")
    snapshot = table.current_snapshot()
    assert snapshot is not None
    manifests = list(snapshot.manifests(table.io))
    locations = []
    for name in ("ours", "theirs"):
        location = f"{table.metadata.location}/metadata/{name}-list.avro"
        output = table.io.new_output(location)
        writer = (ReusedFormatManifestListWriter if name == "ours" else partial(write_manifest_list, 2))(
            output, 7, snapshot.snapshot_id, 3, "deflate"
        )
        with writer:
            writer.add_manifests(manifests)
        locations.append(location)
    ours, theirs = (read_manifest_list(table.io, location) for location in locations)
    assert [repr(m) for m in ours] == [repr(m) for m in theirs]
    assert _header(table, locations[0]) == _header(table, locations[1])


def test_a_delete_manifest_reads_back_through_pyiceberg_as_position_deletes(tmp_path: Path) -> None:
    # ManifestWriter._meta (the header's "content") and content(), which pyiceberg 0.12 writes as "data" only
    table = _table(tmp_path, "deletes")
    metadata = table.metadata
    deletes = DataFile.from_args(content=DataFileContent.POSITION_DELETES, file_path=f"{metadata.location}/d.parquet",
                                 file_format=FileFormat.PARQUET, partition=Record(), record_count=2,
                                 file_size_in_bytes=100, spec_id=0)
    output = table.io.new_output(f"{metadata.location}/metadata/deletes.avro")
    with DeleteManifestWriter(metadata.spec(), metadata.schema(), output, 42, "deflate") as writer:
        writer.add_entry(ManifestEntry.from_args(status=ManifestEntryStatus.ADDED, snapshot_id=42, data_file=deletes))
    manifest = writer.to_manifest_file()
    assert manifest.content == ManifestContent.DELETES and manifest.added_files_count == 1
    assert _header(table, manifest.manifest_path)["content"] == "deletes"
    [entry] = manifest.fetch_manifest_entry(table.io)
    assert entry.data_file.content == DataFileContent.POSITION_DELETES and entry.data_file.record_count == 2
