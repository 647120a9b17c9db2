"""Scheduled SQL tasks and the DuckDB bridge (seed path `rills.compute.sql`)."""

from ..tasks import DuckDBBridge, ScheduledSQLTask

__all__ = ["ScheduledSQLTask", "DuckDBBridge"]
