"""What a cut's position-delete files of a member carry."""

from __future__ import annotations

from collections import Counter

import pyarrow.parquet as pq

from airflow_provider_streambed.read import Cut
from airflow_provider_streambed.staging import DELETE_ROW


def delete_files_with_images(cut: Cut, name: str) -> Counter[bool]:
    """How many of member ``name``'s delete files in ``cut`` carry the deleted rows (``row``), and how many not."""
    table = cut.table(name)
    tasks = table.scan(snapshot_id=cut.member(name).snapshot_id).plan_files()
    deletes = {delete.file_path for task in tasks for delete in task.delete_files}
    found: Counter[bool] = Counter()
    for path in deletes:
        with table.io.new_input(path).open() as stream:
            found[DELETE_ROW in pq.read_schema(stream).names] += 1
    return found
