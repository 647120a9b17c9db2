"""Scheduled SQL tasks, join tasks, and the DuckDB bridge."""

from typing import Any, List, Optional, Sequence, Tuple, Union

import pyarrow as pa

from .engine import RillEngine
from .retention import RetentionPolicy

Keys = Union[str, List[str]]

class ScheduledSQLTask:
    """A SQL query whose result output_table holds, refreshed every interval_seconds.

    incremental: "auto" (maintained from the tables' changes when the query
    allows, else re-run), True (always maintained; add_sql_task raises
    ValueError naming what cannot be) or False (re-run every interval).
    """

    name: str
    query: str
    output_table: str
    interval_seconds: float
    primary_key: Optional[Keys]
    use_prepared_statements: bool
    incremental: Union[str, bool]
    last_run_time: float
    def __init__(
        self,
        name: str,
        query: str,
        output_table: str,
        interval_seconds: float = 1.0,
        primary_key: Optional[Keys] = None,
        use_prepared_statements: bool = True,
        incremental: Union[str, bool] = "auto",
    ) -> None:
        """ValueError for empty strings, a negative interval, or an incremental
        other than "auto", True or False."""
    def is_due(self, current_time: Optional[float] = None) -> bool:
        """True when interval_seconds passed since last_run_time (unix seconds)."""

class TableJoinTask:
    """Join two live tables (optionally grouped and aggregated) into output_table."""

    name: str
    left_table: str
    right_table: str
    keys: Keys
    output_table: str
    join_type: str
    right_keys: Optional[Keys]
    group_by: Optional[Keys]
    aggregations: Optional[List[Tuple[str, str]]]
    primary_key: Optional[Keys]
    incremental: bool
    retention_policy: Optional[RetentionPolicy]
    interval_seconds: float
    def __init__(
        self,
        name: str,
        left_table: str,
        right_table: str,
        keys: Keys,
        output_table: str,
        join_type: str = "inner",
        right_keys: Optional[Keys] = None,
        group_by: Optional[Keys] = None,
        aggregations: Optional[Sequence[Tuple[str, str]]] = None,
        primary_key: Optional[Keys] = None,
        incremental: bool = False,
        retention_policy: Optional[RetentionPolicy] = None,
        interval_seconds: float = 0.0,
    ) -> None:
        """Aggregated columns are named "<column>_<function>"."""

class DuckDBBridge:
    """SQL over an engine's live tables (engine.duckdb)."""

    engine: RillEngine
    use_prepared_statements: bool
    def __init__(self, engine: RillEngine, connection: None = None,
                 use_prepared_statements: bool = True) -> None: ...
    @property
    def con(self) -> DuckDBConnection:
        """DuckDB's connection API over the engine's own DuckDB (the seed's engine.duckdb.con)."""
    def query(self, sql: str) -> pa.Table:
        """Run SQL over the live tables (rills.SQLError on failure)."""
    def register(self, name: str, table: Any) -> None:
        """Make a pyarrow table queryable as `name` (replaces a table of that name)."""
    def run_due_tasks(self, current_time: Optional[float] = None) -> None:
        """Run the engine's SQL tasks that are due at current_time (unix seconds)."""
    def register_tables(self) -> None:
        """No-op: live tables are always visible."""

class DuckDBConnection:
    """DuckDB's connection API over an engine's DuckDB (engine.duckdb.con).

    Runs what query_sql runs and refuses the rest with its exceptions;
    `PRAGMA threads=N` / `SET threads = N` set the engine's DuckDB threads.
    """

    def __init__(self, engine: RillEngine) -> None: ...
    def execute(self, sql: str, params: Optional[Sequence[Any]] = None) -> DuckDBResult:
        """Run `sql`, its ? / $N placeholders bound to `params` (rills.InvalidInputError
        for a count mismatch, TypeError for a value of another type than None, bool,
        int, float, Decimal, str, bytes, datetime, date, time, timedelta)."""
    def sql(self, query: str, params: Optional[Sequence[Any]] = None) -> DuckDBResult:
        """The same as execute()."""

class DuckDBResult:
    """A result read with DuckDB's fetch methods; each returns the rows not fetched yet."""

    @property
    def columns(self) -> List[str]: ...
    def fetchone(self) -> Optional[Tuple[Any, ...]]: ...
    def fetchmany(self, size: int = 1) -> List[Tuple[Any, ...]]: ...
    def fetchall(self) -> List[Tuple[Any, ...]]: ...
    def arrow(self) -> pa.Table: ...
    def fetch_arrow_table(self) -> pa.Table: ...
    def fetch_record_batch(self, rows_per_batch: int = 1_000_000) -> pa.RecordBatchReader: ...
    def df(self) -> Any:
        """A pandas DataFrame (needs pandas)."""
    def fetchdf(self) -> Any: ...
