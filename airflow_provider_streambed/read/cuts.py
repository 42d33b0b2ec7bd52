"""Reading published cuts: every member table at the snapshot of one cut, never a mix.

A :class:`Cut` is read from the ledger in one query and names, per member, the snapshot id and
the metadata file written by that cut. Readers open that metadata file directly
(``StaticTable``), so a reader holding a ``Cut`` keeps seeing it while newer cuts are published.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from pyiceberg.catalog import Catalog
from pyiceberg.table import StaticTable, Table

from airflow_provider_streambed.catalog import ledger_of, open_catalog
from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.exceptions import CutNotFoundError, MemberNotFoundError, PublishError
from airflow_provider_streambed.ledger import CutMember, CutRecord, Ledger, cut_tag
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.read.arrow_snapshot import read_snapshot
from airflow_provider_streambed.read.feed import MemberChanges, changes_between
from airflow_provider_streambed.snapshot_properties import CUT_ID_PROPERTY, GROUP_PROPERTY, WATERMARK_PROPERTY

if TYPE_CHECKING:
    import pyarrow as pa
    from duckdb import DuckDBPyConnection
    from pyspark.sql import DataFrame, SparkSession

logger = logging.getLogger(__name__)


def load_duckdb_iceberg(con: DuckDBPyConnection, extensions: tuple[str, ...] = ("avro", "iceberg")) -> None:
    """Load DuckDB's iceberg extension (and ``extensions``), from the ``duckdb-extension-*`` PyPI
    packages when installed.

    Those packages ship the extension files for one DuckDB version and need no network;
    otherwise DuckDB installs the extension from its repository.
    """
    import duckdb

    for name in extensions:
        spec = importlib.util.find_spec(f"duckdb_extension_{name}")
        path = None
        if spec is not None and spec.origin is not None:
            candidate = Path(spec.origin).parent / "extensions" / f"v{duckdb.__version__}" / f"{name}.duckdb_extension"
            path = candidate if candidate.exists() else None
        if path is not None:
            con.execute(f"LOAD '{path}'")
        else:
            con.execute(f"INSTALL {name}; LOAD {name}")


def duckdb_s3_secret(properties: Mapping[str, str]) -> str:
    """``CREATE SECRET`` for DuckDB's httpfs from pyiceberg's S3 properties (path-style URLs, the
    way S3-compatible stores are addressed by endpoint)."""
    def get(key: str) -> str:
        return str(properties.get(f"s3.{key}") or properties.get(f"client.{key}") or "").replace("'", "''")

    options = {"KEY_ID": get("access-key-id"), "SECRET": get("secret-access-key"), "REGION": get("region")}
    parts = [f"{key} '{value}'" for key, value in options.items() if value]
    if endpoint := str(properties.get("s3.endpoint", "")):
        scheme, _, host = endpoint.rpartition("://")
        parts += [f"ENDPOINT '{host.rstrip('/')}'", "URL_STYLE 'path'", f"USE_SSL {str(scheme != 'http').lower()}"]
    return f"CREATE OR REPLACE SECRET streambed_s3 (TYPE s3, {', '.join(parts)})"


def snapshot_rows(table: Table, snapshot_id: int) -> int:
    """Live rows of a snapshot from its summary: records less position deletes; -1 when unknown."""
    snapshot = table.snapshot_by_id(snapshot_id)
    summary = snapshot.summary if snapshot is not None else None
    total = summary.get("total-records") if summary is not None else None
    deleted = summary.get("total-position-deletes", "0") if summary is not None else "0"
    return int(total) - int(deleted) if total is not None else -1


@dataclass(frozen=True, slots=True)
class Cut:
    """One published cut of a group: its watermark and each member's snapshot.

    Attributes:
        group: the group name.
        cut_id: the cut number (1, 2, 3, ...).
        watermark: W: the cut holds exactly the source transactions with commit LSN < W.
        prev_watermark: the previous cut's W (``None`` for cut 1).
        published_at: when the cut was published (UTC).
        run_key: the run that published it.
        members: per member, its table, snapshot id and metadata location.
        pinned_at: when the cut was pinned (kept whatever the retention), ``None`` if it is not.
    """

    group: str
    cut_id: int
    watermark: Lsn
    prev_watermark: Lsn | None
    published_at: dt.datetime
    run_key: str
    members: Mapping[str, CutMember]
    catalog: Catalog = field(repr=False, compare=False)
    pinned_at: dt.datetime | None = None

    @classmethod
    def from_record(cls, record: CutRecord, catalog: Catalog) -> Cut:
        """A ``Cut`` from the ledger's record."""
        return cls(record.group, record.cut_id, record.watermark, record.prev_watermark, record.published_at,
                   record.run_key, dict(record.members), catalog, record.pinned_at)

    def member(self, name: str) -> CutMember:
        """The member ``name`` of this cut.

        Raises:
            MemberNotFoundError: no such member (a ``KeyError``).
        """
        if name not in self.members:
            raise MemberNotFoundError(f"group {self.group!r}, cut {self.cut_id} has no member {name!r}")
        return self.members[name]

    def table(self, name: str) -> StaticTable:
        """Member ``name``'s table as written by this cut (its metadata file, not the catalog's pointer)."""
        return StaticTable.from_metadata(self.member(name).metadata_location, properties=self.catalog.properties)

    def schema(self, name: str) -> pa.Schema:
        """Member ``name``'s columns at this cut, with the Arrow types Iceberg reads them as (no data read)."""
        return self.table(name).schema().as_arrow()

    def to_arrow(self, name: str) -> pa.Table:
        """Member ``name``'s rows at this cut (:func:`.arrow_snapshot.read_snapshot`)."""
        return read_snapshot(self.table(name), self.member(name).snapshot_id)

    def changes_since(self, earlier: Cut, ledger: Ledger | None = None) -> dict[str, MemberChanges]:
        """Per member of this cut, the rows removed and added since cut ``earlier`` of the same group:
        the effect of the source transactions with commit LSN in ``[earlier.watermark, self.watermark)``,
        net, in this cut's columns (:mod:`~airflow_provider_streambed.read.feed`).

        Args:
            earlier: an earlier (or the same) cut of this group.
            ledger: the run ledger (default: the catalog's, as for :class:`CutReader`).

        Raises:
            CutExpiredError: either cut expired under the group's retention; the message says when.
            ChangeFeedError: ``earlier`` is of another group or later than this cut.
        """
        return changes_between(earlier, self, ledger if ledger is not None else ledger_of(self.catalog))

    def row_counts(self) -> dict[str, int]:
        """Rows per member at this cut, from the snapshot summaries (no data read).

        Records in data files less position deletes (each deletes one live row); -1 when unknown.
        """
        return {name: snapshot_rows(self.table(name), member.snapshot_id) for name, member in self.members.items()}

    def to_duckdb(self, con: DuckDBPyConnection) -> DuckDBPyConnection:
        """Register every member as a DuckDB view (named like the member) at this cut's snapshot.

        Members on S3 are read through DuckDB's httpfs with an S3 secret made from the catalog's
        ``s3.*`` (else ``client.*``) properties: endpoint, keys and region.
        """
        on_s3 = any(member.metadata_location.startswith("s3://") for member in self.members.values())
        load_duckdb_iceberg(con, ("httpfs", "avro", "iceberg") if on_s3 else ("avro", "iceberg"))
        if on_s3:
            con.execute(duckdb_s3_secret(self.catalog.properties))
        for name, member in self.members.items():
            location = member.metadata_location.replace("'", "''")
            con.execute(
                f'CREATE OR REPLACE VIEW "{name}" AS SELECT * FROM '
                f"iceberg_scan('{location}', snapshot_from_id => {member.snapshot_id})"
            )
        return con

    def to_spark(self, spark: SparkSession, copies_dir: str | None = None,
                 catalog_name: str | None = None) -> dict[str, DataFrame]:
        """Register every member as a Spark temp view (named like the member) of its rows at this
        cut; returns the DataFrames.

        With Iceberg's Spark runtime, a session that has an Iceberg catalog for the group's
        catalog reads each member as ``SELECT * FROM <catalog>.<namespace>.<table> VERSION AS OF
        '<group>-cut-<k>'``, deletes applied by Iceberg. The catalog is ``catalog_name`` when given,
        else found by its settings: for a SQL catalog, ``spark.sql.catalog.<name>`` set to
        ``org.apache.iceberg.spark.SparkCatalog`` with ``type=jdbc``, a ``uri`` that names the same
        database, and the name of the group's catalog (``streambed`` by default), since Iceberg's
        JDBC catalog reads only the tables recorded under its own name; for a REST catalog, one
        with ``type=rest`` and the same ``uri`` (:mod:`~airflow_provider_streambed.read.iceberg_runtime`).
        A cut that expired while it was held (its tags gone) is read as below.

        Without one, Spark reads the snapshot's planned Parquet files and applies its position
        deletes (:class:`~airflow_provider_streambed.read.spark_snapshot.SnapshotScan`); no Iceberg
        runtime is needed. Files on an object store are then read from local copies
        (:mod:`~airflow_provider_streambed.staging.inputs`) under ``copies_dir`` (a local directory;
        default a new temporary one), which must outlive the DataFrames; a Spark with its own S3
        support can read them in place instead (``copies_dir`` on the object store).

        Args:
            spark: the session.
            copies_dir: where the snapshot scan copies files on an object store.
            catalog_name: the session's Iceberg catalog to read through (default: found as above).

        Raises:
            ConfigurationError: ``catalog_name`` is not an Iceberg catalog of the session, or is
                Iceberg's JDBC catalog under another name than the group's catalog.
        """
        from airflow_provider_streambed.read.spark_cut import cut_frames

        frames = cut_frames(spark, self.catalog, self.group, self.cut_id, self.members, copies_dir, catalog_name)
        for name, frame in frames.items():
            frame.createOrReplaceTempView(name)
        return frames

    def verify(self) -> list[str]:
        """Problems with this cut's member snapshots (empty when the cut is sound).

        Each member snapshot must exist, bear this cut's tag, and have been made by this group: a
        member's snapshot carries this cut's id and W, or, when the member had no change and was
        carried over, an earlier cut's id and a lower W.
        """
        problems = []
        for name, member in sorted(self.members.items()):
            try:
                current = self.catalog.load_table(member.table_identifier)
            except Exception as error:  # reported, not raised: verify lists every problem
                problems.append(f"member {name!r}: table {member.table_identifier} cannot be loaded: {error}")
                continue
            snapshot = current.snapshot_by_id(member.snapshot_id)
            if snapshot is None:
                problems.append(f"member {name!r}: snapshot {member.snapshot_id} is missing from "
                                f"{member.table_identifier}")
                continue
            summary = snapshot.summary.additional_properties if snapshot.summary is not None else {}
            problems += [f"member {name!r}: snapshot {member.snapshot_id} {problem}"
                         for problem in self._snapshot_problems(summary)]
            tag = current.metadata.refs.get(cut_tag(self.group, self.cut_id))
            if tag is None or tag.snapshot_id != member.snapshot_id:
                problems.append(f"member {name!r}: tag {cut_tag(self.group, self.cut_id)} of "
                                f"{member.table_identifier} does not name snapshot {member.snapshot_id}")
        return problems

    def _snapshot_problems(self, summary: Mapping[str, str]) -> list[str]:
        """What is wrong with a member snapshot's summary properties for this cut."""
        if summary.get(GROUP_PROPERTY) != self.group:
            return [f"has {GROUP_PROPERTY}={summary.get(GROUP_PROPERTY)!r}, expected {self.group!r}"]
        made_by, made_at = summary.get(CUT_ID_PROPERTY, ""), summary.get(WATERMARK_PROPERTY, "")
        if (made_by, made_at) == (str(self.cut_id), str(self.watermark)):
            return []
        try:
            carried = int(made_by) < self.cut_id and Lsn.parse(made_at) < self.watermark
        except ValueError:
            carried = False
        if carried:
            return []
        return [f"has {CUT_ID_PROPERTY}={made_by!r} and {WATERMARK_PROPERTY}={made_at!r}, expected cut "
                f"{self.cut_id} at W={self.watermark} (or an earlier cut's, for a member carried over)"]


@dataclass(frozen=True, slots=True)
class GroupStatus:
    """How fresh a group is: its latest cut, and when a run last checked the source.

    On a quiet source runs find nothing new (outcome ``unchanged``) and publish no cut, so
    ``checked_at`` moves on while ``latest`` stays: the cut is still the source's state as of
    ``checked_at``.

    Attributes:
        group: the group name.
        latest: the newest cut, ``None`` before the first publish.
        checked_at: when the last successful run (published or unchanged) pinned its W.
        checked_by: that run's key.
    """

    group: str
    latest: Cut | None
    checked_at: dt.datetime | None
    checked_by: str | None

    def message(self) -> str:
        """One line for people, e.g. ``group bank: cut 3 (W=0/1A2B3C8) published at ..., source checked at ...``."""
        if self.latest is None:
            return f"group {self.group}: no cut published yet"
        checked = "never" if self.checked_at is None else f"{self.checked_at:%Y-%m-%d %H:%M:%S} UTC"
        return (f"group {self.group}: cut {self.latest.cut_id} (W={self.latest.watermark}) published at "
                f"{self.latest.published_at:%Y-%m-%d %H:%M:%S} UTC, source checked at {checked}")


class CutReader:
    """Finds the published cuts of one group.

    Args:
        catalog_or_props: an open catalog, or catalog properties for :func:`open_catalog`.
        group: the group (or its name).
        ledger: the run ledger; defaults to the one in a SQL catalog's database, or for another
            catalog the one its ``streambed.ledger-uri`` property names.
    """

    def __init__(
        self, catalog_or_props: Catalog | Mapping[str, str], group: RefreshGroup | str, ledger: Ledger | None = None
    ) -> None:
        self.catalog = catalog_or_props if isinstance(catalog_or_props, Catalog) else open_catalog(catalog_or_props)
        self.group = group.name if isinstance(group, RefreshGroup) else group
        if ledger is None:
            try:
                ledger = ledger_of(self.catalog)
            except ValueError as error:
                raise PublishError(f"group {self.group!r}: pass the ledger; {error}") from error
        self.ledger = ledger

    def latest(self) -> Cut:
        """The newest cut.

        Raises:
            CutNotFoundError: nothing was published yet.
        """
        record = self.ledger.last_cut(self.group)
        if record is None:
            raise CutNotFoundError(f"group {self.group!r} has no published cut")
        return Cut.from_record(record, self.catalog)

    def get(self, cut_id: int) -> Cut:
        """Cut ``cut_id``.

        Raises:
            CutExpiredError: the cut expired under the group's retention (a :class:`CutNotFoundError`
                whose message and ``expired_at`` say when).
            CutNotFoundError: there never was such a cut.
        """
        return Cut.from_record(self.ledger.get_cut(self.group, cut_id), self.catalog)

    def as_of_lsn(self, lsn: Lsn) -> Cut:
        """The newest cut whose W is at most ``lsn`` (raises :class:`CutNotFoundError`, or
        :class:`CutExpiredError` when that cut expired)."""
        return Cut.from_record(self.ledger.cut_as_of(self.group, lsn), self.catalog)

    def status(self) -> GroupStatus:
        """The latest cut and when the source was last checked (also by runs that found nothing new)."""
        record = self.ledger.last_cut(self.group)
        check = self.ledger.last_check(self.group)
        return GroupStatus(
            group=self.group,
            latest=None if record is None else Cut.from_record(record, self.catalog),
            checked_at=None if check is None else check.pinned_at,
            checked_by=None if check is None else check.run_key,
        )

    def list(self) -> list[Cut]:
        """Every cut of the group, oldest first."""
        return [Cut.from_record(record, self.catalog) for record in self.ledger.list_cuts(self.group)]
