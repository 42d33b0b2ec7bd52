"""The summary properties streambed writes on every member snapshot, read back by later runs and readers.

Publishing writes them (:mod:`.publish`); the plan, the capture's resync checks and the cut reader
read them. They are names only, so every room can import them without reaching the one that writes.
"""

from __future__ import annotations

#: The group, cut number, W and run of the cut a snapshot belongs to.
GROUP_PROPERTY = "streambed.group"
CUT_ID_PROPERTY = "streambed.cut-id"
WATERMARK_PROPERTY = "streambed.watermark-lsn"
RUN_KEY_PROPERTY = "streambed.run-key"
#: Why a member was copied again in the cut (a resync of the member); absent otherwise.
RESYNC_PROPERTY = "streambed.resync-reason"
#: Prefix of the properties recording a mirror's source table when its snapshot was captured
#: (``storage``, ``leaves``, ``identity``, ``attnums``:
#: :meth:`~airflow_provider_streambed.staging.TableCapture.source_record`),
#: which the next capture compares.
SOURCE_PROPERTY_PREFIX = "streambed.source-"
#: The digest of the member definition the snapshot was made from.
DEFINITION_PROPERTY = "streambed.definition"
#: An incremental SQL member's query shape (:mod:`.refresh.derived.member_shape`).
SHAPE_PROPERTY = "streambed.shape"
