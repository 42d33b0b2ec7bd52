"""Staging member outputs the way the refresh step does, with pyarrow instead of Spark."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pyarrow.parquet as pq
from pyarrow import fs

from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.ledger import Ledger
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.member_declarations import SqlMember
from airflow_provider_streambed.refresh.mirrors.position_delete_rows import position_deletes
from airflow_provider_streambed.staging import (
    MemberManifest,
    join,
    member_dir,
    member_manifest_uri,
    staging_root,
    write_json,
)

EPOCH = dt.datetime(2026, 1, 1)


def make_group(name: str = "bank", members: int = 2, atomicity: str = "group") -> RefreshGroup:
    """A group whose members are SQL members (publish does not care about the kind)."""
    names = ["accounts", "totals"] if members == 2 else [f"m{i:02d}" for i in range(members)]
    return RefreshGroup(
        name=name,
        source_conn_id="src",
        catalog_conn_id="cat",
        namespace="ns",
        members=tuple(SqlMember(name=n, query="select 1") for n in names),
        atomicity=atomicity,  # type: ignore[arg-type]  # tests pass both literals
    )


def bank_tables(version: int, accounts: int = 5) -> dict[str, pa.Table]:
    """Cut ``version`` of a bank: balances move, ``totals`` must equal their sum (the invariant)."""
    ids = list(range(accounts))
    balances = [100 * version + i * version for i in ids]
    stamp = EPOCH + dt.timedelta(seconds=version)
    account_table = pa.table({
        "id": pa.array(ids, pa.int64()),
        "balance": pa.array(balances, pa.int64()),
        "version": pa.array([version] * accounts, pa.int64()),
        "updated_at": pa.array([stamp] * accounts, pa.timestamp("us", tz="UTC")),
    })
    totals = pa.table({"total": pa.array([sum(balances)], pa.int64()), "version": pa.array([version], pa.int64())})
    return {"accounts": account_table, "totals": totals}


def stage(warehouse: str, group: str, run_key: str, watermark: Lsn, tables: dict[str, pa.Table],
          files_per_member: int = 1) -> dict[str, MemberManifest]:
    """Write each table as Parquet (no field ids, TIMESTAMP_MICROS) under the run's staging, plus manifests."""
    root = staging_root(warehouse, group, run_key)
    manifests = {}
    for member, table in tables.items():
        data_dir = join(member_dir(root, member), "data")
        filesystem, path = fs.FileSystem.from_uri(data_dir)
        filesystem.create_dir(path, recursive=True)
        files = []
        step = max(1, -(-table.num_rows // files_per_member))
        for index in range(files_per_member):
            part = table.slice(index * step, step)
            uri = f"{data_dir}/part-{index:05d}-{run_key}.parquet"
            pq.write_table(part, fs.FileSystem.from_uri(uri)[1], coerce_timestamps="us")
            files.append(uri)
        manifest = MemberManifest(member, watermark, tuple(files), table.num_rows)
        write_json(member_manifest_uri(root, member), manifest.to_dict())
        manifests[member] = manifest
    return manifests


def pin_and_stage(ledger: Ledger, warehouse: str, group: str, run_key: str, watermark: Lsn,
                  tables: dict[str, pa.Table]) -> dict[str, MemberManifest]:
    """Pin the run in the ledger (as capture does), then stage its outputs."""
    ledger.pin_run(group, run_key, watermark)
    return stage(warehouse, group, run_key, watermark, tables)


def stage_delta(warehouse: str, group: str, run_key: str, watermark: Lsn, member: str, added: pa.Table,
                deleted: list[tuple[str, int]], base_snapshot_id: int | None = None,
                images: pa.Table | None = None) -> MemberManifest:
    """Stage a merge-on-read output: ``added`` rows, and position deletes (published file URI, row
    position, with the deleted rows' ``images``, their fields carrying field ids, when given) over
    the member's previous snapshot (``base_snapshot_id``), as the mirror refresh writes them."""
    root = staging_root(warehouse, group, run_key)
    data_dir = join(member_dir(root, member), "data")
    filesystem, path = fs.FileSystem.from_uri(data_dir)
    filesystem.create_dir(path, recursive=True)
    data_uri = f"{data_dir}/part-00000-{run_key}.parquet"
    pq.write_table(added, fs.FileSystem.from_uri(data_uri)[1])
    deletes = ()
    if deleted:
        rows = position_deletes(pa.array([p for p, _ in deleted], pa.string()),
                                pa.array([n for _, n in deleted], pa.int64()), images)
        delete_uri = f"{data_dir}/delete-00000-{run_key}.parquet"
        pq.write_table(rows, fs.FileSystem.from_uri(delete_uri)[1])
        deletes = (delete_uri,)
    manifest = MemberManifest(member, watermark, (data_uri,), added.num_rows, incremental=True,
                              delete_files=deletes, deleted_rows=len(deleted), base_snapshot_id=base_snapshot_id)
    write_json(member_manifest_uri(root, member), manifest.to_dict())
    return manifest
