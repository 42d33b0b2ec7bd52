"""Airflow Asset URIs of member tables: ``streambed://<catalog conn id>/<namespace>/<member>``.

No installed provider registers an Iceberg Asset scheme (Airflow 3.3), so the provider registers
``streambed``: one Asset per member table, the authority being the catalog connection id. The
publish step emits one event per member and cut, its extra holding ``cut_id``, ``watermark_lsn``
and ``group``, so DAGs scheduled on these Assets run once per whole published cut.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import SplitResult

from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.exceptions import DeclarationError

if TYPE_CHECKING:
    from airflow.sdk import Asset

SCHEME = "streambed"


def member_asset_uri(group: RefreshGroup, member: str) -> str:
    """The Asset URI of one member table of ``group``."""
    return f"{SCHEME}://{group.catalog_conn_id}/{group.namespace}/{group.member(member).name}"


def member_assets(group: RefreshGroup) -> list[Asset]:
    """One Asset per member table, in declaration order, grouped under the group's name."""
    from airflow.sdk import Asset

    return [
        Asset(uri=member_asset_uri(group, member.name), group=f"streambed-{group.name}") for member in group.members
    ]


def sanitize_uri(uri: SplitResult) -> SplitResult:
    """Airflow's URI check for the ``streambed`` scheme: an authority and ``/<namespace>/<table>``.

    Raises:
        DeclarationError: the URI lacks the catalog, namespace or table part (a ``ValueError``, as
            Airflow expects of a URI check; raised when the DAG file declaring the Asset is parsed).
    """
    parts = [part for part in uri.path.split("/") if part]
    if not uri.netloc or len(parts) != 2:
        raise DeclarationError(f"{uri.geturl()!r}: a streambed Asset URI is streambed://<catalog>/<namespace>/<table>")
    return uri
