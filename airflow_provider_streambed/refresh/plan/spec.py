"""A job spec where it is carried out: the checks made before computing, and the captures it reads."""

from __future__ import annotations

from airflow_provider_streambed.cut_order import check_after_last_cut
from airflow_provider_streambed.declarations import RefreshGroup
from airflow_provider_streambed.exceptions import RefreshError
from airflow_provider_streambed.staging import CaptureManifest, JobSpec, TableCapture, read_json


def check_spec(spec: JobSpec, group: RefreshGroup) -> None:
    """Refuse a spec whose W is not after the previous cut's, or that names unknown members.

    Raises:
        InvalidWatermarkError: W is at or before the previous cut's W (final).
        RefreshError: a requested member is not in the group.
    """
    check_after_last_cut(group.name, spec.run_key, spec.watermark, spec.prev_watermark)
    names = {member.name.lower() for member in group.members}
    unknown = [name for name in spec.members if name.lower() not in names]
    if unknown:
        raise RefreshError(f"group {group.name!r}, run {spec.run_key!r}: unknown members {unknown}")


def read_captures(spec: JobSpec, group: RefreshGroup) -> dict[str, TableCapture]:
    """The run's capture of each mirrored table, by lower-cased member name.

    Raises:
        RefreshError: the capture manifest is missing or holds another W than the spec.
    """
    data = read_json(spec.capture_manifest)
    if data is None:
        where = f"group {group.name!r}, run {spec.run_key!r}"
        raise RefreshError(f"{where}: no capture manifest at {spec.capture_manifest}")
    manifest = CaptureManifest.from_dict(data)
    if manifest.watermark != spec.watermark:
        raise RefreshError(
            f"group {group.name!r}, run {spec.run_key!r}: capture manifest has W={manifest.watermark}, "
            f"job spec has W={spec.watermark}"
        )
    return {table.member.lower(): table for table in manifest.tables}
