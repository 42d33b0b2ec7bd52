"""Garbage collection's file matching on an object store (S3, served by moto): what
``pyarrow.fs`` lists under a table is what :func:`path_of` makes of the Iceberg URIs naming the
same objects, so GC keeps exactly the referenced ones; deleting and the run-directory cleanup
work where directories are only implied by keys. (A whole publish to S3 is issue 16's.)
"""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlparse

import pytest
from pyarrow import fs

from airflow_provider_streambed.retention import gc
from airflow_provider_streambed.testing.postgres import free_port

pytestmark = pytest.mark.slow

TABLE = "s3://lake/ns.db/accounts"
FILES = [
    f"{TABLE}/data/r1/part-00000-r1.parquet",
    f"{TABLE}/data/r2/part 00000 with spaces.parquet",
    f"{TABLE}/data/r2/delete-00000-r2.parquet",
    f"{TABLE}/metadata/00001-6f1c.metadata.json",
    f"{TABLE}/metadata/snap-1-0-6f1c.avro",
    f"{TABLE}/metadata/6f1c-m0.avro",
]


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[fs.FileSystem]:
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=free_port(), verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    for name, value in {"AWS_ENDPOINT_URL": f"http://{host}:{port}", "AWS_ACCESS_KEY_ID": "test",
                        "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1"}.items():
        monkeypatch.setenv(name, value)
    import boto3

    boto3.client("s3").create_bucket(Bucket="lake")
    filesystem = fs.FileSystem.from_uri(TABLE)[0]
    for uri in FILES:
        with filesystem.open_output_stream(uri.removeprefix("s3://")) as out:  # the key as written, spaces too
            out.write(b"x")
    yield filesystem
    server.stop()


def test_listed_objects_match_the_uris_that_name_them(s3: fs.FileSystem) -> None:
    assert urlparse(TABLE).scheme in gc.COLLECTED_SCHEMES
    listing = gc._listing(TABLE)
    files = {gc.key_of(info.path) for _, info in listing if info.type == fs.FileType.File}
    assert files == {gc.path_of(uri) for uri in FILES}
    run_dirs = {gc.key_of(info.path) for _, info in listing if info.type == fs.FileType.Directory}
    assert run_dirs == {gc.path_of(f"{TABLE}/data/r1"), gc.path_of(f"{TABLE}/data/r2")}

    listed = {info.path: (filesystem, info) for filesystem, info in listing if info.type == fs.FileType.File}
    doomed = [path for path in listed if gc.key_of(path) == gc.path_of(FILES[0])]
    gc._delete(doomed, listed)
    gc._delete_emptied_run_dirs(listing, set(listed) - set(doomed), {"ns.accounts": TABLE}, {"r1", "r2"})
    left = {gc.key_of(info.path) for _, info in gc._listing(TABLE) if info.type == fs.FileType.File}
    assert left == {gc.path_of(uri) for uri in FILES[1:]}
