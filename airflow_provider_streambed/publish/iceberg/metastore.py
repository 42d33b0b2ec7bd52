"""A table's metadata files named, and a new table staged, without a catalog commit.

Publish writes each member's next metadata file itself and moves the pointer later, all members
at once, so it needs pyiceberg's own answers to "where does this table's next metadata file go"
and "what is this new table", without committing either. Relies on pyiceberg 0.12 internals of
``MetastoreCatalog`` (the SQL catalog's base): ``_parse_metadata_version``,
``_resolve_table_location``, ``_create_staged_table`` and ``Catalog._convert_schema_if_needed``;
``tests/unit/publish/iceberg/test_metastore.py`` checks them against the installed pyiceberg.
"""

from __future__ import annotations

import pyarrow as pa
from pyiceberg.catalog import Catalog, MetastoreCatalog
from pyiceberg.table import StagedTable
from pyiceberg.table.locations import load_location_provider
from pyiceberg.table.metadata import TableMetadata


def next_metadata_location(metadata: TableMetadata, location: str) -> str:
    """Where the metadata file after the one at ``location`` (holding ``metadata``) goes: the next
    version, named by the table's location provider as a pyiceberg commit would name it."""
    version = MetastoreCatalog._parse_metadata_version(location) + 1
    provider = load_location_provider(metadata.location, metadata.properties)
    return provider.new_table_metadata_file_location(version)


def default_table_location(catalog: MetastoreCatalog, identifier: tuple[str, str]) -> str:
    """Where ``catalog`` puts table ``identifier`` when it is created without a location."""
    return catalog._resolve_table_location(None, *identifier)


def stage_table(catalog: MetastoreCatalog, identifier: tuple[str, str], schema: pa.Schema) -> StagedTable:
    """Table ``identifier`` as ``catalog`` would create it with ``schema`` (at its default location),
    not yet in the catalog: its first metadata file is named, not written."""
    return catalog._create_staged_table(identifier, Catalog._convert_schema_if_needed(schema))
