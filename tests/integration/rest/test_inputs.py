"""Spark's local copies of files on S3: fetched once, kept between runs, pruned when unread."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_provider_streambed import storage
from airflow_provider_streambed.staging.inputs import INPUTS_DIR, copy_uri, local_copies, needs_copies
from airflow_provider_streambed.testing.seaweed import ThrowawaySeaweed

pytestmark = pytest.mark.slow


def test_copies_are_fetched_once_and_pruned(seaweed: ThrowawaySeaweed, tmp_path: Path) -> None:
    properties = seaweed.catalog_properties()
    uris = [f"s3://warehouse/ns/t/data/run1/f{index}.parquet" for index in range(3)]
    for index, uri in enumerate(uris):
        filesystem, path = storage.filesystem(uri, properties)
        with filesystem.open_output_stream(path) as stream:
            stream.write(b"x" * (index + 1))
    staging = (tmp_path / "staging").as_uri()
    assert needs_copies(staging, uris[0]) and not needs_copies(staging, staging + "/f.parquet")
    assert not needs_copies("s3a://bucket/staging", uris[0])  # a Spark with S3 support reads in place

    copies = local_copies(staging, "g", {"t": uris[:2], "local": [staging + "/f.parquet"]}, properties)
    directory = tmp_path / "staging" / "_streambed" / "g" / INPUTS_DIR
    assert copies == {uri: copy_uri((directory / "t").as_uri(), uri) for uri in uris[:2]}
    assert all(copy.endswith("/" + uri.rsplit("/", 1)[-1]) for uri, copy in copies.items())  # names kept
    assert [Path(copy.removeprefix("file://")).read_bytes() for copy in copies.values()] == [b"x", b"xx"]
    assert not (directory / "local").exists()  # nothing to copy: no directory either

    Path(copies[uris[1]].removeprefix("file://")).write_bytes(b"kept")  # a kept copy is not fetched again
    (directory / "t" / "leftover.parquet.1234.partial").write_bytes(b"")  # another download's file is left alone
    again = local_copies(staging, "g", {"t": uris[1:]}, properties)
    names = sorted(str(path.relative_to(directory / "t")) for path in (directory / "t").rglob("*.parquet"))
    assert names == sorted(str(Path(again[uri].removeprefix("file://")).relative_to(directory / "t"))
                           for uri in uris[1:])  # f0's copy pruned
    assert [Path(again[uri].removeprefix("file://")).read_bytes() for uri in uris[1:]] == [b"kept", b"xxx"]
    assert (directory / "t" / "leftover.parquet.1234.partial").exists()

    same_name = "s3://warehouse/ns/t/data/run9/f2.parquet"  # a file named like a copied one (a resync's copy)
    filesystem, path = storage.filesystem(same_name, properties)
    with filesystem.open_output_stream(path) as stream:
        stream.write(b"new")
    third = local_copies(staging, "g", {"t": [same_name]}, properties)
    assert Path(third[same_name].removeprefix("file://")).read_bytes() == b"new"
