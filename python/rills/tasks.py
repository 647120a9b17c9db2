"""Scheduled SQL tasks, join/aggregate tasks, and the DuckDB bridge."""

from __future__ import annotations

import time
import weakref
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple, Union

import pyarrow as pa
import pyarrow.compute as pc

from . import _arrow, _core
from .retention import RetentionPolicy

if TYPE_CHECKING:
    from .engine import RillEngine

__all__ = ["ScheduledSQLTask", "TableJoinTask", "DuckDBBridge"]

Keys = Union[str, List[str]]


class ScheduledSQLTask:
    """A SQL query the engine runs every `interval_seconds` over the live tables.

    Its output table `output_table` holds the query's result (created on the
    first run, keyed by `primary_key` if given). The first run happens on the
    first tick after the task is added. A failing query is logged and recorded
    as an engine event; the task runs again when next due.

    `incremental` says how the result is kept up to date: "auto" (default)
    maintains it from the tables' changes when the query allows it and
    otherwise re-runs the whole query (the task's stats say which, and why,
    in `maintenance`); True always maintains it incrementally, and adding a
    task whose query cannot be is refused with ValueError naming the part of
    the query that cannot; False re-runs the whole query every interval.
    """

    def __init__(
        self,
        name: str,
        query: str,
        output_table: str,
        interval_seconds: float = 1.0,
        primary_key: Optional[Keys] = None,
        use_prepared_statements: bool = True,
        incremental: Union[str, bool] = "auto",
    ):
        """ValueError for an empty name, query or output table, a negative interval,
        or an `incremental` other than "auto", True or False.

        `use_prepared_statements` (default True, as in the seed): the engine
        prepares the query once and re-executes the prepared statement on
        every run (re-preparing it when a table it reads is re-registered);
        False parses and plans it on every run. Results are the same.
        `incremental`: see the class; whether the query can be maintained
        incrementally is checked when the task is added to an engine (the
        tables it reads must exist then).
        """
        for arg, value in (("name", name), ("query", query), ("output_table", output_table)):
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"ScheduledSQLTask {arg} must be a non-empty str, got {value!r}")
        if interval_seconds is None or float(interval_seconds) < 0:
            raise ValueError(f"interval_seconds must be >= 0, got {interval_seconds!r}")
        self.incremental = incremental
        self.name = name
        self.query = query
        self.output_table = output_table
        self.interval_seconds = float(interval_seconds)
        self.primary_key = primary_key
        self.use_prepared_statements = bool(use_prepared_statements)
        _arrow.key_list(primary_key)  # type check
        self._last_run_time = 0.0
        self._engine_ref: Optional[weakref.ReferenceType] = None

    @property
    def last_run_time(self) -> float:
        """Start time (engine clock, unix seconds) of the task's last run; 0.0 before the first.

        Once the task is added to an engine this is the engine's record of
        its runs. Settable (e.g. to 0.0) for standalone use of is_due().
        """
        engine = self._engine_ref() if self._engine_ref is not None else None
        if engine is not None and not engine._core.closed:
            stats = engine._core.task_stats().get(self.name)
            if stats is not None and stats["runs"] > 0:
                return max(float(stats["last_run_at"]), self._last_run_time)
        return self._last_run_time

    @last_run_time.setter
    def last_run_time(self, value: float) -> None:
        self._last_run_time = float(value)

    def is_due(self, current_time: Optional[float] = None) -> bool:
        """Return True when `interval_seconds` have passed since last_run_time at `current_time`.

        `current_time` is in unix seconds (the engine's clock; default now).
        A task that never ran is due.
        """
        now = time.time() if current_time is None else float(current_time)
        return (now - self.last_run_time) >= self.interval_seconds

    def _attach(self, engine: "RillEngine") -> "ScheduledSQLTask":
        # last_run_time then reads the engine's record of the runs.
        self._engine_ref = weakref.ref(engine)
        return self

    @classmethod
    def _from_core(cls, d: Dict[str, Any]) -> "ScheduledSQLTask":
        """The task as the engine holds it (see RillEngine.sql_tasks)."""
        task = cls(d["name"], d["query"], d["output_table"], d["interval_seconds"],
                   _arrow.key_public(list(d["primary_key"])),
                   use_prepared_statements=d.get("use_prepared_statements", True),
                   incremental=_INCREMENTAL_FROM_CORE[d.get("incremental", "auto")])
        return task

    @property
    def incremental(self) -> Union[str, bool]:
        """How the result is kept up to date: "auto", True or False (see the class)."""
        return self._incremental

    @incremental.setter
    def incremental(self, value: Union[str, bool]) -> None:
        # `is`, not ==: 1 and 0 are not modes.
        if not (value is True or value is False or (isinstance(value, str) and value == "auto")):
            raise ValueError(
                f'ScheduledSQLTask incremental must be "auto", True or False, got {value!r}'
            )
        self._incremental = value

    def _core_incremental(self) -> str:
        """The engine's name of the mode: "auto", "true" or "false"."""
        if self._incremental is True:
            return "true"
        if self._incremental is False:
            return "false"
        return "auto"

    def _definition(self) -> tuple:
        return (self.name, self.query, self.output_table, float(self.interval_seconds),
                _arrow.key_list(self.primary_key), self._core_incremental())

    def __eq__(self, other: object) -> bool:
        """Tasks are equal when they define the same task (the engine returns copies)."""
        if not isinstance(other, ScheduledSQLTask):
            return NotImplemented
        return self._definition() == other._definition()

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.name))

    def __repr__(self) -> str:
        return (
            f"<ScheduledSQLTask(name={self.name!r}, output_table={self.output_table!r}, "
            f"interval_seconds={self.interval_seconds}, incremental={self.incremental!r})>"
        )


_INCREMENTAL_FROM_CORE: Dict[str, Union[str, bool]] = {"auto": "auto", "true": True, "false": False}


class TableJoinTask:
    """Join two live tables (and optionally aggregate) into `output_table`.

    Runs every `interval_seconds` (default 0: every tick) through DuckDB over
    the published versions of both tables. With `aggregations`
    ([(column, function)], functions sum, count, avg/mean, min, max,
    count_distinct) the joined rows are grouped by `group_by` and the output
    columns are named "<column>_<function>". With `incremental=True` only left
    rows written since the previous run are joined and the result is appended
    (give a `retention_policy` then, or the output grows without bound).
    """

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
    ):
        """ValueError for empty names or keys, mismatched key counts, and malformed aggregations.

        join_type is "inner", "left outer", "right outer" or "full outer"
        (checked when the task is added to an engine).
        """
        for arg, value in (
            ("name", name),
            ("left_table", left_table),
            ("right_table", right_table),
            ("output_table", output_table),
        ):
            if not isinstance(value, str) or not value:
                raise ValueError(f"TableJoinTask {arg} must be a non-empty str, got {value!r}")
        if not _arrow.key_list(keys):
            raise ValueError("TableJoinTask needs at least one join key")
        if right_keys is not None and len(_arrow.key_list(right_keys)) != len(_arrow.key_list(keys)):
            raise ValueError(
                f"keys {keys!r} and right_keys {right_keys!r} must name as many columns"
            )
        aggs = []
        for item in aggregations or []:
            if not (isinstance(item, (tuple, list)) and len(item) == 2):
                raise ValueError(f"aggregations must be (column, function) pairs, got {item!r}")
            aggs.append((str(item[0]), str(item[1])))
        if retention_policy is not None and not isinstance(retention_policy, RetentionPolicy):
            raise TypeError("retention_policy must be a RetentionPolicy")
        if float(interval_seconds) < 0:
            raise ValueError(f"interval_seconds must be >= 0, got {interval_seconds}")
        self.name = name
        self.left_table = left_table
        self.right_table = right_table
        self.keys = keys
        self.output_table = output_table
        self.join_type = join_type
        self.right_keys = right_keys
        self.group_by = group_by
        self.aggregations = aggs or None
        self.primary_key = primary_key
        self.incremental = bool(incremental)
        self.retention_policy = retention_policy
        self.interval_seconds = float(interval_seconds)
        self._engine_ref: Optional[weakref.ReferenceType] = None

    @property
    def _last_processed_rows(self) -> int:
        """Rows of the left table the last incremental run had covered (the
        seed's counter; 0 before the first run and for a non-incremental task).

        The engine keeps the run times, not a counter: these are the left rows
        written at or before the last run (for an append table, all of them).
        """
        engine = self._engine_ref() if self._engine_ref is not None else None
        if not self.incremental or engine is None or engine._core.closed:
            return 0
        stats = engine._core.task_stats().get(self.name)
        if stats is None or stats["runs"] == 0:
            return 0
        table = engine.get_table(self.left_table)
        if table is None:
            return 0
        column = table.to_arrow().column("z_update_ts")
        return int(pc.sum(pc.less_equal(column, stats["last_run_at"])).as_py() or 0)

    def _attach(self, engine: "RillEngine") -> "TableJoinTask":
        # _last_processed_rows then reads the engine's record of the runs.
        self._engine_ref = weakref.ref(engine)
        return self

    def _core_args(self) -> dict:
        retention = self.retention_policy._core_args() if self.retention_policy else {}
        return dict(
            name=self.name,
            left_table=self.left_table,
            right_table=self.right_table,
            keys=_arrow.key_list(self.keys),
            right_keys=_arrow.key_list(self.right_keys),
            output_table=self.output_table,
            join_type=self.join_type,
            group_by=_arrow.key_list(self.group_by),
            aggregations=list(self.aggregations or []),
            primary_key=_arrow.key_list(self.primary_key),
            incremental=self.incremental,
            interval_seconds=self.interval_seconds,
            **retention,
        )

    @classmethod
    def _from_core(cls, d: Dict[str, Any]) -> "TableJoinTask":
        """The task as the engine holds it (see RillEngine.join_tasks)."""
        retention = None
        if d["retention"] is not None:
            max_rows, max_age_seconds, time_column = d["retention"]
            retention = RetentionPolicy(max_rows, max_age_seconds, time_column)
        return cls(
            d["name"], d["left_table"], d["right_table"], _arrow.key_public(list(d["keys"])),
            d["output_table"], join_type=d["join_type"],
            right_keys=_arrow.key_public(list(d["right_keys"])),
            group_by=_arrow.key_public(list(d["group_by"])),
            aggregations=[tuple(a) for a in d["aggregations"]] or None,
            primary_key=_arrow.key_public(list(d["primary_key"])),
            incremental=d["incremental"], retention_policy=retention,
            interval_seconds=d["interval_seconds"],
        )

    def _definition(self) -> tuple:
        keys = _arrow.key_list(self.keys)
        return (
            self.name, self.left_table, self.right_table, keys, self.output_table,
            _join_type_name(self.join_type), _arrow.key_list(self.right_keys) or keys,
            _arrow.key_list(self.group_by),
            [(c, _AGGREGATE_ALIASES.get(f.lower(), f.lower())) for c, f in self.aggregations or []],
            _arrow.key_list(self.primary_key), self.incremental, self.retention_policy,
            float(self.interval_seconds),
        )

    def __eq__(self, other: object) -> bool:
        """Tasks are equal when they define the same task (the engine returns copies)."""
        if not isinstance(other, TableJoinTask):
            return NotImplemented
        return self._definition() == other._definition()

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.name))

    def __repr__(self) -> str:
        return (
            f"<TableJoinTask(name={self.name!r}, left={self.left_table!r}, "
            f"right={self.right_table!r}, output={self.output_table!r})>"
        )


_JOIN_ALIASES = {"left": "left outer", "right": "right outer", "full": "full outer",
                 "outer": "full outer"}
_AGGREGATE_ALIASES = {"mean": "avg"}


def _join_type_name(join_type: Any) -> Any:
    # The engine's name of a join type ("left" -> "left outer"), for comparing tasks.
    if not isinstance(join_type, str):
        return join_type
    name = " ".join(join_type.lower().replace("_", " ").split())
    return _JOIN_ALIASES.get(name, name)


class DuckDBBridge:
    """SQL over an engine's live tables through its embedded DuckDB.

    Every table is a view that scans the table's current version without
    copying it; register() adds a pyarrow table as a table of the engine.
    Available as `engine.duckdb`. DuckDB lives in the engine's C++ core:
    an external DuckDB connection cannot be used (ValueError).
    """

    def __init__(self, engine: "RillEngine", connection: Any = None,
                 use_prepared_statements: bool = True):
        if connection is not None:
            raise ValueError(
                "DuckDBBridge(connection=...) is not supported: Rill's DuckDB runs inside the "
                "engine's C++ core and scans live tables there; query them with "
                "engine.query_sql(), or read a table into your own DuckDB connection with "
                "con.register(name, engine.get_table(name).to_arrow())"
            )
        self.engine = engine
        self.use_prepared_statements = bool(use_prepared_statements)

    @property
    def _prepared_cache(self) -> Dict[str, str]:
        """Queries of SQL tasks that run as prepared statements and have run, to the task's name.

        The seed's bridge kept its prepared statements here; the engine keeps
        them in C++ (SqlEngine::QueryPrepared). Read-only view for seed code.
        """
        return {
            task.query: task.name
            for task in self.engine.sql_tasks
            if task.use_prepared_statements and task.last_run_time > 0
        }

    def query(self, sql: str) -> pa.Table:
        """Run `sql` and return its result. rills.SQLError (a ValueError) with DuckDB's message on failure."""
        return self.engine.query_sql(sql)

    def register(self, name: str, table: Any) -> None:
        """Make `table` (a pyarrow Table or RecordBatch) queryable as `name`.

        Registers (or replaces, as DuckDB's register does) the engine table
        `name` holding these rows; its key and mode come from the schema's
        metadata. ValueError for a reserved name (rill_*).
        """
        data = _arrow.to_table(table, what="register()")
        if data is None:
            raise ValueError(f"register() needs a non-empty table for {name!r}")
        engine = self.engine
        if engine.get_table(name) is not None:
            engine.drop_table(name)
        engine.register_table(name, schema=data.schema).replace_state(data)

    def register_tables(self) -> None:
        """No-op: live tables are always visible to SQL."""

    def run_due_tasks(self, current_time: Optional[float] = None) -> None:
        """Run the engine's scheduled SQL tasks that are due at `current_time` (unix seconds, default now).

        Each due task's query result replaces its output table (created with
        the task's primary key if needed), as the engine's tick does; a
        failing task is logged and recorded as an engine event, and the
        others still run.
        """
        now = time.time() if current_time is None else float(current_time)
        for task in self.engine.sql_tasks:
            if task.is_due(now):
                _core.run_task_now(self.engine._core, task.name)

    def __repr__(self) -> str:
        return f"<DuckDBBridge(tables={self.engine.table_names()!r})>"
