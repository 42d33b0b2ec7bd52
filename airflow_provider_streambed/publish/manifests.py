"""Reading a parent snapshot's manifest list and manifests with Avro reader trees built once per process.

pyiceberg converts each Avro file's header schema to an Iceberg schema and resolves a reader tree
against the read schema on every file it opens; for a manifest that is most of the time to read
it (about 1 ms here). The schemas of manifests and manifest lists depend only on the format
version and the partition type, the same for every member table, so :class:`_ReusedReaderAvroFile`
keeps each resolved reader tree (immutable, safe to share between threads) keyed by the header's
schema text. The functions below are pyiceberg 0.12's ``read_manifest_list`` and
``ManifestFile.fetch_manifest_entry`` on that file class; they rely on its internals
``AvroFile``, ``resolve_reader``, ``_SCHEMA_KEY``, ``DEFAULT_READ_VERSION`` and
``_inherit_from_manifest``.
"""

from __future__ import annotations

import threading
from typing import ClassVar

from pyiceberg.avro.decoder import new_decoder
from pyiceberg.avro.file import _SCHEMA_KEY, AvroFile
from pyiceberg.avro.reader import Reader
from pyiceberg.avro.resolver import resolve_reader
from pyiceberg.io import FileIO
from pyiceberg.manifest import (
    DEFAULT_READ_VERSION,
    MANIFEST_ENTRY_SCHEMAS,
    MANIFEST_LIST_FILE_SCHEMAS,
    DataFile,
    DataFileContent,
    FileFormat,
    ManifestContent,
    ManifestEntry,
    ManifestEntryStatus,
    ManifestFile,
    PartitionFieldSummary,
    _inherit_from_manifest,
)
from pyiceberg.typedef import StructProtocol


class _ReusedReaderAvroFile(AvroFile[StructProtocol]):
    """An ``AvroFile`` that resolves its reader tree once per (header schema, read schema)."""

    _readers: ClassVar[dict[tuple[str, int], Reader]] = {}
    _lock: ClassVar[threading.Lock] = threading.Lock()

    def __enter__(self) -> _ReusedReaderAvroFile:
        with self.input_file.open() as stream:
            self.decoder = new_decoder(stream.read())
        self.header = self._read_header()
        key = (self.header.meta[_SCHEMA_KEY], id(self.read_schema))
        reader = self._readers.get(key)
        if reader is None:
            self.schema = self.header.get_schema()
            reader = resolve_reader(self.schema, self.read_schema or self.schema, self.read_types, self.read_enums)
            with self._lock:
                self._readers[key] = reader
        self.reader = reader
        return self


def read_manifest_list(io: FileIO, location: str) -> list[ManifestFile]:
    """The manifests listed in the manifest list at ``location``."""
    with _ReusedReaderAvroFile(
        io.new_input(location),
        MANIFEST_LIST_FILE_SCHEMAS[DEFAULT_READ_VERSION],
        read_types={-1: ManifestFile, 508: PartitionFieldSummary},
        read_enums={517: ManifestContent},
    ) as reader:
        return list(reader)  # type: ignore[arg-type]  # the read types make ManifestFile records


def read_live_entries(io: FileIO, manifest: ManifestFile) -> list[ManifestEntry]:
    """The ``ADDED`` and ``EXISTING`` entries of ``manifest``, with inherited sequence numbers."""
    with _ReusedReaderAvroFile(
        io.new_input(manifest.manifest_path),
        MANIFEST_ENTRY_SCHEMAS[DEFAULT_READ_VERSION],
        read_types={-1: ManifestEntry, 2: DataFile},
        read_enums={0: ManifestEntryStatus, 101: FileFormat, 134: DataFileContent},
    ) as reader:
        entries: list[ManifestEntry] = list(reader)  # type: ignore[arg-type]  # ManifestEntry records
    return [
        _inherit_from_manifest(entry, manifest) for entry in entries if entry.status != ManifestEntryStatus.DELETED
    ]
