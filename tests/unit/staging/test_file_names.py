"""Position deletes are joined to Spark's rows by file name: the names must tell the files apart."""

from __future__ import annotations

import pytest

from airflow_provider_streambed.exceptions import RefreshError
from airflow_provider_streambed.staging.file_names import file_names


def test_file_names_map_back_to_the_uris() -> None:
    uris = ("file:///w/a b/data/run1/part-00000-1f2e-c000.snappy.parquet", "s3://bucket/t/data/run2/00001-0-x.parquet")
    assert file_names(uris) == {
        "part-00000-1f2e-c000.snappy.parquet": uris[0],
        "00001-0-x.parquet": uris[1],
    }


def test_shared_or_encoded_names_are_refused() -> None:
    with pytest.raises(RefreshError, match=r"data files share the names \['f.parquet'\]"):
        file_names(("file:///w/run1/f.parquet", "file:///w/run2/f.parquet"))
    with pytest.raises(RefreshError, match=r"data file names \['my file.parquet'\] have characters"):
        file_names(("file:///w/my file.parquet",))
