"""OpenLineage of the three steps, in the apache-airflow-providers-openlineage conventions.

Each operator records during ``execute`` what it read and wrote, and returns it from
``get_openlineage_facets_on_complete`` (:class:`~.base.StreambedBaseOperator`). Datasets are
named per the OpenLineage naming spec:

- a source table: namespace ``postgres://{host}:{port}``, name ``{database}.{schema}.{table}``;
- a member table: by its storage location, as the spec names files (``file`` and the path,
  ``s3://{bucket}`` and the key, ...), which is also how the OpenLineage Spark integration names
  Iceberg tables; a symlink facet names it as the Iceberg table ``{namespace}.{table}`` in the
  warehouse.

The ``streambed`` run facet carries the group, the run key, the pinned W and (publish) the cut id;
each published table carries its snapshot id (``version``) and rows (``outputStatistics``). Lineage
never fails a step: a lineage that cannot be built is logged and left out.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import urlparse

import attrs
from airflow.providers.openlineage.extractors import OperatorLineage
from openlineage.client.event_v2 import InputDataset, OutputDataset
from openlineage.client.facet_v2 import (
    RunFacet,
    dataset_version_dataset,
    output_statistics_output_dataset,
    symlinks_dataset,
)

logger = logging.getLogger(__name__)

#: Where the ``streambed`` run facet is described (the project's docs; it has no other published URL yet).
FACET_DOC = "https://github.com/streambed/airflow-provider-streambed/blob/main/docs/operators.md#openlineage"
POSTGRES_PORT = 5432


@attrs.define
class StreambedRunFacet(RunFacet):
    """The run of a refresh group a task belongs to: its group, run key, pinned W and cut."""

    group: str
    runKey: str  # OpenLineage facets use camelCase
    watermark: str
    cutId: int | None = None

    @staticmethod
    def _get_schema() -> str:
        return f"{FACET_DOC}/StreambedRunFacet"


def source_datasets(host: str | None, port: int | None, database: str | None,
                    tables: Iterable[str]) -> list[InputDataset]:
    """The source tables (``schema.table``) of a PostgreSQL database as input datasets."""
    namespace = f"postgres://{host or 'localhost'}:{port or POSTGRES_PORT}"
    return [InputDataset(namespace=namespace, name=f"{database}.{table}") for table in tables]


def storage_name(location: str) -> tuple[str, str]:
    """A table location as an OpenLineage (namespace, name): ``file`` and the path for local files,
    ``{scheme}://{bucket or host}`` and the key or path otherwise."""
    parsed = urlparse(location)
    if parsed.scheme in ("", "file"):
        return "file", parsed.path
    scheme = "s3" if parsed.scheme in ("s3a", "s3n") else parsed.scheme
    return f"{scheme}://{parsed.netloc}", parsed.path.lstrip("/")


def table_dataset(
    location: str, warehouse: str, identifier: str, *, snapshot_id: int | None = None, rows: int | None = None,
) -> OutputDataset:
    """A member table (its location, Iceberg identifier ``namespace.table``) as an output dataset."""
    namespace, name = storage_name(location)
    facets: dict[str, Any] = {"symlinks": symlinks_dataset.SymlinksDatasetFacet(
        identifiers=[symlinks_dataset.Identifier(namespace=warehouse, name=identifier, type="TABLE")])}
    if snapshot_id is not None:
        facets["version"] = dataset_version_dataset.DatasetVersionDatasetFacet(datasetVersion=str(snapshot_id))
    output_facets: dict[str, Any] = {}
    if rows is not None and rows >= 0:
        output_facets["outputStatistics"] = output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
            rowCount=rows)
    return OutputDataset(namespace=namespace, name=name, facets=facets, outputFacets=output_facets)


def as_input(dataset: OutputDataset) -> InputDataset:
    """The same table read as an input (its dataset facets kept)."""
    return InputDataset(namespace=dataset.namespace, name=dataset.name, facets=dataset.facets)


def lineage_of(build: Callable[[], OperatorLineage], what: str) -> OperatorLineage | None:
    """``build()``, or ``None`` (logged) when it fails: lineage never fails a step."""
    try:
        return build()
    except Exception as error:  # a lineage problem is not the run's
        logger.warning("%s: no OpenLineage datasets: %s", what, error)
        return None
