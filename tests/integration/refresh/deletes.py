"""What a cut's position-delete files of a member carry."""

from __future__ import annotations

from collections import Counter

import pyarrow.parquet as pq

from airflow_provider_streambed.read import Cut
from airflow_provider_streambed.staging import DELETE_ROW
from airflow_provider_streambed.staging.iceberg_fields import FIELD_ID


def delete_files_with_images(cut: Cut, name: str) -> Counter[bool]:
    """How many of member ``name``'s delete files in ``cut`` carry the deleted rows (``row``), and
    how many not; the fields of each ``row`` must carry the table's field ids."""
    table = cut.table(name)
    ids = {field.name: field.field_id for field in table.schema().fields}
    tasks = table.scan(snapshot_id=cut.member(name).snapshot_id).plan_files()
    deletes = {delete.file_path for task in tasks for delete in task.delete_files}
    found: Counter[bool] = Counter()
    for path in deletes:
        with table.io.new_input(path).open() as stream:
            schema = pq.read_schema(stream)
        if DELETE_ROW in schema.names:
            fields = schema.field(DELETE_ROW).type.fields
            carried = {field.name: int(field.metadata[FIELD_ID]) for field in fields}
            assert carried == {field.name: ids[field.name] for field in fields}, f"{path}: {carried} against {ids}"
        found[DELETE_ROW in schema.names] += 1
    return found
