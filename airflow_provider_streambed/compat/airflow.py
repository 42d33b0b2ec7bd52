"""What differs between the Airflow releases the provider supports: 3.1 to the newest 3.x.

Airflow 3.1 keeps the exceptions a task raises in ``airflow.exceptions`` and its metrics in
``airflow.stats.Stats``; later releases (3.3.2 tested) have them in the Task SDK,
``airflow.sdk.exceptions`` and ``airflow.sdk.observability.stats``. A task's inlet events are a
query (newest first, limited) from 3.2 on, a list of every event in 3.1. The operators and the
metrics take these from here, found where the running Airflow has them (the SDK's first).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

try:
    from airflow.sdk.exceptions import AirflowFailException, AirflowNotFoundException, TaskDeferred
except ImportError:  # Airflow 3.1
    from airflow.exceptions import (  # type: ignore[no-redef,attr-defined,unused-ignore]
        AirflowFailException,
        AirflowNotFoundException,
        TaskDeferred,
    )

__all__ = [
    "AirflowFailException", "AirflowNotFoundException", "TaskDeferred", "dag_bag", "decode_trigger_kwargs", "gauge",
    "listener_managers", "providers_manager", "recent_inlet_events", "reload_metrics_backend", "serialized_round_trip",
]


def gauge(stat: str, value: float, tags: dict[str, Any]) -> None:
    """Set gauge ``stat`` (under Airflow's metrics prefix) to ``value``, tagged ``tags`` where the
    backend takes tags; a no-op when Airflow has no metrics backend configured."""
    try:
        from airflow.sdk.observability.stats import gauge as send
    except ImportError:  # Airflow 3.1
        from airflow.stats import Stats

        send = Stats.gauge
    send(stat, value, tags=tags)


def recent_inlet_events(context: Mapping[str, Any], asset: Any, limit: int) -> list[Any]:
    """The task's newest ``limit`` events of inlet ``asset`` (Airflow 3.1: all of them)."""
    events = context["inlet_events"][asset]
    if hasattr(events, "ascending"):
        return list(events.ascending(False).limit(limit))
    return list(events)  # Airflow 3.1: a list of every event


# For the tests and tools that reach into Airflow itself (the DAG bag, the providers manager, the
# metrics backend, serialized DAGs and triggers, listeners): imported when called.


def dag_bag(folder: str) -> Any:
    """Airflow's ``DagBag`` of the DAG files in ``folder``."""
    try:
        from airflow.dag_processing.dagbag import DagBag
    except ImportError:  # Airflow 3.1
        from airflow.models.dagbag import DagBag  # type: ignore[no-redef,attr-defined,unused-ignore]
    return DagBag(dag_folder=folder)


def providers_manager() -> Any:
    """The providers manager a task's runtime reads hooks and Asset URI handlers from."""
    try:
        from airflow.sdk.providers_manager_runtime import ProvidersManagerTaskRuntime
    except ImportError:  # Airflow 3.1
        from airflow.providers_manager import ProvidersManager

        return ProvidersManager()
    return ProvidersManagerTaskRuntime()


def reload_metrics_backend() -> None:
    """Build Airflow's metrics backend again from the configuration as it is now (``[metrics]``)."""
    try:
        from airflow.sdk.observability import stats
        from airflow.sdk.observability.metrics.stats_utils import get_stats_factory
    except ImportError:  # Airflow 3.1: the backend is chosen once, when airflow.stats is imported
        from airflow.configuration import conf
        from airflow.metrics.base_stats_logger import NoStatsLogger
        from airflow.metrics.statsd_logger import get_statsd_logger
        from airflow.stats import Stats

        stats_class: Any = Stats
        type(stats_class).factory = get_statsd_logger if conf.getboolean("metrics", "statsd_on") else NoStatsLogger
        stats_class.instance = None  # the metaclass makes it again from the factory on the next call
        return
    stats.initialize(factory=get_stats_factory(), export_legacy_names=False)


def serialized_round_trip(dag: Any) -> Any:
    """``dag`` serialized and deserialized, as the scheduler holds it."""
    try:
        from airflow.serialization.serialized_objects import DagSerialization
    except ImportError:  # Airflow 3.1
        from airflow.serialization.serialized_objects import (  # type: ignore[assignment,unused-ignore]
            SerializedDAG as DagSerialization,
        )
    return DagSerialization.deserialize_dag(DagSerialization.serialize_dag(dag))


def decode_trigger_kwargs(kwargs: Any) -> Any:
    """A stored trigger row's keyword arguments, decoded."""
    try:
        from airflow.serialization.decoders import smart_decode_trigger_kwargs
    except ImportError:  # Airflow 3.1
        from airflow.serialization.serialized_objects import (  # type: ignore[no-redef,attr-defined,unused-ignore]
            smart_decode_trigger_kwargs,
        )
    return smart_decode_trigger_kwargs(kwargs)


def listener_managers() -> list[Any]:
    """Airflow's listener managers: the scheduler's and the task runner's (one in Airflow 3.1)."""
    from airflow.listeners.listener import get_listener_manager as core_listeners

    try:
        from airflow.sdk.listener import get_listener_manager as task_listeners
    except ImportError:  # Airflow 3.1
        return [core_listeners()]
    return [core_listeners(), task_listeners()]
