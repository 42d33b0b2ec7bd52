"""Airflow triggers: event triggers for asset watchers and deferrable operators."""
