"""Airflow hooks of the streambed provider: the source database and the Iceberg catalog."""
