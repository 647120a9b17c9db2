"""Scheduled SQL tasks, join/aggregate tasks, and the DuckDB bridge."""

from __future__ import annotations

import datetime
import decimal
import numbers
import re
import time
import weakref
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple, Union

import pyarrow as pa
import pyarrow.compute as pc

from . import _arrow, _core
from .errors import InvalidInputError
from .retention import RetentionPolicy

if TYPE_CHECKING:
    from .engine import RillEngine

__all__ = ["ScheduledSQLTask", "TableJoinTask", "DuckDBBridge", "DuckDBConnection", "DuckDBResult"]

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
    an external DuckDB connection cannot be used (ValueError); `con` is a
    connection-like object over the engine's own DuckDB instead.
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
        self._con: Optional[DuckDBConnection] = None

    @property
    def con(self) -> "DuckDBConnection":
        """The seed's `engine.duckdb.con`: DuckDB's connection API over the engine's DuckDB.

        Runs what query_sql runs (read statements over the live tables), plus
        `PRAGMA threads=N` / `SET threads = N`; see DuckDBConnection.
        """
        if self._con is None:
            self._con = DuckDBConnection(self.engine)
        return self._con

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


class DuckDBConnection:
    """DuckDB's connection API over an engine's own DuckDB (`engine.duckdb.con`).

    For code written against the seed, whose bridge held a DuckDB connection:
    execute() runs what RillEngine.query_sql runs (SELECT, EXPLAIN, DESCRIBE,
    SHOW, read-only PRAGMAs over the live tables) and refuses everything else
    with the same exceptions (ValueError for writes such as INSERT, CREATE or
    COPY; rills.SQLError and its subclasses when DuckDB refuses the query).
    `PRAGMA threads=N`, `SET threads = N` and `SET threads TO N` set the
    threads of the engine's DuckDB for every later query (through the core's
    set_sql_threads; a build without it raises NotImplementedError). Any
    thread may call it, as query_sql.
    """

    def __init__(self, engine: "RillEngine"):
        self._engine = engine

    def execute(self, sql: str, params: Optional[Sequence[Any]] = None) -> "DuckDBResult":
        """Run `sql` and return its result.

        `params` (a list or tuple) binds the statement's `?` or `$1`, `$2`, ...
        placeholders, as DuckDB does; the values are written into the SQL as
        literals of DuckDB's types for them (None, bool, int, float, Decimal,
        str, bytes, datetime, date, time, timedelta; TypeError for others).
        rills.InvalidInputError when the count does not match the placeholders.
        """
        if not isinstance(sql, str):
            raise TypeError(f"sql must be a str, got {type(sql).__name__}")
        if params is not None:
            sql = _bind_params(sql, params)
        threads = _threads_setting(sql)
        if threads is not None:
            self._set_threads(threads)
            return DuckDBResult(pa.table({}))
        return DuckDBResult(self._engine.query_sql(sql))

    def sql(self, query: str, params: Optional[Sequence[Any]] = None) -> "DuckDBResult":
        """The same as execute() (DuckDB's con.sql(), which the seed's bridge used)."""
        return self.execute(query, params)

    def _set_threads(self, threads: int) -> None:
        # The engine's DuckDB has its configuration locked (SET fails on it), so
        # the core sets the threads through its own call.
        set_sql_threads = getattr(self._engine._core, "set_sql_threads", None)
        if set_sql_threads is None:
            raise NotImplementedError(
                "setting the threads of the engine's DuckDB needs rills._core.Engine."
                "set_sql_threads, which this build of rills lacks"
            )
        set_sql_threads(threads)

    def __repr__(self) -> str:
        return "<DuckDBConnection(engine's DuckDB)>"


class DuckDBResult:
    """The result of DuckDBConnection.execute(), read with DuckDB's fetch methods.

    Every fetch returns rows not fetched yet and consumes them, as DuckDB's
    do: fetchone() then fetchall() gives the rest, and arrow() after fetchall()
    an empty table. One thread at a time (the position is not locked).
    """

    def __init__(self, table: pa.Table):
        self._table = table
        self._pos = 0

    @property
    def columns(self) -> List[str]:
        """The result's column names."""
        return list(self._table.column_names)

    def _take(self, n: Optional[int] = None) -> pa.Table:
        rest = self._table.num_rows - self._pos
        n = rest if n is None else max(0, min(int(n), rest))
        out = self._table.slice(self._pos, n)
        self._pos += n
        return out

    def fetchone(self) -> Optional[Tuple[Any, ...]]:
        """Return the next row as a tuple, or None after the last."""
        rows = _rows(self._take(1))
        return rows[0] if rows else None

    def fetchmany(self, size: int = 1) -> List[Tuple[Any, ...]]:
        """Return up to `size` next rows as tuples."""
        return _rows(self._take(size))

    def fetchall(self) -> List[Tuple[Any, ...]]:
        """Return the remaining rows as tuples."""
        return _rows(self._take())

    def arrow(self) -> pa.Table:
        """Return the remaining rows as a pyarrow Table (as DuckDB before 1.4 did)."""
        return self._take()

    def fetch_arrow_table(self) -> pa.Table:
        """Return the remaining rows as a pyarrow Table."""
        return self._take()

    def fetch_record_batch(self, rows_per_batch: int = 1_000_000) -> pa.RecordBatchReader:
        """Return the remaining rows as a pyarrow RecordBatchReader (DuckDB 1.4's arrow())."""
        table = self._take()
        return pa.RecordBatchReader.from_batches(
            table.schema, table.to_batches(max_chunksize=max(1, int(rows_per_batch))))

    def df(self) -> Any:
        """Return the remaining rows as a pandas DataFrame (needs pandas)."""
        return self._take().to_pandas()

    fetchdf = df

    def __repr__(self) -> str:
        return f"<DuckDBResult(rows={self._table.num_rows}, columns={self.columns!r})>"


def _rows(table: pa.Table) -> List[Tuple[Any, ...]]:
    return list(zip(*(column.to_pylist() for column in table.columns)))


# `PRAGMA threads=N`, `PRAGMA threads(N)`, `SET [GLOBAL] threads = N`, `SET threads TO N`
# (worker_threads is DuckDB's alias), N quoted or not.
_THREADS = re.compile(
    r"\s*(?:PRAGMA\s+threads\s*(?:=|\()|SET\s+(?:GLOBAL\s+)?(?:worker_)?threads\s*(?:=|\sTO\s))"
    r"\s*(?P<q>'?)(?P<n>[^\s;')]*)(?P=q)\s*\)?\s*;?\s*\Z",
    re.IGNORECASE,
)


def _threads_setting(sql: str) -> Optional[int]:
    """The N of a statement that sets DuckDB's threads, or None for any other statement."""
    match = _THREADS.match(sql)
    if match is None:
        return None
    if not match["n"].isdigit() or int(match["n"]) < 1:
        raise InvalidInputError(
            f"threads must be a whole number >= 1, got {match['n']!r} [query: {sql}]")
    return int(match["n"])


# Placeholders and what hides them: quoted strings and identifiers, comments,
# dollar-quoted strings, and words (E'...' strings start with one).
_DOLLAR = re.compile(r"\$(?:(?P<num>\d+)|(?P<tag>[A-Za-z_]\w*)?\$|(?P<name>[A-Za-z_]\w*))")
_WORD = re.compile(r"[A-Za-z_][\w$]*")


def _bind_params(sql: str, params: Sequence[Any]) -> str:
    """`sql` with its ? / $N placeholders replaced by `params` as SQL literals."""
    if isinstance(params, (str, bytes)) or not isinstance(params, (list, tuple)):
        raise TypeError(f"params must be a list or tuple, got {type(params).__name__}")
    literals = [_sql_literal(value) for value in params]
    out: List[str] = []
    positional = numbered = 0
    i = 0
    while i < len(sql):
        end, placeholder = _scan(sql, i)
        if placeholder is None:
            out.append(sql[i:end])
        else:
            if placeholder == "?":
                positional += 1
                placeholder = positional
            elif placeholder >= 1:
                numbered = max(numbered, placeholder)
            else:
                raise InvalidInputError(f"parameter $0: they count from $1 [query: {sql}]")
            if positional and numbered:
                raise InvalidInputError(f"mixed ? and $N parameters [query: {sql}]")
            out.append(literals[placeholder - 1] if placeholder <= len(literals) else "NULL")
        i = end
    expected = positional or numbered
    if expected != len(literals):
        raise InvalidInputError(
            f"the statement has {expected} parameter(s), {len(literals)} given [query: {sql}]")
    return "".join(out)


def _scan(sql: str, i: int) -> Tuple[int, Union[None, str, int]]:
    """Where the token at `i` ends, and its placeholder: None (not one), "?" or N ($N)."""
    c = sql[i]
    if c == "?":
        return i + 1, "?"
    if c in "'\"":
        return _quoted_end(sql, i + 1, c, backslash=False), None
    if sql.startswith("--", i):
        end = sql.find("\n", i)
        return (len(sql) if end < 0 else end + 1), None
    if sql.startswith("/*", i):
        end = sql.find("*/", i + 2)
        return (len(sql) if end < 0 else end + 2), None
    if c == "$":
        match = _DOLLAR.match(sql, i)
        if match is None:
            return i + 1, None
        if match["num"] is not None:
            return match.end(), int(match["num"])
        if match["name"] is not None:
            raise InvalidInputError(
                f"named parameter ${match['name']}: only ? and $N can be bound [query: {sql}]")
        end = sql.find(match.group(0), match.end())  # $tag$ ... $tag$
        return (len(sql) if end < 0 else end + len(match.group(0))), None
    word = _WORD.match(sql, i)
    if word is not None:
        if word.group(0) in ("E", "e") and sql.startswith("'", word.end()):
            return _quoted_end(sql, word.end() + 1, "'", backslash=True), None
        return word.end(), None
    return i + 1, None


def _quoted_end(sql: str, i: int, quote: str, backslash: bool) -> int:
    # A doubled quote is one quote character; E'...' strings also escape with \.
    while i < len(sql):
        if backslash and sql[i] == "\\":
            i += 2
        elif sql[i] == quote:
            if not sql.startswith(quote, i + 1):
                return i + 1
            i += 2
        else:
            i += 1
    return len(sql)


def _sql_literal(value: Any) -> str:
    """`value` as a DuckDB literal of the type DuckDB's Python client binds it as."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, numbers.Integral):
        # DuckDB's literal types (INTEGER, BIGINT, HUGEINT), except that its
        # client binds 2**63 .. 2**64-1 as UBIGINT.
        value = int(value)
        if 2**63 <= value < 2**64:
            return f"CAST({value} AS UBIGINT)"
        return f"({value})" if value < 0 else str(value)  # (-1): `x-?` must not become x--1
    if isinstance(value, numbers.Real):
        return f"CAST('{float(value)!r}' AS DOUBLE)"
    if isinstance(value, decimal.Decimal):
        return _decimal_literal(value)
    if isinstance(value, str):
        return _quote(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "CAST('" + "".join(f"\\x{b:02X}" for b in bytes(value)) + "' AS BLOB)"
    if isinstance(value, datetime.datetime):
        kind = "TIMESTAMP" if value.tzinfo is None else "TIMESTAMPTZ"
        return f"CAST({_quote(value.isoformat())} AS {kind})"
    if isinstance(value, datetime.date):
        return f"CAST({_quote(value.isoformat())} AS DATE)"
    if isinstance(value, datetime.time):
        kind = "TIME" if value.tzinfo is None else "TIMETZ"
        return f"CAST({_quote(value.isoformat())} AS {kind})"
    if isinstance(value, datetime.timedelta):
        micros = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
        return f"CAST('{micros} microseconds' AS INTERVAL)"
    raise TypeError(f"cannot bind a {type(value).__name__} as a SQL parameter")


def _decimal_literal(value: decimal.Decimal) -> str:
    if not value.is_finite():
        raise ValueError(f"cannot bind the Decimal {value} (DECIMAL has no {value})")
    _, digits, exponent = value.as_tuple()
    scale = max(0, -int(exponent))
    # DuckDB's client counts the leading zero of 0.001 (DECIMAL(4,3)) but not of 0.5.
    leading_zero = 1 if len(digits) < scale else 0
    precision = max(len(digits) + max(0, int(exponent)), scale + leading_zero, 1)
    if precision > 38:
        raise ValueError(f"cannot bind the Decimal {value}: more than 38 digits")
    return f"CAST('{value:f}' AS DECIMAL({precision},{scale}))"


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
