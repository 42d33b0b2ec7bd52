"""The columns and operation codes of changelog segments (see DESIGN.md section 2)."""

from __future__ import annotations

#: Changelog segment columns added to each source row.
COMMIT_LSN, XID, SEQ, OP = "_commit_lsn", "_xid", "_seq", "_op"
#: Prefix of the per-column unchanged-TOAST marker (``_toast_<column>``, boolean).
TOAST_MARKER_PREFIX = "_toast_"
#: Changelog conventions the refresh step relies on: ``_op`` is ``I``/``U``/``D``/``T``; a ``D`` row
#: carries at least the key columns of the deleted row; a ``T`` row (other columns null) removes
#: every earlier row of its table; an update that changes the key is written as a ``D`` of the old
#: key followed (same ``_commit_lsn``, higher ``_seq``) by a ``U`` of the new key whose
#: unchanged-TOAST values are already resolved (a marker is resolved from the same key's
#: previous image only). Bootstrap copy rows are ``I`` with ``_commit_lsn`` 0.
OP_INSERT, OP_UPDATE, OP_DELETE, OP_TRUNCATE = "I", "U", "D", "T"
