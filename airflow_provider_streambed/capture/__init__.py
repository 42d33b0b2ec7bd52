"""Change capture from PostgreSQL: slot and publication, pinned watermark, pgoutput decoding, changelogs.

The public entry points are :func:`~airflow_provider_streambed.capture.run.capture_run` and
:func:`~airflow_provider_streambed.capture.slot.advance_slot`. Runs where the capture step runs
(the Airflow worker's capture task, ``refresh_once``), the one process with a connection to the
source; :mod:`.change_signal`, the cheap check for new changes, runs in the triggerer's polls.
Nothing here imports Airflow.
"""
