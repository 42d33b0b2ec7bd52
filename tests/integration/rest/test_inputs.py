"""Spark's local copies of files on S3: fetched once, kept between runs, pruned when unread."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_provider_streambed import storage
from airflow_provider_streambed.staging.inputs import INPUTS_DIR, local_copies, needs_copies
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
    assert copies == {uri: (directory / "t" / uri.rsplit("/", 1)[-1]).as_uri() for uri in uris[:2]}
    assert [Path(copy.removeprefix("file://")).read_bytes() for copy in copies.values()] == [b"x", b"xx"]
    assert not (directory / "local").exists()  # nothing to copy: no directory either

    (directory / "t" / "f1.parquet").write_bytes(b"kept")  # a kept copy is not fetched again
    again = local_copies(staging, "g", {"t": uris[1:]}, properties)
    assert sorted(path.name for path in (directory / "t").iterdir()) == ["f1.parquet", "f2.parquet"]  # f0 pruned
    assert [Path(again[uri].removeprefix("file://")).read_bytes() for uri in uris[1:]] == [b"kept", b"xxx"]
