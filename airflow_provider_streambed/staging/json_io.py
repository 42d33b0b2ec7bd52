"""Reading and writing the small JSON records of a run on a local disk or an object store."""

from __future__ import annotations

import json
import uuid
from typing import Any

from pyarrow import fs

from airflow_provider_streambed import storage


def write_json(uri: str, record: dict[str, Any]) -> None:
    """Write ``record`` as JSON to ``uri``, creating parent directories; a reader never sees half a record.

    On a local disk the file is written under a temporary name and then renamed into place; an
    object store's upload appears whole or not at all, so it is written in place there.
    """
    filesystem, path = storage.filesystem(uri)
    filesystem.create_dir(path.rsplit("/", 1)[0], recursive=True)
    data = json.dumps(record, indent=1, sort_keys=True).encode()
    if not storage.is_local(uri):
        with filesystem.open_output_stream(path) as stream:
            stream.write(data)
        return
    temporary = f"{path}.{uuid.uuid4().hex}.tmp"  # concurrent writers of one record each write their own
    with filesystem.open_output_stream(temporary) as stream:
        stream.write(data)
    filesystem.move(temporary, path)


def read_json(uri: str) -> dict[str, Any] | None:
    """The JSON record at ``uri``, or ``None`` if there is no file (also when a concurrent process
    deleted it between the two calls)."""
    filesystem, path = storage.filesystem(uri)
    if filesystem.get_file_info(path).type == fs.FileType.NotFound:
        return None
    try:
        with filesystem.open_input_stream(path) as stream:
            data: dict[str, Any] = json.loads(stream.read())
    except FileNotFoundError:
        return None
    return data
