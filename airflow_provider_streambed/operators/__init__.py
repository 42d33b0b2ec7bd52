"""Airflow operators of the streambed provider: capture, refresh and publish one cut."""
