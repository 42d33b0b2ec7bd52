"""Where files live: the pyarrow filesystem of a URI, object stores configured per location.

``pyarrow.fs.FileSystem.from_uri`` knows local paths and S3 with credentials from the environment
only. A warehouse or staging area on an S3-compatible store (SeaweedFS, MinIO, moto) needs the
endpoint and keys of the catalog's properties (``s3.endpoint``, ``s3.access-key-id``, ...):
pyiceberg's ``PyArrowFileIO`` builds that filesystem from them, and this module asks it for its
filesystem rather than building one again.

Object stores are configured per location, the way Hadoop configures S3A per bucket: opening a
catalog registers its properties for its warehouse and staging locations (:func:`configure`), and
every URI under a registered location gets that store (:func:`filesystem`); a URI under none is
configured from the environment. The Spark job registers the locations its spec names with the
spec's :func:`public_properties` (endpoint, region, addressing: never keys), its credentials coming
from the environment of the cluster. Credentials stay inside the filesystem objects; nothing here
logs them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from functools import lru_cache

import pyarrow as pa
from pyarrow import fs
from pyiceberg.io.pyarrow import PyArrowFileIO

LOCAL_SCHEMES = ("", "file")
#: Prefixes of the catalog properties that configure pyiceberg's FileIO (and so the object stores).
STORE_PROPERTY_PREFIXES = ("s3.", "client.", "gcs.", "adls.", "hdfs.")
#: Property names holding these are secrets (keys, session and OAuth tokens, SAS...): masked in
#: logs, never in a job spec.
SECRET_WORDS = ("secret", "token", "credential", "password", "sas", "access-key")

_configured: dict[str, frozenset[tuple[str, str]]] = {}


def scheme_of(uri: str) -> str:
    """The URI's scheme (``file`` for a plain path)."""
    return PyArrowFileIO.parse_location(uri)[0]


def is_local(uri: str) -> bool:
    """Whether ``uri`` is on a local file system (a plain path or ``file://``)."""
    return scheme_of(uri) in LOCAL_SCHEMES


def store_properties(properties: Mapping[str, str]) -> dict[str, str]:
    """The properties of ``properties`` that configure object stores (:data:`STORE_PROPERTY_PREFIXES`)."""
    return {str(key): str(value) for key, value in properties.items() if str(key).startswith(STORE_PROPERTY_PREFIXES)}


def public_properties(properties: Mapping[str, str]) -> dict[str, str]:
    """The object-store properties that are no secret (endpoint, region, addressing): what a job
    spec may carry."""
    return {key: value for key, value in store_properties(properties).items()
            if not any(word in key for word in SECRET_WORDS)}


def configure(location: str, properties: Mapping[str, str]) -> None:
    """Configure the object store of ``location`` and everything under it from ``properties``
    (catalog properties; only :func:`store_properties` are kept). Local locations need nothing."""
    if not is_local(location) and (kept := store_properties(properties)):
        _configured[location.rstrip("/")] = frozenset(kept.items())


def configured_locations() -> dict[str, dict[str, str]]:
    """Every configured location with its :func:`public_properties` (what the job spec carries)."""
    return {location: public_properties(dict(properties)) for location, properties in _configured.items()}


def configured_properties(uri: str) -> dict[str, str]:
    """The object-store properties :func:`configure` registered for ``uri`` (empty: none)."""
    return dict(_properties_of(uri) or ())


def credential_environment(uri: str) -> dict[str, str]:
    """The AWS environment variables that give a process (Spark's driver) the credentials and region
    configured for ``uri``: what S3A's and pyarrow's default credential chains read. Empty when
    none are configured (the process then has its own: an instance role, the cluster's environment)."""
    properties = configured_properties(uri)
    names = {"access-key-id": "AWS_ACCESS_KEY_ID", "secret-access-key": "AWS_SECRET_ACCESS_KEY",
             "session-token": "AWS_SESSION_TOKEN", "region": "AWS_REGION"}
    found = {variable: properties.get(f"s3.{key}") or properties.get(f"client.{key}")
             for key, variable in names.items()}
    return {variable: value for variable, value in found.items() if value}


def _properties_of(uri: str) -> frozenset[tuple[str, str]] | None:
    """The properties of the longest configured location holding ``uri``; else, when every location
    configured for its scheme has the same store, that store's (a table's location under a REST
    catalog's warehouse name)."""
    held = [location for location in _configured if uri == location or uri.startswith(location + "/")]
    if held:
        return _configured[max(held, key=len)]
    scheme = scheme_of(uri)
    stores = {properties for location, properties in _configured.items() if scheme_of(location) == scheme}
    return stores.pop() if len(stores) == 1 else None


@lru_cache(maxsize=32)
def _file_io(properties: frozenset[tuple[str, str]]) -> PyArrowFileIO:
    return PyArrowFileIO(dict(properties))


def filesystem(uri: str, properties: Mapping[str, str] | None = None) -> tuple[fs.FileSystem, str]:
    """The pyarrow filesystem holding ``uri`` and the path of ``uri`` in it.

    Args:
        uri: a local path, ``file://``, ``s3://bucket/key`` (or another scheme pyiceberg knows).
        properties: catalog or table properties that configure object stores (``s3.endpoint``,
            ``s3.access-key-id``, ``s3.secret-access-key``, ``s3.region``...); by default those
            :func:`configure` registered for a location holding ``uri``; without any, an object
            store is configured from the environment, as ``FileSystem.from_uri`` does.
    """
    scheme, netloc, path = PyArrowFileIO.parse_location(uri)
    if scheme in LOCAL_SCHEMES:
        return fs.FileSystem.from_uri(uri)  # decodes a file URI (%20), refuses what it cannot read
    kept = frozenset(store_properties(properties).items()) if properties else _properties_of(uri)
    if not kept:
        return fs.FileSystem.from_uri(uri)
    return _file_io(kept).fs_by_scheme(scheme, netloc), path


def open_input(uri: str) -> pa.NativeFile:
    """The file at ``uri`` opened for reading."""
    filesystem_of, path = filesystem(uri)
    return filesystem_of.open_input_file(path)


def transfer(source: str, target: str, properties: Mapping[str, str] | None = None) -> None:
    """Move the file ``source`` to ``target``: a rename on a local disk, a server-side copy within
    one object store, else a copy through this process (an object store's upload appears whole or
    not at all); then a delete of ``source``.

    Raises:
        FileNotFoundError: ``source`` does not exist.
    """
    source_fs, source_path = filesystem(source, properties)
    target_fs, target_path = filesystem(target, properties)
    if is_local(source) and is_local(target):
        source_fs.move(source_path, target_path)
        return
    if source_fs.get_file_info(source_path).type == fs.FileType.NotFound:
        raise FileNotFoundError(source)
    if source_fs.equals(target_fs):  # one store: on S3 a server-side copy (CopyObject), no byte through here
        source_fs.copy_file(source_path, target_path)
    else:
        fs.copy_files(source_path, target_path, source_filesystem=source_fs, destination_filesystem=target_fs)
    with contextlib.suppress(FileNotFoundError):  # a concurrent publisher of the same run moved it first
        source_fs.delete_file(source_path)
