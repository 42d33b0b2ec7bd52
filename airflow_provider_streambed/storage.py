"""Where files live: the pyarrow filesystem of a URI, object stores configured from catalog properties.

``pyarrow.fs.FileSystem.from_uri`` knows local paths and S3 with credentials from the environment
only. A warehouse on an S3-compatible store (SeaweedFS, MinIO, moto) needs the endpoint and keys of
the catalog's properties (``s3.endpoint``, ``s3.access-key-id``, ...): pyiceberg's ``PyArrowFileIO``
builds that filesystem from them, and this module asks it for its filesystem rather than building
one again. Credentials stay inside the filesystem object; nothing here logs them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from functools import lru_cache

import pyarrow as pa
from pyarrow import fs
from pyiceberg.io.pyarrow import PyArrowFileIO

LOCAL_SCHEMES = ("", "file")


def scheme_of(uri: str) -> str:
    """The URI's scheme (``file`` for a plain path)."""
    return PyArrowFileIO.parse_location(uri)[0]


@lru_cache(maxsize=32)
def _file_io(properties: frozenset[tuple[str, str]]) -> PyArrowFileIO:
    return PyArrowFileIO(dict(properties))


def filesystem(uri: str, properties: Mapping[str, str] | None = None) -> tuple[fs.FileSystem, str]:
    """The pyarrow filesystem holding ``uri`` and the path of ``uri`` in it.

    Args:
        uri: a local path, ``file://``, ``s3://bucket/key`` (or another scheme pyiceberg knows).
        properties: catalog or table properties that configure object stores (``s3.endpoint``,
            ``s3.access-key-id``, ``s3.secret-access-key``, ``s3.region``...); without them an object
            store is configured from the environment, as ``FileSystem.from_uri`` does.
    """
    scheme, netloc, path = PyArrowFileIO.parse_location(uri)
    if scheme in LOCAL_SCHEMES or not properties:
        return fs.FileSystem.from_uri(uri)  # decodes a file URI (%20), refuses what it cannot read
    io = _file_io(frozenset((key, str(value)) for key, value in properties.items()))
    return io.fs_by_scheme(scheme, netloc), path


def open_input(uri: str) -> pa.NativeFile:
    """The file at ``uri`` opened for reading (an object store configured from the environment)."""
    filesystem_of, path = filesystem(uri)
    return filesystem_of.open_input_file(path)


def transfer(source: str, target: str, properties: Mapping[str, str] | None = None) -> None:
    """Move the file ``source`` to ``target``: a rename on a local disk, else a copy (an object
    store's upload appears whole or not at all) and a delete of ``source``.

    Raises:
        FileNotFoundError: ``source`` does not exist.
    """
    source_fs, source_path = filesystem(source, properties)
    target_fs, target_path = filesystem(target, properties)
    if scheme_of(source) == scheme_of(target) and scheme_of(source) in LOCAL_SCHEMES:
        source_fs.move(source_path, target_path)
        return
    if source_fs.get_file_info(source_path).type == fs.FileType.NotFound:
        raise FileNotFoundError(source)
    fs.copy_files(source_path, target_path, source_filesystem=source_fs, destination_filesystem=target_fs)
    with contextlib.suppress(FileNotFoundError):  # a concurrent publisher of the same run moved it first
        source_fs.delete_file(source_path)
