"""Exceptions raised by airflow-provider-streambed.

Every failure of the engine is a subclass of :class:`StreambedError`, so callers catch as
narrowly as they need. Messages name the group, member, table, watermark or cut involved.

Each error is of one of two kinds (``retryable``), which decides what happens to the run:

- *retryable* (the default): something outside was down, a process died, or a member's code
  failed and the user may fix it. The run keeps its pinned W and its claim on the group, and a
  retry (or a cleared task) resumes it. When Airflow will not retry it any more, the run is
  marked failed and the group's next run takes over.
- *final* (:class:`FinalError`): no retry of this run can ever succeed: its W can never make a
  cut, it was superseded, or a setting it reads is wrong (:class:`ConfigurationError`; a retry
  reads it again). The run is marked failed at once and frees the group; in Airflow the task fails
  without using its retries.

Errors that are not :class:`StreambedError` (a driver's, Spark's) count as retryable.
"""

from __future__ import annotations

from typing import ClassVar


class StreambedError(Exception):
    """Base class of every error raised by this package."""

    #: Whether a retry of the same run can succeed (see the module docstring).
    retryable: ClassVar[bool] = True


class FinalError(StreambedError):
    """No retry of this run can succeed: the run is marked failed and frees its group."""

    retryable = False


def is_final(error: BaseException) -> bool:
    """Whether ``error`` is final for the run it interrupted (see the module docstring)."""
    return isinstance(error, StreambedError) and not error.retryable


class ConfigurationError(FinalError, ValueError):
    """A setting is missing or invalid: a declaration, an argument, a catalog property or a
    connection's field. Final: a retry of the run reads the same setting again; fix it, then clear
    the task (the failed run resumes unless another run replaced it) or trigger a new run."""


class DeclarationError(ConfigurationError):
    """A refresh-group declaration or a step's argument is invalid (raised at DAG parse time where it can be)."""


class LedgerError(StreambedError):
    """The run ledger is missing, inconsistent or refused a write."""


class GroupBusyError(LedgerError):
    """Another run of the group holds a pinned, unpublished watermark."""


class RunSupersededError(LedgerError, FinalError):
    """The run was superseded or replaced by another run of its group and can never publish."""


class WatermarkError(StreambedError):
    """A watermark cannot be pinned (e.g. the WAL flush wait timed out)."""


class InvalidWatermarkError(WatermarkError, FinalError):
    """The run's W can never make a cut: behind the slot, not after the last cut, or a bad explicit W."""


class SourceError(StreambedError):
    """The source database cannot serve the group (settings, tables, rights)."""


class SlotError(SourceError):
    """The group's replication slot is missing, lost, busy or cannot be created."""


class CaptureError(SourceError):
    """The capture could not set up the source in time (slot creation or publication DDL waited too long)."""


class UnsupportedTypeError(SourceError):
    """A mirrored column has a PostgreSQL type the type mapping does not carry (cast or drop it)."""


class DecodeError(StreambedError):
    """A pgoutput message or a copied value could not be decoded into its column's type."""


class LsnError(StreambedError, ValueError):
    """A text is not an LSN (``"X/Y"`` in hex), or a value is outside 0 .. 2**64-1; the message quotes it."""


def resync_member_fix(group: str, member: str) -> str:
    """How to get a mirror going again that no longer follows its source table: copy it anew (a
    resync of that member alone), the fix every error about one mirror names."""
    return (f"resync the member: trigger the DAG with the Param 'resync_members' ['{member}'] (or run `streambed "
            f"resync --group {group} --member {member}`), which copies it again in the next cut; older cuts stay "
            "readable")


class SchemaChangeError(FinalError):
    """A source table changed in a way the mirror cannot follow (a changed key, or a change under
    ``on_schema_change="fail"``). Final: no retry changes the source's catalog; the message names
    the fix."""


class RefreshError(StreambedError):
    """A member of a group failed to refresh."""


class FinalRefreshError(RefreshError, FinalError):
    """A member failed with a final error (a source change its mirror cannot follow, a diverged
    mirror, a W that can make no cut): no retry of the run can compute it."""


class MemberQueryError(RefreshError, FinalError):
    """A SQL member's query does not bind to its sources (a table that is not a source, a column
    a source no longer has, a type error): no retry of the run changes it; fix the query."""


class MirrorDivergedError(RefreshError, FinalError):
    """A mirror's previous cut lacks rows its source's changes remove: it no longer equals its
    source table, and only a resync makes it equal again."""


class PublishError(StreambedError):
    """A cut could not be published."""


class StagedOutputError(PublishError):
    """A member's staged output cannot be published as it is; nothing was published (``member``
    names it). Before any file of the run moved into a table, publish discards that output so
    that the refresh step computes it again; after, the run is failed (:class:`UnpublishableRunError`)."""

    def __init__(self, message: str, member: str) -> None:
        super().__init__(message)
        self.member = member


class DamagedOutputError(StagedOutputError):
    """A member's staged output lost a file or has a truncated one."""


class UnpublishableRunError(PublishError, FinalError):
    """A member's staged output is unusable after an attempt of the run moved files into the
    tables, so it cannot be computed again under this run: the run is failed, and the group's
    next run publishes a new cut."""


class OutputSchemaError(StagedOutputError):
    """A member's output changes a column of its table in a way Iceberg cannot evolve to (a type
    that is not a widening). Retryable, unlike a :class:`SchemaChangeError` of the source: the
    output changes with the member's code, so it is discarded for the refresh to compute again."""


class PublishConflictError(PublishError):
    """A member table was changed by another writer; nothing was published."""


class ExpiryConflictError(PublishConflictError):
    """A cut the commit was to expire was pinned (or expired) meanwhile; nothing was committed."""


class StaleOutputError(StagedOutputError):
    """A member's incremental output was computed on another snapshot of its table than the one
    it would apply to; it is discarded (before any move) for the refresh to compute it again."""


class CatalogCapabilityError(PublishError):
    """The catalog cannot do what the group declares: commit several tables atomically, or (a REST
    catalog) expire cuts under a retention."""


class CutNotFoundError(StreambedError, LookupError):
    """The requested cut does not exist in the ledger."""


class MemberNotFoundError(FinalError, KeyError):
    """A group or a cut has no member of the name asked for (``RefreshGroup.member``, ``Cut.member``)."""


class CutExpiredError(CutNotFoundError):
    """The requested cut existed and expired under the group's retention (``expired_at`` says when)."""

    def __init__(self, message: str, expired_at: object) -> None:
        super().__init__(message)
        self.expired_at = expired_at


class ChangeFeedError(FinalError):
    """The change feed between two cuts cannot be given: the cuts are of different groups or in the
    wrong order, or a member's files contradict each other (``Cut.changes_since``)."""


class ConnectionConfigError(ConfigurationError):
    """An Airflow connection lacks a field streambed needs (names the connection id and field)."""


class DependencyError(StreambedError):
    """A dependency of the run is down or refuses it: the source database, the catalog database,
    the warehouse or the Spark master; the message names which (without secrets). Retryable:
    nothing was published, and the run succeeds when retried after the repair."""


class SourceUnavailableError(DependencyError, SourceError):
    """The source database cannot be reached, or the connection to it was lost."""


class CatalogUnavailableError(DependencyError):
    """The catalog database (which holds the ledger) cannot be reached or refused the statement."""


class WarehouseError(DependencyError):
    """The warehouse cannot be written: no space left, permission denied, read-only."""


class SparkUnavailableError(DependencyError, RefreshError):
    """The Spark master (or Spark Connect server) cannot be reached; nothing was submitted."""
