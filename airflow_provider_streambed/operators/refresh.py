"""``RefreshGroupOperator``: compute every member as of W in one Spark application."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from airflow.providers.openlineage.extractors import OperatorLineage
from airflow.sdk import Context
from pyiceberg.catalog import Catalog

from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.exceptions import DeclarationError
from airflow_provider_streambed.ledger import Ledger
from airflow_provider_streambed.member_declarations import Mirror
from airflow_provider_streambed.operators.base import StreambedBaseOperator
from airflow_provider_streambed.operators.lineage import lineage_of

if TYPE_CHECKING:
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
    from airflow.sdk import Connection

    from airflow_provider_streambed import steps
    from airflow_provider_streambed.staging import JobSpec

logger = logging.getLogger(__name__)

#: Connection type of the spark provider's ``SparkConnectHook``: the refresh runs on that server.
SPARK_CONNECT = "spark_connect"

DOC_MD = """
### refresh_group
Builds the job spec of this run from the ledger (the previous cut and this run's W). Members
whose inputs did not change since the previous cut are carried over (logged with the reason).
Mirrors whose changes merge in-process (DuckDB, the common case: see the concepts page) are merged
and staged in this task first; if no member is left to compute, no Spark application is started.
Otherwise it submits
**one Spark application** with the spark provider's `SparkSubmitHook` (connection
`spark_conn_id`: local, standalone, YARN or Kubernetes), or, when that connection is of type
`spark_connect`, runs the same job in this worker as a client of that Spark Connect server (no
spark-submit, no JVM here). The job computes all members in
dependency order and stages each member's Parquet files with a manifest written last (a mirror
writes only the new images of changed rows plus position deletes, unless it is rewritten whole:
first cut, truncate, added columns, or compaction past its thresholds, at most one per run with
`compact="auto"`). A retry
skips the members whose manifest exists for the same W: only failed members are recomputed.
With `application_per_member`, one application per member still to compute, sources first.
The spec and the command line carry paths, W and names only, never credentials.
"""


class RefreshGroupOperator(StreambedBaseOperator):
    """Submit the group's Spark job for the run's pinned W; XCom gets the members' row counts.

    A run that already published (cleared in the UI) submits nothing.

    Args:
        group: the refresh-group declaration.
        spark_conn_id: the Spark connection: for ``SparkSubmitHook``, or of type ``spark_connect``
            (``SparkConnectHook``) to run the job on that Spark Connect server.
        conf: Spark configuration (``--conf``; on Spark Connect its ``spark.streambed.*`` settings only);
            never put credentials here.
        packages, executor_cores, executor_memory, driver_memory, num_executors, env_vars,
        spark_binary: passed to ``SparkSubmitHook``.
        application_per_member: submit one application per member (isolation on big clusters,
            one JVM start each) instead of one for the whole run.
        compact: which mirrors due for compaction are rewritten whole this run: ``"auto"`` (at
            most one, the most amplified), ``"all"`` or ``"none"``.
        members: compute only these members (a task per member); default all. Their sources must
            have been staged for the run by earlier tasks.
        catalog_conn_id: the catalog connection (default: the group's ``catalog_conn_id``).
    """

    template_fields = ("spark_conn_id", "catalog_conn_id", "conf")
    template_fields_renderers: ClassVar[dict[str, str]] = {"conf": "json"}

    def __init__(
        self,
        *,
        spark_conn_id: str = "spark_default",
        conf: dict[str, Any] | None = None,
        packages: str | None = None,
        executor_cores: int | None = None,
        executor_memory: str | None = None,
        driver_memory: str | None = None,
        num_executors: int | None = None,
        env_vars: dict[str, Any] | None = None,
        spark_binary: str | None = None,
        application_per_member: bool = False,
        compact: str = "auto",
        members: Sequence[str] | None = None,
        **kwargs: Any,
    ) -> None:
        from airflow_provider_streambed.refresh.plan.compaction import COMPACT_MODES

        kwargs.setdefault("doc_md", DOC_MD)
        super().__init__(**kwargs)
        if compact not in COMPACT_MODES:
            raise DeclarationError(f"task {self.task_id!r}: compact={compact!r}; expected one of {list(COMPACT_MODES)}")
        self.compact = compact
        self.members = tuple(members or ())
        unknown = [name for name in self.members if name.lower() not in {m.name.lower() for m in self.group.members}]
        if unknown:
            raise DeclarationError(f"task {self.task_id!r}: members {unknown} are not in group {self.group.name!r}")
        self.spark_conn_id = spark_conn_id
        self.conf = dict(conf or {})
        self.application_per_member = application_per_member
        self.hook_options: dict[str, Any] = {
            "packages": packages,
            "executor_cores": executor_cores,
            "executor_memory": executor_memory,
            "driver_memory": driver_memory,
            "num_executors": num_executors,
            "env_vars": env_vars,
            "spark_binary": spark_binary,
        }

    def check_spark_connection(self) -> Connection:
        """The Spark connection; a missing one is refused, since ``SparkSubmitHook`` would quietly submit to YARN.

        Raises:
            ConnectionConfigError: ``spark_conn_id`` is not defined.
        """
        from airflow.sdk import BaseHook

        from airflow_provider_streambed.compat.airflow import AirflowNotFoundException
        from airflow_provider_streambed.exceptions import ConnectionConfigError

        try:
            return BaseHook.get_connection(self.spark_conn_id)
        except AirflowNotFoundException as missing:
            raise ConnectionConfigError(
                f"group {self.group.name!r}: Spark connection {self.spark_conn_id!r} is not defined "
                "(SparkSubmitHook would fall back to YARN); create it or pass spark_conn_id"
            ) from missing

    def run_on_connect(self, spec: JobSpec, members: Sequence[str]) -> None:
        """Compute ``members`` (all: empty) in this worker as a client of the connection's Spark Connect server."""
        from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook

        from airflow_provider_streambed.refresh.spark.connect import run_on_connect

        url = SparkConnectHook(self.spark_conn_id).get_connection_url()
        run_on_connect(spec, url, members, connection=self.spark_conn_id, settings=self.conf)

    def submit_hook(self, spec: JobSpec, spec_uri: str, members: Sequence[str]) -> SparkSubmitHook:
        """The ``SparkSubmitHook`` of one application: the job spec's URI (and members) as its only arguments.

        A driver that runs here (client mode, not YARN or Kubernetes) gets the object store's
        credentials of the catalog connection in its environment (the hook passes ``env_vars`` to
        the spark-submit process there); elsewhere the hook would turn them into ``--conf``
        arguments, so the cluster provides them (an instance role, its own environment).
        """
        from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

        from airflow_provider_streambed import storage
        from airflow_provider_streambed.refresh import job_arguments

        def hook(env_vars: dict[str, str] | None) -> SparkSubmitHook:
            return SparkSubmitHook(
                conn_id=self.spark_conn_id,
                conf=self.conf,
                name=f"streambed-{self.group.name}-cut-{spec.cut_number}" + (f"-{members[0]}" if members else ""),
                application_args=job_arguments(spec_uri, members),
                **{**self.hook_options, "env_vars": env_vars},
            )

        submit = hook(self.hook_options["env_vars"])
        credentials = storage.credential_environment(spec_uri)
        if not credentials or not driver_runs_here(submit):
            return submit
        return hook({**credentials, **(self.hook_options["env_vars"] or {})})

    def spark_launcher(self) -> steps.Launcher:
        """Computes members on the Spark connection: on its Spark Connect server, else with spark-submit.

        Raises:
            ConnectionConfigError: ``spark_conn_id`` is not defined.
        """
        from airflow_provider_streambed.dependencies import check_spark_reachable
        from airflow_provider_streambed.refresh import job_application
        from airflow_provider_streambed.refresh.spark.submit import spark_submit_executable

        connection = self.check_spark_connection()

        def launch(spec: JobSpec, spec_uri: str, members: Sequence[str]) -> None:
            logger.info("group=%s cut=%d: on %s connection %r", self.group.name, spec.cut_number,
                        connection.conn_type, self.spark_conn_id)
            if connection.conn_type == SPARK_CONNECT:
                self.run_on_connect(spec, members)
                return
            if not self.hook_options["spark_binary"]:
                spark_submit_executable()  # a clear error when only pyspark-client is installed
            hook = self.submit_hook(spec, spec_uri, members)
            check_spark_reachable(submit_master(hook), self.spark_conn_id)
            hook.submit(job_application())

        return launch

    def run_step(self, context: Context, run: steps.Run) -> dict[str, Any]:
        """Plan, stage and compute; returns ``{run_key, watermark_lsn, cut_number, members, carried, mirrors}``.

        An unchanged run (W equals the last cut's W) submits nothing.
        """
        from airflow_provider_streambed import steps

        result = steps.refresh(run, spark=self.spark_launcher, compact=self.compact, spark_conf=self.conf,
                               members=self.members, application_per_member=self.application_per_member)
        if not isinstance(result, steps.Refreshed):
            return self.nothing_to_do(run, result)
        spec, manifests = result.spec, result.manifests
        self.lineage = lineage_of(lambda: derived_inputs(run.catalog, run.ledger, self.group, spec), self.task_id)
        rows = {name: manifest.row_count for name, manifest in sorted(manifests.items())}
        logger.info("group=%s W=%s cut=%d: members staged %s", self.group.name, spec.watermark, spec.cut_number, rows)
        written = {name: manifest.reason for name, manifest in sorted(manifests.items()) if manifest.reason}
        return {"run_key": run.run_key, "watermark_lsn": str(spec.watermark), "cut_number": spec.cut_number,
                "members": rows, "carried": dict(spec.carried), "mirrors": written}


def submit_master(hook: SparkSubmitHook) -> str:
    """The master URL ``hook`` submits to, as the spark provider resolved it from the connection.

    Private API: the provider keeps it in ``SparkSubmitHook._connection["master"]`` and offers no
    public accessor; its resolution rules (URL in ``host``, or ``conn_type://host:port``) are
    not worth copying. Tested against the installed provider in ``tests/unit/operators``.
    """
    return str(hook._connection["master"])


def driver_runs_here(hook: SparkSubmitHook) -> bool:
    """Whether the driver of ``hook``'s application runs in the spark-submit process here (client
    mode on a local or standalone master), where ``env_vars`` stay in that process's environment.

    Private API, fenced with :func:`submit_master`: ``SparkSubmitHook._connection["deploy_mode"]``.
    """
    master = submit_master(hook)
    return hook._connection["deploy_mode"] != "cluster" and not master.startswith(("yarn", "k8s"))


def derived_inputs(catalog: Catalog, ledger: Ledger, group: RefreshGroup, spec: JobSpec) -> OperatorLineage:
    """The member tables the computed derived members read (as of the last cut; none before the
    first), and the run as a run facet."""
    from airflow_provider_streambed.catalog import warehouse_of
    from airflow_provider_streambed.operators.lineage import StreambedRunFacet, as_input, table_dataset

    last = ledger.last_cut(group.name)
    read = sorted({group.member(source).name for name in spec.computed_members()
                   if not isinstance(member := group.member(name), Mirror) for source in member.sources})
    inputs = [
        as_input(table_dataset(last.members[name].table_location, warehouse_of(catalog),
                               last.members[name].table_identifier))
        for name in read if last is not None and name in last.members
    ]
    facet = StreambedRunFacet(group.name, spec.run_key, str(spec.watermark))
    return OperatorLineage(inputs=inputs, run_facets={"streambed": facet})
