"""Manifest Avro files with reader and writer trees built once per process, not once per file.

pyiceberg converts each Avro file's header schema to an Iceberg schema and resolves a reader tree
against the read schema on every file it opens, and builds the entry schema, the writer tree and
the header schema text on every manifest it writes; that is most of the time to read or write a
small manifest (about 1 ms each here). These schemas depend only on the format version and the
partition type, the same for every member table, so this module keeps them per process (the
trees are immutable, safe to share between threads). :func:`read_manifest_list` and
:func:`read_live_entries` are pyiceberg 0.12's ``read_manifest_list`` and
``ManifestFile.fetch_manifest_entry`` on such files; :class:`ReusedFormatManifestWriter` is its
``ManifestWriterV2``. They rely on pyiceberg internals: ``AvroFile`` (and its ``_read_header``),
``AvroOutputFile`` (its attributes and ``_write_header``), ``resolve_reader``, ``resolve_writer``,
``_SCHEMA_KEY``, ``META_SCHEMA``, ``DEFAULT_READ_VERSION``, ``ManifestWriter._with_partition``
and ``_meta`` (and the writers' attributes), and ``_inherit_from_manifest``;
``tests/unit/publish/iceberg/test_manifests.py`` checks them against the installed pyiceberg.
"""

from __future__ import annotations

import json
import os
from typing import ClassVar, NamedTuple, TypeVar

from pyiceberg.avro.codecs import AVRO_CODEC_KEY, CODEC_MAPPING_ICEBERG_TO_AVRO
from pyiceberg.avro.decoder import new_decoder
from pyiceberg.avro.file import _SCHEMA_KEY, MAGIC, META_SCHEMA, SYNC_SIZE, AvroFile, AvroFileHeader, AvroOutputFile
from pyiceberg.avro.reader import Reader
from pyiceberg.avro.resolver import construct_reader, construct_writer, resolve_reader, resolve_writer
from pyiceberg.avro.writer import Writer
from pyiceberg.io import FileIO, OutputFile
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
    ManifestListWriterV2,
    ManifestWriterV2,
    PartitionFieldSummary,
    _inherit_from_manifest,
)
from pyiceberg.schema import Schema
from pyiceberg.table import TableProperties
from pyiceberg.typedef import StructProtocol
from pyiceberg.utils.schema_conversion import AvroSchemaConversion

D = TypeVar("D", bound=StructProtocol)

_HEADER_READER = construct_reader(META_SCHEMA, {-1: AvroFileHeader})
_HEADER_WRITER = construct_writer(META_SCHEMA)


class _ReusedReaderAvroFile(AvroFile[StructProtocol]):
    """An ``AvroFile`` that resolves its reader tree once per (header schema, read schema)."""

    _readers: ClassVar[dict[tuple[str, int], Reader]] = {}

    def __enter__(self) -> _ReusedReaderAvroFile:
        with self.input_file.open() as stream:
            self.decoder = new_decoder(stream.read())
        self.header = self._read_header()
        key = (self.header.meta[_SCHEMA_KEY], id(self.read_schema))  # read schemas are pyiceberg constants
        reader = self._readers.get(key)
        if reader is None:
            self.schema = self.header.get_schema()
            reader = resolve_reader(self.schema, self.read_schema or self.schema, self.read_types, self.read_enums)
            reader = self._readers.setdefault(key, reader)
        self.reader = reader
        return self

    def _read_header(self) -> AvroFileHeader:
        return _HEADER_READER.read(self.decoder)


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


class _AvroFormat(NamedTuple):
    """How records of one Avro file schema are written: the schema, its writer tree, its header text."""

    file_schema: Schema
    schema_name: str
    writer: Writer
    avro_schema: str

    @classmethod
    def of(cls, file_schema: Schema, record_schema: Schema, schema_name: str) -> _AvroFormat:
        """What pyiceberg's ``AvroOutputFile`` derives from these schemas on every file."""
        avro_schema = AvroSchemaConversion().iceberg_to_avro(file_schema, schema_name=schema_name)
        writer = resolve_writer(record_schema=record_schema, file_schema=file_schema)
        return cls(file_schema, schema_name, writer, json.dumps(avro_schema))


class _ReusedFormatAvroOutputFile(AvroOutputFile[D]):
    """pyiceberg's ``AvroOutputFile`` with the writer tree and header text of an :class:`_AvroFormat`."""

    def __init__(self, output_file: OutputFile, avro_format: _AvroFormat, metadata: dict[str, str]) -> None:
        self.output_file = output_file
        self.file_schema = avro_format.file_schema
        self.schema_name = avro_format.schema_name
        self.sync_bytes = os.urandom(SYNC_SIZE)
        self.writer = avro_format.writer
        self.metadata = metadata
        self._avro_schema = avro_format.avro_schema

    def _write_header(self) -> None:
        codec = self.metadata.get(AVRO_CODEC_KEY, TableProperties.WRITE_AVRO_COMPRESSION_DEFAULT)
        codec = CODEC_MAPPING_ICEBERG_TO_AVRO.get(codec, codec)
        meta = {**self.metadata, _SCHEMA_KEY: self._avro_schema, AVRO_CODEC_KEY: codec}
        _HEADER_WRITER.write(self.encoder, AvroFileHeader(MAGIC, meta, self.sync_bytes))


class ReusedFormatManifestWriter(ManifestWriterV2):
    """pyiceberg's format-version-2 manifest writer, with the Avro format made once per partition type."""

    _formats: ClassVar[dict[str, _AvroFormat]] = {}

    def new_writer(self) -> AvroOutputFile[ManifestEntry]:
        key = repr(self._spec.partition_type(self._schema))
        avro_format = self._formats.get(key)
        if avro_format is None:
            made = _AvroFormat.of(self._with_partition(2), self._with_partition(DEFAULT_READ_VERSION), "manifest_entry")
            avro_format = self._formats.setdefault(key, made)
        return _ReusedFormatAvroOutputFile[ManifestEntry](self._output_file, avro_format, self._meta)


class ReusedFormatManifestListWriter(ManifestListWriterV2):
    """pyiceberg's format-version-2 manifest list writer, with the Avro format made once per process."""

    _format = _AvroFormat.of(
        MANIFEST_LIST_FILE_SCHEMAS[2], MANIFEST_LIST_FILE_SCHEMAS[DEFAULT_READ_VERSION], "manifest_file"
    )

    def __enter__(self) -> ReusedFormatManifestListWriter:
        self._writer = _ReusedFormatAvroOutputFile[ManifestFile](self._output_file, self._format, self._meta)
        self._writer.__enter__()
        return self


class DeleteManifestWriter(ReusedFormatManifestWriter):
    """A :class:`ReusedFormatManifestWriter` for a manifest of delete files (pyiceberg 0.12 writes
    data manifests only)."""

    def content(self) -> ManifestContent:
        return ManifestContent.DELETES

    @property
    def _meta(self) -> dict[str, str]:
        return {**super()._meta, "content": "deletes"}
