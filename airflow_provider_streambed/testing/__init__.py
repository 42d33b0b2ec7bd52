"""Helpers for tests, benchmarks and the demo: a throwaway PostgreSQL cluster and friends."""
