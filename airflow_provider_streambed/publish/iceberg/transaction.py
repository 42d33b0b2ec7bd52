"""Staging updates on a pyiceberg ``Transaction`` and applying them to table metadata cheaply.

Relies on pyiceberg 0.12 internals: ``_TableMetadataUpdateContext``, ``_apply_table_update`` and
``_update_table_metadata_log`` (:func:`apply_updates`), and a transaction's ``_table`` and
``_updates`` (:class:`MemoTransaction`).
"""

from __future__ import annotations

from datetime import datetime

from pyiceberg.table import Transaction
from pyiceberg.table.metadata import TableMetadata
from pyiceberg.table.update import (
    TableUpdate,
    _apply_table_update,
    _TableMetadataUpdateContext,
    _update_table_metadata_log,
)
from pyiceberg.utils.datetime import datetime_to_millis


def apply_updates(
    base: TableMetadata, updates: tuple[TableUpdate, ...], base_location: str | None = None
) -> TableMetadata:
    """pyiceberg's ``update_table_metadata`` without its closing deep copy of the whole metadata.

    That copy guards callers that mutate the result; nothing here does (pyiceberg's models are
    frozen), and it was the largest cost of a member's publish after the Avro files, growing with
    the table's history. Measured on the 2-core development machine with one property update on a
    table's metadata: 0.9 / 4.3 / 7.2 ms per call for ``update_table_metadata`` at 50 / 150 / 300
    snapshots, against about 0.01 ms here; at 300 snapshots and 20 members that is 0.14 s of a
    cut whose publish goal is 0.25 s. Relies on pyiceberg 0.12 internals ``_TableMetadataUpdateContext``,
    ``_apply_table_update`` and ``_update_table_metadata_log``.
    """
    context = _TableMetadataUpdateContext()
    metadata = base
    for update in updates:
        metadata = _apply_table_update(update, metadata, context)
    if context.has_changes():
        if base_location:
            metadata = _update_table_metadata_log(metadata, base_location, base.last_updated_ms)
        if base.last_updated_ms == metadata.last_updated_ms:
            metadata = metadata.model_copy(update={"last_updated_ms": datetime_to_millis(datetime.now().astimezone())})
    metadata.spec().check_compatible(metadata.schema())
    metadata.sort_order().check_compatible(metadata.schema())
    return metadata


class MemoTransaction(Transaction):
    """A ``Transaction`` that applies its staged updates once per change, not on every read.

    pyiceberg recomputes (deep-copies) the table metadata on each ``table_metadata`` access, about
    two dozen times per snapshot; updates are only ever appended here, so their count is a valid key.
    Only for staging: its updates are written or sent by this package, never committed through
    ``commit_transaction``, whose retry refreshes the table and drops updates (the key would lie).
    """

    _memo: tuple[int, TableMetadata] | None = None

    @property
    def table_metadata(self) -> TableMetadata:
        if self._memo is None or self._memo[0] != len(self._updates):
            self._memo = (len(self._updates), apply_updates(self._table.metadata, self._updates))
        return self._memo[1]
