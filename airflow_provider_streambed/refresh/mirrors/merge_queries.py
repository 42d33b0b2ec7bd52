"""The DuckDB queries of the in-process mirror merge (:mod:`.merge_lookups` runs them): pure text builders."""

from __future__ import annotations

from airflow_provider_streambed.staging import COMMIT_LSN, OP, OP_DELETE, SEQ, TOAST_MARKER_PREFIX
from airflow_provider_streambed.staging.iceberg_fields import DELETE_FILE_PATH, DELETE_POS

ROW = "__streambed_row"  # a change's position in the changelog table
FILE, POS = "__streambed_file", "file_row_number"  # a previous row's file and position (DuckDB's)
NET = "__streambed_net"  # a keyless change's copies added (negative: removed)


def net_query(columns: list[str]) -> str:
    """Each distinct changed row (nulls equal), how many copies the changes add (negative: remove),
    and the changelog position of one of its images."""
    selected = ", ".join(quoted(name) for name in columns)
    count = f"sum(CASE WHEN {OP} = '{OP_DELETE}' THEN -1 ELSE 1 END)::BIGINT"
    return f"""
        SELECT {selected}, {count} AS {NET}, min({ROW}) AS {ROW}
        FROM changes GROUP BY {selected} HAVING {count} <> 0"""


def unchanged_values_query(key: list[str], columns: list[str]) -> str:
    """Per new image (``images``) with an unchanged-TOAST marker, each marked column's value: its
    key's latest earlier unmarked change in ``changes``, else its previous row (``previous``, by
    key). A delete as that latest change, or neither, fails the query: the value is unknown."""
    partition = ", ".join(quoted(name) for name in key)
    window = f"PARTITION BY {partition} ORDER BY {COMMIT_LSN}, {SEQ} ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW"
    earlier = ", ".join(
        f"coalesce({quoted(TOAST_MARKER_PREFIX + name)}, false) AS {quoted('m_' + name)}, "
        f"last_value(CASE WHEN NOT coalesce({quoted(TOAST_MARKER_PREFIX + name)}, false) THEN "
        f"struct_pack(v := {quoted(name)}, d := {OP} = '{OP_DELETE}') END IGNORE NULLS) OVER ({window}) "
        f"AS {quoted('e_' + name)}"
        for name in columns
    )
    unknown = "error('an unchanged-TOAST value has no earlier image of its key')"
    resolved = ", ".join(
        f"CASE WHEN NOT h.{quoted('m_' + name)} THEN NULL WHEN h.{quoted('e_' + name)} IS NOT NULL THEN "
        f"(CASE WHEN h.{quoted('e_' + name)}.d THEN {unknown} ELSE h.{quoted('e_' + name)}.v END) "
        f"WHEN p.__found THEN p.{quoted(name)} ELSE {unknown} END AS {quoted(name)}"
        for name in columns
    )
    joined = " AND ".join(f"h.{quoted(name)} = p.{quoted(name)}" for name in key)
    return f"""
        SELECT h.{ROW}, {resolved}
        FROM (SELECT {ROW}, {partition}, {earlier} FROM changes) AS h
        LEFT JOIN (SELECT *, true AS __found FROM previous) AS p ON {joined}
        WHERE h.{ROW} IN (SELECT {ROW} FROM images)
        ORDER BY h.{ROW}"""


def copies_query() -> str:
    """The changelog position of each copy a keyless change adds (``net`` rows with a positive count)."""
    return f"SELECT {ROW} FROM (SELECT {ROW}, unnest(range({NET})) FROM net WHERE {NET} > 0) ORDER BY {ROW}"


def removed_positions_query(columns: list[str], deletes: bool, probe: str | None = None) -> str:
    """File names and row numbers of previous live rows (the view ``previous_files``) equal to a
    removed row, as many per removed row as it loses, at most (``$1``: the delete files, when
    ``deletes``).

    With ``probe`` (a column no removed row holds NULL in: :mod:`.keyless_probe`), the previous
    rows are first narrowed to those whose ``probe`` value a removed row has: a semi join that
    DuckDB pushes into the Parquet scan, so the other columns are read only where it matches.
    """
    condition = " AND ".join(f"previous.{quoted(name)} IS NOT DISTINCT FROM removed.{quoted(name)}"
                             for name in columns)
    narrowed = "" if probe is None else (
        f"SEMI JOIN (SELECT DISTINCT {quoted(probe)} FROM net WHERE {NET} < 0) AS probed "
        f"ON previous.{quoted(probe)} = probed.{quoted(probe)}\n            ")
    return f"""
        SELECT name, pos FROM (
            SELECT parse_filename(previous.{FILE}) AS name, previous.{POS} AS pos, -removed.{NET} AS wanted,
                   row_number() OVER (PARTITION BY removed.{ROW} ORDER BY previous.{FILE}, previous.{POS}) AS k
            FROM previous_files AS previous
            {narrowed}JOIN (SELECT * FROM net WHERE {NET} < 0) AS removed ON {condition}{_live_rows(deletes)})
        WHERE k <= wanted"""


def _live_rows(deletes: bool) -> str:
    """The anti join that drops the previous rows a delete file removes (nothing without ``deletes``)."""
    if not deletes:
        return ""
    return f"""
            ANTI JOIN (SELECT parse_filename({DELETE_FILE_PATH}) AS name, {DELETE_POS} AS pos
                       FROM read_parquet($1, hive_partitioning = false)) AS deleted
            ON parse_filename(previous.{FILE}) = deleted.name AND previous.{POS} = deleted.pos"""


def quoted(name: str) -> str:
    """An SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def quoted_text(text: str) -> str:
    """An SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def images_query(key: list[str]) -> str:
    """The changelog position of each changed key's last change, unless it is a delete."""
    partition = ", ".join(quoted(name) for name in key)
    return f"""
        SELECT {ROW} FROM (
            SELECT {ROW}, {OP}, row_number() OVER (
                PARTITION BY {partition} ORDER BY {COMMIT_LSN} DESC, {SEQ} DESC) AS rank
            FROM changes)
        WHERE rank = 1 AND {OP} <> '{OP_DELETE}'
        ORDER BY {ROW}"""


def first_changes_query(key: list[str]) -> str:
    """Per previous row to delete (the table ``located``: its file name, row number and key), the
    changelog position of its key's first change in the run, and whether that change is a delete
    (with the capture's old images, a delete of the whole row the previous cut has)."""
    partition = ", ".join(quoted(name) for name in key)
    condition = " AND ".join(f"located.{quoted(name)} = first.{quoted(name)}" for name in key)
    return f"""
        SELECT located.name, located.pos, first.{ROW}, first.{OP} = '{OP_DELETE}' AS deleted
        FROM located JOIN (
            SELECT {partition}, {ROW}, {OP}, row_number() OVER (
                PARTITION BY {partition} ORDER BY {COMMIT_LSN}, {SEQ}) AS rank
            FROM changes) AS first ON {condition} AND first.rank = 1"""


def positions_query(key: list[str], deletes: bool, values: list[str] | None = None) -> str:
    """File names and row numbers of the previous live rows (the view ``previous_files``) whose
    key changed (``$1``: the delete files, when ``deletes``), with their key and ``values``
    columns when ``values`` is given.

    Keys compare with plain equality (a key has no null); rows the previous snapshot already
    deletes are not deleted again.
    """
    condition = " AND ".join(f"previous.{quoted(name)} = changed.{quoted(name)}" for name in key)
    selected = ", ".join(quoted(name) for name in key)
    carried = "".join(f", previous.{quoted(name)}" for name in [*key, *values]) if values is not None else ""
    return f"""
        SELECT parse_filename(previous.{FILE}) AS name, previous.{POS} AS pos{carried}
        FROM previous_files AS previous
        SEMI JOIN (SELECT DISTINCT {selected} FROM changes) AS changed ON {condition}{_live_rows(deletes)}"""
