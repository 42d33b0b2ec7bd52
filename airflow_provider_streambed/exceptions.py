"""Exceptions raised by airflow-provider-streambed.

Every failure of the engine is a subclass of :class:`StreambedError`, so callers catch as
narrowly as they need. Messages name the group, member, table, watermark or cut involved.
"""

from __future__ import annotations


class StreambedError(Exception):
    """Base class of every error raised by this package."""


class DeclarationError(StreambedError, ValueError):
    """A refresh-group declaration is invalid (raised at DAG parse time)."""


class LedgerError(StreambedError):
    """The run ledger is missing, inconsistent or refused a write."""


class GroupBusyError(LedgerError):
    """Another run of the group holds a pinned, unpublished watermark."""


class WatermarkError(StreambedError):
    """A watermark cannot be pinned or an explicit watermark is out of range."""


class SourceError(StreambedError):
    """The source database cannot serve the group (settings, tables, rights)."""


class SlotError(SourceError):
    """The group's replication slot is missing, lost, busy or cannot be created."""


class DecodeError(StreambedError):
    """A pgoutput message could not be decoded."""


class SchemaChangeError(StreambedError):
    """A source table changed in a way the mirror cannot follow (drop, type or key change)."""


class RefreshError(StreambedError):
    """A member of a group failed to refresh."""


class PublishError(StreambedError):
    """A cut could not be published."""


class PublishConflictError(PublishError):
    """A member table was changed by another writer; nothing was published."""


class CatalogCapabilityError(PublishError):
    """The catalog cannot commit several tables atomically."""


class CutNotFoundError(StreambedError, LookupError):
    """The requested cut does not exist in the ledger."""


class ConnectionConfigError(StreambedError, ValueError):
    """An Airflow connection lacks a field streambed needs (names the connection id and field)."""
