"""The provider's on/off Spark settings: on unless set to false."""

from __future__ import annotations

from airflow_provider_streambed.refresh.plan.settings import switched_on


def test_a_switch_is_on_unless_set_to_false() -> None:
    assert switched_on({}, "spark.streambed.x")
    assert switched_on({"spark.streambed.x": "true"}, "spark.streambed.x")
    assert not switched_on({"spark.streambed.x": " FALSE "}, "spark.streambed.x")
    assert not switched_on({"spark.streambed.x": "false"}, "spark.streambed.x")
