"""Vectorized table operations (the seed's `rills.compute`).

    from rills.compute import join_tables, filter_table, aggregate_table, upsert_table

Pure functions over pyarrow tables, run by Arrow's C++ kernels (joins and
group-bys by Acero, upserts by the engine's key index). The modules
`rills.compute.operations`, `rills.compute.sql` (ScheduledSQLTask,
DuckDBBridge), `rills.compute.upsert` (upsert_table) and
`rills.compute.join` (TableJoinTask) are the seed's import paths.
"""

from .operations import aggregate_table, filter_table, join_tables
from .upsert import upsert_table

__all__ = ["upsert_table", "join_tables", "filter_table", "aggregate_table"]
