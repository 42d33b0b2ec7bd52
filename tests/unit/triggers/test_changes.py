"""The change trigger as Airflow stores it: names only, rebuilt from ``serialize()``, watched by the group's Asset."""

from __future__ import annotations

import importlib

import pytest
from airflow.triggers.base import BaseEventTrigger

from airflow_provider_streambed import Mirror, RefreshGroup
from airflow_provider_streambed.exceptions import DeclarationError
from airflow_provider_streambed.triggers.changes import GroupChangesTrigger, group_asset

GROUP = RefreshGroup(name="bank", source_conn_id="bank_pg", catalog_conn_id="lakehouse", namespace="bank",
                     members=[Mirror("public.transfers"), Mirror("accounts")])


def test_serialize_rebuilds_the_same_trigger_from_names_only() -> None:
    trigger = GroupChangesTrigger.for_group(GROUP, poll_interval=1)
    classpath, kwargs = trigger.serialize()
    assert kwargs == {"group": "bank", "tables": ["public.accounts", "public.transfers"], "source_conn_id": "bank_pg",
                      "catalog_conn_id": "lakehouse", "poll_interval": 1.0}
    module, _, name = classpath.rpartition(".")
    rebuilt = getattr(importlib.import_module(module), name)(**kwargs)
    assert rebuilt.serialize() == (classpath, kwargs)
    assert BaseEventTrigger.hash(classpath, kwargs) == BaseEventTrigger.hash(*rebuilt.serialize())


def test_group_asset_is_watched_by_the_groups_trigger() -> None:
    asset = group_asset(GROUP)
    assert (asset.name, asset.uri) == ("streambed_bank_source_changes", "streambed-source://bank_pg/bank")
    [watcher] = asset.watchers
    assert isinstance(watcher.trigger, GroupChangesTrigger)
    assert watcher.trigger.serialize()[1]["tables"] == ["public.accounts", "public.transfers"]


@pytest.mark.parametrize("poll_interval", [0, -1, "2"])
def test_a_poll_interval_must_be_positive_seconds(poll_interval: object) -> None:
    with pytest.raises(DeclarationError, match="group 'bank': poll_interval must be a number of seconds > 0"):
        GroupChangesTrigger(group="bank", tables=["public.accounts"], source_conn_id="s", catalog_conn_id="c",
                            poll_interval=poll_interval)  # type: ignore[arg-type]  # the wrong types are the test


def test_a_trigger_without_tables_is_refused() -> None:
    with pytest.raises(DeclarationError, match="group 'bank': the change trigger needs the group's source tables"):
        GroupChangesTrigger(group="bank", tables=[], source_conn_id="s", catalog_conn_id="c")
