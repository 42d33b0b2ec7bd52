"""Publish checks that need no services: capability, manifests' watermark, attempt states, names."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pyarrow as pa
import pytest
from pyiceberg.schema import Schema
from pyiceberg.types import BinaryType, LongType, NestedField, StringType

from airflow_provider_streambed.exceptions import CatalogCapabilityError, PublishError
from airflow_provider_streambed.ledger import cut_tag
from airflow_provider_streambed.lsn import Lsn
from airflow_provider_streambed.publish import check_capability
from airflow_provider_streambed.publish.attempts import Attempt, attempt_state
from airflow_provider_streambed.publish.draft import run_watermark
from airflow_provider_streambed.publish.schema import same_schema
from airflow_provider_streambed.publish.staged import run_data_dir
from airflow_provider_streambed.publish.tables import parallel
from airflow_provider_streambed.staging import MemberManifest
from tests.integration.publish.helpers import make_group


def test_a_catalog_without_group_commit_is_refused_unless_per_table() -> None:
    rest = SimpleNamespace(name="rest")
    with pytest.raises(CatalogCapabilityError, match=r"group 'bank': catalog 'rest' .* atomicity='per_table'"):
        check_capability(rest, make_group())  # type: ignore[arg-type]
    check_capability(rest, make_group(atomicity="per_table"))  # type: ignore[arg-type]


def test_run_watermark_needs_every_member_at_one_w() -> None:
    group = make_group()
    one = {m: MemberManifest(m, Lsn(10), (), 0) for m in ("accounts", "totals")}
    assert run_watermark(group, "r", one) == Lsn(10)
    with pytest.raises(PublishError, match=r"no staged output for members \['totals'\]"):
        run_watermark(group, "r", {"accounts": one["accounts"]})
    with pytest.raises(PublishError, match=r"unknown members \['extra'\]"):
        run_watermark(group, "r", {**one, "extra": MemberManifest("extra", Lsn(10), (), 0)})
    with pytest.raises(PublishError, match="different W"):
        run_watermark(group, "r", {**one, "totals": MemberManifest("totals", Lsn(11), (), 0)})


def test_attempt_states_follow_the_pointers() -> None:
    attempt = Attempt("a", "bank", "r", "ns", {"t": {"base": "m1", "new": "m2", "metadata_dir": "x"},
                                                "u": {"base": None, "new": "n1", "metadata_dir": "y"}})
    assert attempt_state(attempt, {"t": "m1"}, recorded=False) == "open"
    assert attempt_state(attempt, {"t": "m2", "u": "n1"}, recorded=False) == "committed"
    assert attempt_state(attempt, {"t": "m3"}, recorded=False) == "dead"
    assert attempt_state(attempt, {"t": "m1", "u": "other"}, recorded=False) == "dead"
    assert attempt_state(attempt, {"t": "m3", "u": "n3"}, recorded=True) == "committed"  # moved on since


def test_names() -> None:
    assert cut_tag("bank", 7) == "bank-cut-7"
    assert run_data_dir("file:///w/ns/t/", "run1") == "file:///w/ns/t/data/run1"
    dotted = run_data_dir("s3://w/ns/t", "bank.manual__2026")  # no dots: SeaweedFS refuses them there
    assert dotted.startswith("s3://w/ns/t/data/bank_manual__2026-") and len(dotted.rsplit("-", 1)[1]) == 8
    assert dotted != run_data_dir("s3://w/ns/t", "bank_manual__2026")


def test_parallel_uses_threads_only_for_remote_storage() -> None:
    def thread_of(_: int) -> str:
        time.sleep(0.05)  # keeps a pool thread busy while the others take the next items
        return threading.current_thread().name

    main = threading.current_thread().name
    assert set(parallel(thread_of, range(4), "file:///warehouse")) == {main}
    assert set(parallel(thread_of, range(4), "/warehouse")) == {main}
    remote = parallel(thread_of, range(4), "s3://bucket/warehouse")
    assert main not in remote and len(set(remote)) > 1


def test_same_schema_takes_plain_strings_for_large_ones_and_sees_any_other_difference() -> None:
    table = Schema(NestedField(1, "id", LongType(), required=True), NestedField(2, "note", StringType()),
                   NestedField(3, "blob", BinaryType()))
    staged = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("note", pa.string()),
                        pa.field("blob", pa.binary())])
    assert table.as_arrow().field("note").type == pa.large_string()  # what pyiceberg gives
    assert same_schema(table, staged)
    assert same_schema(table, staged.with_metadata({b"spark": b"ignored"}))
    assert not same_schema(table, staged.append(pa.field("added", pa.int32())))
    assert not same_schema(table, staged.set(0, pa.field("id", pa.int32(), nullable=False)))
    assert not same_schema(table, staged.set(0, pa.field("id", pa.int64())))  # nullable: the update decides
