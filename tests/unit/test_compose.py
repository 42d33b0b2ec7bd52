"""docker-compose.yml, checked offline: services, logical WAL, connections, shared volumes, the image.

The connections are resolved by the provider's own hooks (and the spark provider's), so a
connection the compose file declares wrongly fails here, not in a container. ``docker compose
config`` runs too when a compose implementation is installed.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from psycopg.conninfo import conninfo_to_dict

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "docker-compose.yml"
AIRFLOW_COMPONENTS = {"api-server", "scheduler", "dag-processor", "triggerer"}
SPARK_ROLES = {"org.apache.spark.deploy.master.Master", "org.apache.spark.deploy.worker.Worker",
               "org.apache.spark.sql.connect.service.SparkConnectServer"}
WAREHOUSE_VOLUME = "warehouse"
_VARIABLE = re.compile(r"\$\{(\w+)(?::?-([^}]*))?\}|\$\$")


def interpolate(value: Any) -> Any:
    """Compose's interpolation with an empty environment: ``${X:-default}`` -> default, ``$$`` -> ``$``."""
    if isinstance(value, str):
        return _VARIABLE.sub(lambda match: "$" if match.group(0) == "$$" else (match.group(2) or ""), value)
    if isinstance(value, list):
        return [interpolate(item) for item in value]
    if isinstance(value, dict):
        return {key: interpolate(item) for key, item in value.items()}
    return value


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return interpolate(yaml.safe_load(COMPOSE.read_text()))


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return compose["services"]


def command_of(service: dict[str, Any]) -> list[str]:
    command = service.get("command", [])
    return command.split() if isinstance(command, str) else [str(part) for part in command]


def airflow_services(services: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Service name -> Airflow component, for services running ``airflow <component>``."""
    found = {}
    for name, service in services.items():
        command = command_of(service)
        if len(command) == 1 and command[0] in AIRFLOW_COMPONENTS:
            found[name] = command[0]
    return found


def spark_services(services: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Service name -> Spark class, for the standalone master and worker and the Connect server."""
    found = {}
    for name, service in services.items():
        command = command_of(service)
        for role in SPARK_ROLES & set(command):
            found[name] = role
    return found


def environment_of(service: dict[str, Any]) -> dict[str, str]:
    environment = service.get("environment", {})
    if isinstance(environment, list):
        environment = dict(item.split("=", 1) for item in environment)
    return {key: str(value) for key, value in environment.items()}


def mounts_of(service: dict[str, Any]) -> dict[str, str]:
    """Source (volume name or host path) -> container path."""
    mounts = {}
    for volume in service.get("volumes", []):
        source, target = volume.split(":")[:2]
        mounts[source] = target
    return mounts


def postgres_settings(service: dict[str, Any]) -> dict[str, str]:
    command = command_of(service)
    return dict(command[i + 1].split("=", 1) for i, part in enumerate(command) if part == "-c")


def postgres_with_logical_wal(services: dict[str, dict[str, Any]]) -> str:
    found = [name for name, service in services.items()
             if str(service.get("image", "")).startswith("postgres") and
             postgres_settings(service).get("wal_level") == "logical"]
    assert len(found) == 1, f"expected one PostgreSQL service with wal_level=logical, found {found}"
    return found[0]


def test_every_component_is_a_service(services: dict[str, dict[str, Any]]) -> None:
    assert set(airflow_services(services).values()) == AIRFLOW_COMPONENTS
    assert set(spark_services(services).values()) == SPARK_ROLES
    postgres = [name for name, service in services.items() if str(service.get("image", "")).startswith("postgres:")]
    assert len(postgres) >= 2, "a source database and a catalog database are needed"


def test_source_database_decodes_logically_with_room_for_slots(services: dict[str, dict[str, Any]]) -> None:
    settings = postgres_settings(services[postgres_with_logical_wal(services)])
    assert int(settings["max_replication_slots"]) >= 10
    assert int(settings["max_wal_senders"]) >= 10


def test_init_migrates_and_every_airflow_service_waits_for_it(services: dict[str, dict[str, Any]]) -> None:
    init = [name for name, service in services.items() if "airflow db migrate" in " ".join(command_of(service))]
    assert len(init) == 1
    assert "airflow users create" in " ".join(command_of(services[init[0]]))
    for name in airflow_services(services):
        condition = services[name]["depends_on"][init[0]]["condition"]
        assert condition == "service_completed_successfully", name


def connections(service: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {key.removeprefix("AIRFLOW_CONN_").lower(): json.loads(value)
            for key, value in environment_of(service).items() if key.startswith("AIRFLOW_CONN_")}


def test_connections_are_json_of_the_expected_types(services: dict[str, dict[str, Any]]) -> None:
    airflow = airflow_services(services)
    first = connections(services[next(iter(airflow))])
    assert {conn_id: conn["conn_type"] for conn_id, conn in first.items()} == {
        "bank_pg": "postgres", "lakehouse": "streambed_catalog", "spark_default": "spark",
        "spark_connect": "spark_connect", "lakehouse_rest": "iceberg"}
    for name in airflow:
        assert connections(services[name]) == first, f"{name} has other connections"


def test_connections_match_the_example_dags(services: dict[str, dict[str, Any]]) -> None:
    from dags.example_bank import bank
    from dags.example_derived import payments

    conn_ids = set(connections(services["airflow-scheduler"]))
    for group in (bank, payments):
        assert {group.source_conn_id, group.catalog_conn_id, "spark_default"} <= conn_ids, group.name


def test_hooks_resolve_the_connections_to_the_compose_services(
    services: dict[str, dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    from airflow_provider_streambed.hooks.catalog import StreambedCatalogHook
    from airflow_provider_streambed.hooks.source import StreambedSourceHook

    for key, value in environment_of(services["airflow-scheduler"]).items():
        if key.startswith("AIRFLOW_CONN_"):
            monkeypatch.setenv(key, value)
    source_name = postgres_with_logical_wal(services)
    source_env = environment_of(services[source_name])
    source = conninfo_to_dict(StreambedSourceHook("bank_pg").conninfo)
    assert source == {"host": source_name, "port": "5432", "user": source_env["POSTGRES_USER"],
                      "password": source_env["POSTGRES_PASSWORD"], "dbname": source_env["POSTGRES_DB"]}

    catalog = StreambedCatalogHook("lakehouse").properties
    catalog_env = environment_of(services["catalog-db"])
    assert catalog["uri"] == (f"postgresql+psycopg://{catalog_env['POSTGRES_USER']}:{catalog_env['POSTGRES_PASSWORD']}"
                              f"@catalog-db:5432/{catalog_env['POSTGRES_DB']}")
    assert catalog["warehouse"].startswith("file:///")

    rest = StreambedCatalogHook("lakehouse_rest").properties  # the `rest` profile's SeaweedFS
    weed = command_of(services["seaweedfs"])
    assert services["seaweedfs"]["profiles"] == ["rest"]
    assert rest["type"] == "rest" and rest["uri"] == "http://seaweedfs:8181" and "-s3.port.iceberg=8181" in weed
    assert rest["s3.endpoint"] == "http://seaweedfs:8333" and "-s3.port=8333" in weed
    assert f"-tableBucket={rest['warehouse']}" in weed
    weed_env = environment_of(services["seaweedfs"])
    assert (rest["client.access-key-id"], rest["client.secret-access-key"]) == (
        weed_env["AWS_ACCESS_KEY_ID"], weed_env["AWS_SECRET_ACCESS_KEY"])
    assert rest["streambed.ledger-uri"] == catalog["uri"]  # the ledger in the catalog database
    assert rest["streambed.staging-uri"].startswith(catalog["warehouse"] + "/")  # the shared volume

    master = SparkSubmitHook(conn_id="spark_default")._resolve_connection()["master"]
    assert master == "spark://spark-master:7077"
    spark_master = command_of(services["spark-master"])
    assert spark_master[spark_master.index("--port") + 1] == "7077"
    assert "spark://spark-master:7077" in command_of(services["spark-worker"])


def test_warehouse_volume_is_mounted_at_the_catalog_warehouse_everywhere(
    services: dict[str, dict[str, Any]], compose: dict[str, Any]
) -> None:
    lakehouse = connections(services["airflow-scheduler"])["lakehouse"]
    path = lakehouse["extra"]["warehouse"].removeprefix("file://")
    assert WAREHOUSE_VOLUME in compose["volumes"]
    for name in [*airflow_services(services), *spark_services(services)]:
        assert mounts_of(services[name]).get(WAREHOUSE_VOLUME) == path, name


def test_dags_folder_is_mounted_from_the_repository(services: dict[str, dict[str, Any]]) -> None:
    for name in airflow_services(services):
        target = mounts_of(services[name]).get("./dags")
        folder = environment_of(services[name]).get("AIRFLOW__CORE__DAGS_FOLDER", "/opt/airflow/dags")
        assert target == folder, name
    assert (REPO / "dags" / "example_bank.py").is_file()


def test_image_installs_the_provider_java_and_pins_pyspark(services: dict[str, dict[str, Any]]) -> None:
    built = {name: service["build"] for name, service in services.items() if "build" in service}
    runs_image = {*airflow_services(services), *spark_services(services)}
    assert runs_image <= set(built), "Airflow and Spark services must run the provider's image"
    dockerfiles = {(REPO / build["context"] / build["dockerfile"]).resolve() for build in built.values()}
    assert len(dockerfiles) == 1
    dockerfile = dockerfiles.pop()
    text = dockerfile.read_text()
    assert "openjdk-17" in text
    source_dir = re.search(r"^COPY\s.*\bpyproject\.toml\b.*\s(\S+?)/?$", text, flags=re.MULTILINE)
    assert source_dir is not None, "the image must copy the repository's pyproject.toml"
    install = re.search(rf"pip install [^\n]*\s\"?{re.escape(source_dir.group(1))}/?(\[spark-submit\])\"?(\s|$)", text)
    assert install is not None, "the image must pip install the provider (with spark-submit) from the copied sources"
    default = re.search(r"^DEFAULT_PYSPARK \?= (\S+)$", (REPO / "Makefile").read_text(), flags=re.MULTILINE)
    assert default is not None, "the Makefile names its default pyspark"
    repin = text.find(f"pip install --no-cache-dir --force-reinstall --no-deps pyspark=={default.group(1)}")
    assert install.start() < repin, "pyspark must be re-pinned to the Makefile's default after installing the provider"
    for copied in re.findall(r"^COPY\s+(?:--\S+\s+)*(.+?)\s+\S+$", text, flags=re.MULTILINE):
        for source in copied.split():
            assert (REPO / source).exists(), f"{dockerfile.name} copies missing {source}"


def test_source_init_creates_the_tables_the_examples_mirror(services: dict[str, dict[str, Any]]) -> None:
    from dags.example_bank import bank
    from dags.example_derived import payments

    init_dir = mounts_of(services[postgres_with_logical_wal(services)])
    host_dir = next(source for source, target in init_dir.items() if target == "/docker-entrypoint-initdb.d")
    sql = " ".join(path.read_text() for path in (REPO / host_dir).glob("*.sql"))
    created = set(re.findall(r"CREATE TABLE (\w+)", sql))
    for group in (bank, payments):
        assert {mirror.table for mirror in group.mirrors} <= created, group.name


def compose_command() -> list[str] | None:
    if shutil.which("docker") and subprocess.run(["docker", "compose", "version"], capture_output=True,
                                                 check=False).returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    return None


def test_compose_config_validates() -> None:
    command = compose_command()
    if command is None:
        pytest.skip("neither `docker compose` nor `docker-compose` is installed: the file is checked offline only")
    completed = subprocess.run([*command, "-f", str(COMPOSE), "config", "-q"], capture_output=True, text=True,
                               cwd=REPO, check=False, timeout=60)
    assert completed.returncode == 0, completed.stderr
