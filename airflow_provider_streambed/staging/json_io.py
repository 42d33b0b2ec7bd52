"""Reading and writing the small JSON records of a run on any ``pyarrow.fs`` file system."""

from __future__ import annotations

import json
import uuid
from typing import Any

from pyarrow import fs


def write_json(uri: str, record: dict[str, Any]) -> None:
    """Write ``record`` as JSON to ``uri``, creating parent directories (atomic on local disk).

    The file is written under a temporary name and then moved into place, so a reader never
    sees a half-written record on file systems with atomic rename (local, HDFS).
    """
    filesystem, path = fs.FileSystem.from_uri(uri)
    parent = path.rsplit("/", 1)[0]
    filesystem.create_dir(parent, recursive=True)
    temporary = f"{path}.{uuid.uuid4().hex}.tmp"  # concurrent writers of one record each write their own
    with filesystem.open_output_stream(temporary) as stream:
        stream.write(json.dumps(record, indent=1, sort_keys=True).encode())
    filesystem.move(temporary, path)


def read_json(uri: str) -> dict[str, Any] | None:
    """The JSON record at ``uri``, or ``None`` if there is no file (also when a concurrent process
    deleted it between the two calls)."""
    filesystem, path = fs.FileSystem.from_uri(uri)
    if filesystem.get_file_info(path).type == fs.FileType.NotFound:
        return None
    try:
        with filesystem.open_input_stream(path) as stream:
            data: dict[str, Any] = json.loads(stream.read())
    except FileNotFoundError:
        return None
    return data
