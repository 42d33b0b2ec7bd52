"""The names of a snapshot's data files, by which position deletes are joined to rows (Spark and DuckDB)."""

from __future__ import annotations

import re
from collections import Counter

from airflow_provider_streambed.exceptions import RefreshError

_PLAIN_NAME = re.compile(r"[A-Za-z0-9._=-]+")


def file_names(uris: tuple[str, ...]) -> dict[str, str]:
    """Each data file's name (the last path segment) mapped to its URI.

    Raises:
        RefreshError: two files share a name, or a name has characters Spark would URL-encode.
    """
    names = {uri: uri.rsplit("/", 1)[-1] for uri in uris}
    shared = sorted(name for name, count in Counter(names.values()).items() if count > 1)
    if shared:
        raise RefreshError(f"data files share the names {shared[:3]}; position deletes cannot tell them apart")
    odd = sorted(name for name in names.values() if not _PLAIN_NAME.fullmatch(name))
    if odd:
        raise RefreshError(f"data file names {odd[:3]} have characters outside [A-Za-z0-9._=-]")
    return {name: uri for uri, name in names.items()}
