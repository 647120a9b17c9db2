"""RillEngine: tables, connectors, tasks and the micro-batch loop (in C++)."""

from __future__ import annotations

import atexit
import json
import logging
import os
import socket
import struct
import threading
import warnings
import weakref
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import pyarrow as pa

from . import _arrow, _core, _quack
from . import checkpoint as _checkpoint
from . import sinks as _sinks
from ._sequence import EngineList
from .application_view import ApplicationView
from .connectors.base import BaseConnector, connector_of
from .errors import DDLError
from .metrics import MetricsRegistry
from .metrics_options import MetricsStoreOptions
from .retention import RetentionPolicy
from .schema import normalize_mode
from .sinks import Sink
from .table import RillTable, _check_table_args
from .tasks import DuckDBBridge, ScheduledSQLTask, TableJoinTask

__all__ = ["RillEngine"]

_log = logging.getLogger("rills")


_warmed_up = False


def _warm_up_push_once() -> None:
    """Once per process: push a throw-away batch through a connector's import
    path (the C data interface, the buffer, a poll), so a process's first real
    push does not pay for first use: a 1K-row load's push took ~30 us on a
    fresh process's first engine against ~9 us afterwards (issue 29). The C++
    engine warms its tick (engine.cc, WarmUpProcessOnce). RILL_WARM_UP=0
    skips both."""
    global _warmed_up
    if _warmed_up:
        return
    _warmed_up = True
    if os.environ.get("RILL_WARM_UP") == "0":
        return
    # From buffers: pa.array() would import pandas (~0.4 s) on its first call.
    batch = pa.RecordBatch.from_arrays([
        pa.Array.from_buffers(pa.int64(), 3, [None, pa.py_buffer(struct.pack("<3q", 1, 2, 1))]),
        pa.Array.from_buffers(pa.string(), 3, [None, pa.py_buffer(struct.pack("<4i", 0, 1, 2, 3)),
                                               pa.py_buffer(b"abc")]),
        pa.Array.from_buffers(pa.float64(), 3, [None, pa.py_buffer(struct.pack("<3d", 0.5, 1.5, 2.5))]),
    ], names=["key", "name", "value"])
    connector = _core.MemoryConnector.make("rill_warm_up", None, 0, 0, "error", "rill_warm_up")
    connector.push(batch)
    connector.poll()


def _close_core(core: Any) -> None:
    # weakref.finalize callback: runs when the engine is collected and at exit.
    # Closed (or collected) from one of its own callbacks, the engine is destroyed
    # on the reaper thread once that tick is over (see _core.Engine.close).
    core.close()


# At exit, wait for the engines handed to the reaper while Python is still alive to
# release their callbacks (engines still open are closed at exit on the main thread,
# which never hands them over).
atexit.register(_core.wait_for_deferred_closes)


class RillEngine:
    """The streaming engine: live tables, connectors, tasks and the tick loop.

    Every `trigger_interval_ms` the loop (a C++ thread, started by start())
    drains the connectors into their tables (upsert or append), applies
    retention, runs the due SQL and join tasks, evaluates business metrics and
    checks the memory budget. step() runs one tick on the calling thread.

    The C++ engine alone holds the tables, connectors and tasks: the tables
    returned here are views over it by name, and `connectors`, `sql_tasks`,
    `join_tasks` and `sinks` are live sequences over it (append() adds to the
    engine, remove()/del remove from it). Sinks (rills.sinks, add_sink) write
    a table's changes on to Kafka, PostgreSQL or files from their own threads.

    Threads: all methods may be called from any thread, including from
    callbacks. The GIL is released while the engine works; Python callbacks
    run with the GIL and their exceptions are logged and recorded as engine
    events (see recent_events()). Engines still running at interpreter exit are
    stopped; Ctrl-C stops a script cleanly.
    """

    def __init__(
        self,
        trigger_interval_ms: float = 100.0,
        duckdb_connection: Any = None,
        memory_budget_bytes: Optional[int] = None,
        memory_budget_mb: Optional[float] = None,
        on_memory_warning: Optional[Callable[[int, int], None]] = None,
        quack_address: Optional[str] = None,
        quack_token: Optional[str] = None,
        auto_compact_chunks: int = 32,
        metrics_path: Optional[str] = "rill_metrics.db",
        metrics_flush_interval_seconds: float = 1.0,
        allow_private_webhooks: bool = False,
        metrics_options: Optional[Union[MetricsStoreOptions, Dict[str, Any]]] = None,
        checkpoint_dir: Optional[str] = None,
        checkpoint_interval_seconds: float = 60.0,
        max_records_per_tick: int = 0,
        memory_budget_policy: str = "warn",
        app_id: Optional[str] = None,
        instance_id: Optional[str] = None,
        bootstrap_servers: Optional[str] = None,
        partitions_per_table: int = 0,
        commit_interval_ms: int = 100,
        session_timeout_ms: int = 10000,
        leave_on_stop: bool = False,
        exactly_once: bool = True,
    ):
        """Args:
            trigger_interval_ms: the loop's tick interval in milliseconds (> 0).
            duckdb_connection: must be None: Rill's DuckDB runs inside the C++
                core, so an external connection cannot scan live tables
                (ValueError otherwise; read a table into your own connection
                with con.register(name, engine.get_table(name).to_arrow())).
            memory_budget_bytes: allocated bytes (Arrow pools + DuckDB) above which
                a ResourceWarning is emitted and on_memory_warning is called.
            memory_budget_mb: the same in megabytes (used if memory_budget_bytes is None).
            on_memory_warning: callback(allocated_bytes, budget_bytes).
            quack_address, quack_token: serve the engine over the network on
                start(): "quack:HOST:PORT" or "HOST:PORT" (port 0 picks a free
                port); token None generates one, "" disables authentication
                (loopback only). After start(), quack_address is the bound
                address, quack_token the token, dashboard_url the dashboard.
            auto_compact_chunks: tables with more chunks than this (and more
                than one chunk per 8192 rows) merge small chunks on write
                (0 disables).
            metrics_path: the metrics database (alerts, telemetry, KPI history),
                opened by start() or on the first use of the alerts/metrics
                API (push_alert, alert, warn, error, query_metrics,
                add_dashboard_scheduled_query); ":memory:" keeps it in memory;
                None never opens it (the alerts/metrics API then raises).
            metrics_flush_interval_seconds: how often telemetry and alerts are written.
            metrics_options: a MetricsStoreOptions (or a dict of its fields):
                retention of telemetry and alerts, alert rate-limit window,
                flush interval, queue sizes of the metrics store.
            allow_private_webhooks: let webhooks (POST /api/webhook/send and
                alert-rule webhooks) reach loopback and private addresses; off
                by default (the SSRF guard refuses them).
            checkpoint_dir, checkpoint_interval_seconds: checkpoint the tables,
                connector positions and KPI/rule definitions there every
                interval and on stop(); start() restores the newest checkpoint
                (see rills.checkpoint and docs/checkpoints.md).
            max_records_per_tick: rows a tick takes from each connector at most
                (0: everything buffered). Under overload a tick then stays
                short: the rest waits in the connector's buffer (its limits and
                on_overflow apply), and ticks run back to back, without waiting
                for the interval, until the backlog is gone.
            memory_budget_policy: what happens over the memory budget: "warn"
                (the default: a warning event, a ResourceWarning and
                on_memory_warning) or "shed" (the same, and the ticks stop
                draining the connectors until allocated memory is below 90 %
                of the budget; their buffers fill and their on_overflow policy
                applies, counted as dropped). "shed" needs a budget.
            app_id, instance_id: run this engine as instance `instance_id` of
                the scaled-out application `app_id` (docs/scale-out.md): its
                Kafka sources read as one member of the consumer group `app_id`
                (static membership by instance_id, which must be stable per
                instance; default: this host's name), partition p of every
                input topic on the same instance. See cluster_status().
            bootstrap_servers: the application's Kafka cluster (default: the
                first Kafka source's bootstrap.servers).
            partitions_per_table: partitions of the global views' partials
                topics (0: as many as its input topics); a changelog always
                has as many as its table's input.
            commit_interval_ms: how often an instance commits (ms, > 0).
            session_timeout_ms: the group's session timeout (ms, >= 1000): a
                silent instance keeps its partitions this long, and a restart
                within it causes no rebalance.
            leave_on_stop: stop() leaves the group first (leave_application()),
                handing the partitions to the other instances at once; off by
                default, so that a restart within the session timeout gets its
                partitions back without a rebalance (static membership).
            exactly_once: commit the input offsets in transactions of one
                producer per instance (transactional.id "<app_id>-<instance_id>";
                a zombie of this instance is fenced), every commit_interval_ms;
                False: the sources commit to the group themselves.
        """
        _check_duckdb_connection(duckdb_connection)
        self._metrics_options = MetricsStoreOptions.of(metrics_options)
        if self._metrics_options.flush_interval_seconds is not None:
            metrics_flush_interval_seconds = self._metrics_options.flush_interval_seconds
        if trigger_interval_ms is None or float(trigger_interval_ms) <= 0:
            raise ValueError(f"trigger_interval_ms must be > 0, got {trigger_interval_ms!r}")
        if memory_budget_bytes is None and memory_budget_mb is not None:
            if float(memory_budget_mb) < 0:
                raise ValueError(f"memory_budget_mb must be >= 0, got {memory_budget_mb}")
            memory_budget_bytes = int(float(memory_budget_mb) * 1024 * 1024)
        if memory_budget_bytes is not None and int(memory_budget_bytes) < 0:
            raise ValueError(f"memory_budget_bytes must be >= 0, got {memory_budget_bytes}")
        if on_memory_warning is not None and not callable(on_memory_warning):
            raise TypeError("on_memory_warning must be callable")
        if memory_budget_policy not in ("warn", "shed"):
            raise ValueError(
                f"memory_budget_policy must be 'warn' or 'shed', got {memory_budget_policy!r}")
        if memory_budget_policy == "shed" and not memory_budget_bytes:
            raise ValueError(
                "memory_budget_policy='shed' needs a memory budget "
                "(memory_budget_bytes or memory_budget_mb > 0)")
        self.memory_budget_policy = memory_budget_policy
        if max_records_per_tick is None or int(max_records_per_tick) < 0:
            raise ValueError(f"max_records_per_tick must be >= 0, got {max_records_per_tick!r}")
        self.max_records_per_tick = int(max_records_per_tick)
        if int(auto_compact_chunks) < 0:
            raise ValueError(f"auto_compact_chunks must be >= 0, got {auto_compact_chunks}")
        self.trigger_interval_ms = float(trigger_interval_ms)
        self.memory_budget_bytes = None if memory_budget_bytes is None else int(memory_budget_bytes)
        self.on_memory_warning = on_memory_warning
        _quack.init(self, quack_address, quack_token)
        self._allow_private_webhooks = bool(allow_private_webhooks)
        self.auto_compact_chunks = int(auto_compact_chunks)
        self.metrics_path = metrics_path
        self.metrics_flush_interval_seconds = float(metrics_flush_interval_seconds)

        self._self_ref = weakref.ref(self)
        self._core = _core.Engine(
            max(1, int(round(self.trigger_interval_ms))),
            self.memory_budget_bytes or 0,
            _memory_hook(self._self_ref),
            self.auto_compact_chunks,
            max_records_per_tick=self.max_records_per_tick,
            memory_budget_policy=self.memory_budget_policy,
        )
        self._finalizer = weakref.finalize(self, _close_core, self._core)
        _warm_up_push_once()
        self._lock = threading.RLock()
        # Python callables subscribed to tables -> the engine's subscription ids.
        self._subscriptions: Dict[Tuple[str, Any], int] = {}
        self._last_memory: Optional[Tuple[int, int]] = None
        self.metrics = MetricsRegistry(self)
        self.duckdb = DuckDBBridge(self)
        # Checkpoints (rills/checkpoint.py)
        self.checkpointer = _checkpoint.engine_checkpointer(
            self, checkpoint_dir, checkpoint_interval_seconds)
        self.app_id = app_id
        self.instance_id = None
        self.leave_on_stop = bool(leave_on_stop)
        if app_id is not None:
            if instance_id is None:
                instance_id = socket.gethostname()
            self._core.start_application(
                str(app_id), str(instance_id), bootstrap_servers or "",
                int(partitions_per_table), int(commit_interval_ms), int(session_timeout_ms),
                leave_on_stop=bool(leave_on_stop), exactly_once=bool(exactly_once))
            self.instance_id = str(instance_id)
        elif instance_id is not None or bootstrap_servers is not None:
            raise ValueError("instance_id and bootstrap_servers need app_id (the application)")

    # Scale-out -------------------------------------------------------------------

    def cluster_status(self) -> Optional[Dict[str, Any]]:
        """This instance in its application (None outside one): app_id, instance_id,
        member_id, generation (of the group, as last joined), bootstrap_servers, partitions (the (topic, partition) pairs it
        owns now), assigns, revokes, partitions_revoked, last_rebalance_at (unix
        seconds), last_rebalance_seconds, commit_interval_ms, partitions_per_table,
        exactly_once, commits, commit_aborts, last_commit_ms, max_commit_ms, fenced,
        last_commit_error (GET /api/v1/telemetry/cluster gives the same)."""
        status = json.loads(self._core.cluster_status_json())
        if status is not None:
            status["partitions"] = [(p["topic"], p["partition"]) for p in status["partitions"]]
        return status

    def leave_application(self, timeout_seconds: float = 10.0) -> None:
        """Leave the application's consumer group now: the partitions this instance
        owns are committed and handed to the other instances at once (instead of
        after the session timeout). Call while the engine runs; its Kafka sources
        read nothing afterwards. Nothing happens outside an application; OSError
        when partitions are still assigned after `timeout_seconds`."""
        self._core.leave_application(float(timeout_seconds))

    def add_application_view(self, view: ApplicationView) -> None:
        """Declare a view over every instance of this engine's application
        (rills.ApplicationView; CREATE MATERIALIZED VIEW ... WITH (scope = 'global')).
        The other instances declare it too (the application's topic of views); a
        view of that name another instance declared already is taken as it is.
        rills.DDLError when the engine is no application's instance, the query is
        not an aggregate that combines across partitions, or its table lacks the
        _partition column (a Kafka source with metadata_columns=True)."""
        if not isinstance(view, ApplicationView):
            raise TypeError(f"add_application_view() takes an ApplicationView, got "
                            f"{type(view).__name__}")
        self.execute_ddl(view.ddl().replace("CREATE MATERIALIZED VIEW",
                                            "CREATE MATERIALIZED VIEW IF NOT EXISTS", 1))
        view._engine = self

    def remove_application_view(self, view: Union[ApplicationView, str]) -> None:
        """Drop a global view (and its partials' table, sink and source), on
        every instance of the application."""
        name = view if isinstance(view, str) else view.name
        self.execute_ddl('DROP MATERIALIZED VIEW IF EXISTS "' + name.replace('"', '""') + '"')

    # Tables ----------------------------------------------------------------------

    def register_table(
        self,
        name: str,
        schema: Optional[pa.Schema] = None,
        primary_key: Optional[Union[str, List[str]]] = None,
        retention_policy: Optional[RetentionPolicy] = None,
        mode: Optional[str] = None,
    ) -> RillTable:
        """Create and register a table; return it.

        Key and mode default to the schema's metadata (see rills.schema()).
        A table registered without a schema is declared in the engine with its
        key, mode and retention, and takes the schema of the first batch
        written to it (from a connector, a task or upsert()); until then it has
        no rows, `schema` is None and SQL does not see it (a query naming it
        fails with a ValueError saying so).

        Registering a name that is already a table replaces that table, as
        the seed does: the old table, its rows and its subscribers are
        dropped first. ValueError if the name is reserved (rill_*), for an
        append table without a retention policy, or an unknown key column.
        """
        _check_table_args(name, schema, retention_policy)
        if not name.startswith("rill_") and self.get_table(name) is not None:
            self.drop_table(name)  # the seed's register_table replaces (rill_* stay reserved)
        args = dict(
            primary_key=_arrow.key_list(primary_key),
            mode=normalize_mode(mode),
            **(retention_policy._core_args() if retention_policy else {}),
        )
        if schema is not None:
            self._core.register_table(name, schema, **args)
        else:
            self._core.declare_table(name, **args)
        return RillTable._view(self, name)

    def get_table(self, name: str) -> Optional[RillTable]:
        """Return the table named `name` (registered, declared or created by the engine), or None."""
        if self._core.get_table(name) is None and self._core.table_declaration(name) is None:
            return None
        return RillTable._view(self, name)

    def get_or_create_table(
        self,
        name: str,
        schema: Optional[pa.Schema] = None,
        primary_key: Optional[Union[str, List[str]]] = None,
        retention_policy: Optional[RetentionPolicy] = None,
        mode: Optional[str] = None,
    ) -> RillTable:
        """Return the table named `name`, registering it first if needed."""
        with self._lock:
            table = self.get_table(name)
            if table is not None:
                return table
            return self.register_table(name, schema, primary_key, retention_policy, mode)

    @property
    def tables(self) -> Dict[str, RillTable]:
        """All user tables (declared ones included), by name."""
        return {name: RillTable._view(self, name) for name in self.table_names()}

    def table_names(self) -> List[str]:
        """Names of the user tables, declared ones included, sorted."""
        return sorted(set(self._core.table_names()) | set(self._core.declared_table_names()))

    def drop_table(self, name: str) -> None:
        """Remove a table (and its SQL view) from the engine. KeyError if unknown."""
        self._core.drop_table(name)
        with self._lock:
            for key in [k for k in self._subscriptions if k[0] == name]:
                del self._subscriptions[key]

    def _subscribe(self, table: str, callback: Callable[[str, pa.Table], None]) -> None:
        with self._lock:
            if (table, callback) in self._subscriptions:
                return
            self._subscriptions[(table, callback)] = self._core.subscribe(
                table, _deliverer(table, callback)
            )

    def _unsubscribe(self, table: str, callback: Callable[[str, pa.Table], None]) -> None:
        with self._lock:
            sub_id = self._subscriptions.pop((table, callback), None)
            if sub_id is not None:
                try:
                    self._core.unsubscribe(table, sub_id)
                except KeyError:
                    pass  # the table was dropped meanwhile

    # Connectors --------------------------------------------------------------------

    def add_connector(self, connector: BaseConnector) -> None:
        """Attach and start a connector. Adding the same connector twice does nothing.

        ValueError if another connector of this engine has the same name;
        TypeError if `connector` is not a BaseConnector.
        """
        if not isinstance(connector, BaseConnector):
            raise TypeError(f"add_connector() takes a BaseConnector, got {type(connector).__name__}")
        with self._lock:
            if any(c is connector for c in self.connectors):
                return
            core = connector._core_connector()
            if core is None:
                core = _core.PyConnector.make(
                    connector.name, connector.target_table, connector, self._core.reporter
                )
            try:
                self._core.add_connector(core)
            except ValueError as error:
                raise ValueError(
                    f"Connector name '{connector.name}' is already used in this engine"
                ) from error

    def remove_connector(self, connector: Union[BaseConnector, str]) -> None:
        """Stop and detach a connector (or the connector of that name); what it buffered is written first.

        Unknown connectors are ignored.
        """
        name = connector if isinstance(connector, str) else connector.name
        try:
            self._core.remove_connector(name)
        except KeyError:
            pass

    @property
    def connectors(self) -> EngineList[BaseConnector]:
        """The attached connectors, ordered by name: a live sequence over the engine.

        `engine.connectors.append(c)` is add_connector(c); remove()/del detach.
        """
        return EngineList(
            "connectors",
            lambda: [connector_of(core) for core in self._core.connectors()],
            self.add_connector,
            self.remove_connector,
        )

    # Sinks -------------------------------------------------------------------------

    def add_sink(self, sink: Sink) -> None:
        """Start a sink (rills.sinks: KafkaSink, PostgresSink, FileSink, PythonSink).

        The sink reads its table's changes on its own thread from now on,
        running or not running loop alike. Adding the same sink again does
        nothing. ValueError for a duplicate name, a table the engine does not
        have, a mode the table cannot have (upsert needs a primary key), or a
        sink already running in another engine; TypeError for anything but a
        rills.sinks sink. See docs/sinks.md.
        """
        if isinstance(sink, Sink) and self.get_table(sink.table) is None:
            raise ValueError(f"{type(sink).__name__} '{sink.name}': table '{sink.table}' does not "
                             "exist in this engine (register it first)")
        with self._lock:
            _sinks.add_sink(self._core, sink)

    def remove_sink(self, sink: Union[Sink, str]) -> None:
        """Stop a sink (or the sink of that name) after a final flush, and forget it.

        KeyError if the engine has no such sink. Its stats() stay readable.
        """
        with self._lock:
            _sinks.remove_sink(self._core, sink)

    @property
    def sinks(self) -> EngineList[Sink]:
        """The running sinks, in the order they were added: a live sequence over the engine.

        `engine.sinks.append(s)` is add_sink(s); remove()/del stop the sink.
        """
        return EngineList(
            "sinks",
            lambda: _sinks.engine_sinks(self._core),
            self.add_sink,
            self.remove_sink,
        )

    # Tasks ---------------------------------------------------------------------------

    def add_sql_task(self, task: ScheduledSQLTask) -> None:
        """Schedule a SQL task. Adding an equal task again does nothing.

        ValueError if another task of that name exists, or for a task with
        incremental=True whose query cannot be maintained incrementally (the
        message names the part of the query that cannot, e.g. ORDER BY).
        """
        if not isinstance(task, ScheduledSQLTask):
            raise TypeError(f"add_sql_task() takes a ScheduledSQLTask, got {type(task).__name__}")
        with self._lock:
            if task in self.sql_tasks:
                return
            self._core.add_sql_task(
                task.name, task.query, task.output_table, task.interval_seconds,
                _arrow.key_list(task.primary_key),
                use_prepared_statements=task.use_prepared_statements,
                incremental=task._core_incremental(),
            )
            task._attach(self)

    def remove_sql_task(self, task: Union[ScheduledSQLTask, str]) -> None:
        """Unschedule a SQL task (or the task of that name); unknown tasks are ignored."""
        name = task if isinstance(task, str) else task.name
        try:
            self._core.remove_sql_task(name)
        except KeyError:
            pass

    def add_join_task(self, task: TableJoinTask) -> None:
        """Schedule a join task. Adding an equal task again does nothing.

        ValueError for an unknown join type or aggregate function, or if
        another task of that name exists.
        """
        if not isinstance(task, TableJoinTask):
            raise TypeError(f"add_join_task() takes a TableJoinTask, got {type(task).__name__}")
        with self._lock:
            if task in self.join_tasks:
                return
            self._core.add_join_task(**task._core_args())
            task._attach(self)

    def remove_join_task(self, task: Union[TableJoinTask, str]) -> None:
        """Unschedule a join task (or the task of that name); unknown tasks are ignored."""
        name = task if isinstance(task, str) else task.name
        try:
            self._core.remove_join_task(name)
        except KeyError:
            pass

    def add_window_task(self, task: Any) -> None:
        """Add an event-time window task (rills.window_task.WindowTask)."""
        from .window_task import attach_window_task

        attach_window_task(self, task)

    def remove_window_task(self, task: Any) -> None:
        """Remove a window task (or the task of that name); unknown tasks are ignored."""
        from .window_task import detach_window_task

        detach_window_task(self, task)

    @property
    def sql_tasks(self) -> EngineList[ScheduledSQLTask]:
        """The scheduled SQL tasks, ordered by name: a live sequence over the engine.

        Items are read from the engine (equal, not identical, to the tasks
        added). `engine.sql_tasks.append(t)` is add_sql_task(t); remove()/del
        unschedule.
        """
        return EngineList(
            "SQL tasks",
            lambda: [ScheduledSQLTask._from_core(d)._attach(self) for d in self._core.sql_tasks()],
            self.add_sql_task,
            self.remove_sql_task,
        )

    @property
    def join_tasks(self) -> EngineList[TableJoinTask]:
        """The scheduled join tasks, ordered by name: a live sequence over the engine.

        `engine.join_tasks.append(t)` is add_join_task(t); remove()/del unschedule.
        """
        return EngineList(
            "join tasks",
            lambda: [TableJoinTask._from_core(d)._attach(self) for d in self._core.join_tasks()],
            self.add_join_task,
            self.remove_join_task,
        )

    # Observers -------------------------------------------------------------------------

    def subscribe(self, table_name: str, callback: Callable[[str, pa.Table], None]) -> None:
        """Call `callback(table_name, table)` with every new state of the table (created if needed)."""
        self.get_or_create_table(table_name).subscribe(callback)

    def register_business_metric(self, name: str, evaluator: Callable[["RillEngine"], Any]) -> None:
        """Evaluate `evaluator(engine)` on every tick; see MetricsRegistry."""
        self.metrics.register_metric(name, evaluator)

    def recent_events(self) -> List[Dict[str, Any]]:
        """The latest engine events (errors, warnings), oldest first, as dicts
        with ts, severity, source, component, message, detail."""
        return self._core.recent_events()

    # SQL ---------------------------------------------------------------------------------

    def query_sql(self, sql: str) -> pa.Table:
        """Run DuckDB SQL over the live tables and return the result.

        Tables are scanned without copying, each at one consistent version.
        When DuckDB refuses the query: rills.SQLError (a ValueError) with
        DuckDB's message, whose `error_type` names DuckDB's error class, as
        a subclass for the common ones (CatalogError for an unknown table,
        ParserError, BinderError, ...; see rills.errors).
        """
        if not isinstance(sql, str):
            raise TypeError(f"sql must be a str, got {type(sql).__name__}")
        return _arrow.table_from_stream(self._core.query(sql))

    def execute_ddl(self, sql: str) -> Union[pa.Table, str]:
        """Run pipeline DDL, as psql runs it against `rill serve` (docs/sql.md).

        CREATE TABLE / SOURCE / MATERIALIZED VIEW / STREAM VIEW / WINDOW /
        SINK / KPI / ALERT RULE, DROP ... [IF EXISTS] [CASCADE] and SHOW
        TABLES / SOURCES / VIEWS / SINKS / WINDOWS / KPIS / ALERT RULES; several
        statements may be separated by `;`. Returns the last statement's result:
        SHOW gives a pa.Table (name, kind, options, status, counters), CREATE
        and DROP their command tag ("CREATE TABLE"). A refused statement raises
        rills.DDLError (a ValueError) with its PostgreSQL `sqlstate`; the
        statements before it stay applied.
        """
        if not isinstance(sql, str):
            raise TypeError(f"sql must be a str, got {type(sql).__name__}")
        if self.metrics_path is not None:
            self._metrics_store()  # KPIs and alert rules live there
        results = self._core.execute_ddl(sql)
        if not results:
            raise DDLError("no statement in the text", "42601")
        last = results[-1]
        if "error" in last:
            raise DDLError(last["error"], last["sqlstate"])
        for r in results:
            if r["notice"]:
                _log.info("%s", r["notice"])
        if "rows" in last:
            return _arrow.table_from_stream(last["rows"])
        return last["command"]

    # Metrics and memory ------------------------------------------------------------------

    def _system_metrics(self) -> Dict[str, Any]:
        m = self._core.metrics()
        counts = {}
        for name in self.table_names():
            table = self.get_table(name)
            counts[name] = table.num_rows if table is not None else 0
        return {
            "total_records_processed": m["total_records_processed"],
            "last_batch_records": m["last_batch_records"],
            "last_batch_latency_ms": m["last_batch_latency_s"] * 1000.0,
            "avg_batch_latency_ms": m["avg_batch_latency_s"] * 1000.0,
            "max_batch_latency_ms": m["max_batch_latency_s"] * 1000.0,
            "records_per_second": m["records_per_second"],
            "ticks": m["ticks"],
            "rejected_batches": m["rejected_batches"],
            "rejected_records": m["rejected_records"],
            "errors": m["errors"],
            "memory_warnings": m["memory_warnings"],
            "checkpoint_failures": m["checkpoint_failures"],
            "shedding": m["shedding"],
            "arrow_allocated_bytes": m["arrow_allocated_bytes"],
            "duckdb_memory_bytes": m["duckdb_memory_bytes"],
            "table_row_counts": counts,
            "connectors": self._core.connector_stats(),
            "tasks": self._core.task_stats(),
            "sinks": _sinks.sink_stats(self._core),
            "timestamp": m["timestamp"],
        }

    def get_metrics(self) -> Dict[str, Any]:
        """Return the engine's counters and business metrics.

        Keys: total_records_processed, last_batch_records, last_batch_latency_ms,
        avg_batch_latency_ms, max_batch_latency_ms, records_per_second, ticks,
        rejected_batches, rejected_records, errors, memory_warnings,
        checkpoint_failures, shedding (True while memory_budget_policy="shed"
        holds input back), arrow_allocated_bytes, duckdb_memory_bytes, table_row_counts,
        connectors, tasks ({name: {runs, errors, last_duration_s, total_duration_s,
        last_run_at, last_error, maintenance, state_bytes, changes_read, rows_upserted,
        rows_deleted}}: a SQL task's maintenance is "incremental" or "recompute (<why>)",
        "" before its first run), sinks ({name: sink stats}), timestamp, business_metrics. The same figures (and
        host CPU and memory) are in the live table rill_metrics, whose columns
        are described in src/rill/engine/README.md.
        """
        return self.metrics.get_all_metrics(self)

    def check_memory_budget(self) -> Tuple[int, Optional[int], bool]:
        """Check allocated memory against the budget now.

        Returns (allocated_bytes, budget_bytes, exceeded). When exceeded, emits
        a ResourceWarning and calls on_memory_warning.
        """
        self._last_memory = None
        within = self._core.check_memory_budget()
        if self._last_memory is not None:
            allocated = self._last_memory[0]
        else:
            allocated = self._core.allocated_bytes()
        exceeded = self.memory_budget_bytes is not None and self.memory_budget_bytes > 0 and not within
        return allocated, self.memory_budget_bytes, exceeded

    def _memory_warning(self, allocated: int, budget: int) -> None:
        self._last_memory = (allocated, budget)
        warnings.warn(
            f"RillEngine memory budget exceeded! Allocated: {allocated} bytes "
            f"({allocated / 1048576:.2f} MB) > Budget: {budget} bytes ({budget / 1048576:.2f} MB)",
            ResourceWarning,
            stacklevel=2,
        )
        if self.on_memory_warning is not None:
            self.on_memory_warning(allocated, budget)

    def compact_all(self, max_chunks: Optional[int] = None) -> None:
        """Compact every table that has more than `max_chunks` chunks (default auto_compact_chunks)."""
        threshold = self.auto_compact_chunks if max_chunks is None else int(max_chunks)
        for table in self.tables.values():
            table.compact(max_chunks=threshold)

    # Alerts and the metrics database -----------------------------------------------------------

    def _metrics_store(self) -> Any:
        if self.metrics_path is None:
            raise RuntimeError("this engine was made with metrics_path=None: no metrics database")
        with self._lock:
            if not self._core.metrics_open:
                self._core.open_metrics(self.metrics_path, self.metrics_flush_interval_seconds,
                                        self._metrics_options._core_options())
        return self._core

    def push_alert(self, message: str, severity: str = "warning", detail: str = "") -> None:
        """Record an alert (source "user") in the rill_alerts table of the metrics database.

        `severity` is "info", "warning" (alias "warn") or "error"; ValueError otherwise.
        """
        self._metrics_store().push_alert(str(message), str(severity), "" if detail is None else str(detail))

    def alert(self, message: str, detail: str = "") -> None:
        """Record an info alert."""
        self.push_alert(message, "info", detail)

    def warn(self, message: str, detail: str = "") -> None:
        """Record a warning alert."""
        self.push_alert(message, "warning", detail)

    def error(self, message: str, detail: str = "") -> None:
        """Record an error alert (e.g. detail=traceback.format_exc())."""
        self.push_alert(message, "error", detail)

    def query_metrics(self, sql: str) -> pa.Table:
        """Run read-only SQL on the metrics database (rill_alerts, telemetry, KPI history).

        Pending telemetry and alerts are written first, so the result includes
        alerts pushed just before. ValueError for failing or writing statements.
        """
        core = self._metrics_store()
        core.flush_metrics()
        return _arrow.table_from_stream(core.query_metrics(sql))

    def add_dashboard_scheduled_query(
        self,
        name: str,
        sql: str,
        interval_seconds: float = 1.0,
        chart_type: str = "line",
        x_col: str = "ts",
        y_col: str = "",
    ) -> None:
        """Run `sql` over the live tables every `interval_seconds` as a dashboard KPI.

        Results go to the metrics database (KPI history) and to the dashboard;
        `chart_type` is "line", "bar" or "scatter", `y_col` the KPI value column
        (default: the first numeric one). Replaces a query of the same name.
        """
        self._metrics_store().add_kpi_query(name, sql, float(interval_seconds), chart_type, x_col, y_col or "")

    def remove_dashboard_scheduled_query(self, name: str) -> None:
        """Remove a KPI query added with add_dashboard_scheduled_query (KeyError if unknown)."""
        self._metrics_store().remove_kpi_query(name)

    def latest_kpis(self) -> Dict[str, Dict[str, Any]]:
        """Return the latest value of each KPI query, by name (for KPI cards)."""
        return dict(self._metrics_store().latest_kpis())

    def add_alert_rule(
        self,
        name: str,
        metric: str,
        op: str,
        threshold: float,
        cooldown_seconds: float = 60.0,
        severity: str = "warning",
        webhook: Optional[str] = None,
        message: Optional[str] = None,
        enabled: bool = True,
    ) -> None:
        """Add (or replace) a server-side alert rule, evaluated every metrics flush.

        `message` is the text of the alerts it fires (default
        "<metric> <op> <threshold> (value <v>)"); a rule added with
        enabled=False is stored but not evaluated.

        `metric` names a KPI query, a business metric or a system metric (a
        rill_telemetry column such as "cpu_usage", or "table.<name>.rows"; the
        columns are listed in src/rill/metrics/README.md).
        `op` is one of > >= < <= == !=. When it fires, a "rule" alert with the
        observed value and threshold is written to rill_alerts; it does not fire
        again within `cooldown_seconds`. `webhook` is stored with the rule
        (delivery comes with the network server). ValueError for bad arguments.
        """
        _core.add_alert_rule(
            self._metrics_store(), str(name), str(metric), str(op), float(threshold),
            float(cooldown_seconds), str(severity), None if webhook is None else str(webhook),
            None if message is None else str(message), bool(enabled))

    def remove_alert_rule(self, name: str) -> None:
        """Remove an alert rule (KeyError if unknown)."""
        self._metrics_store().remove_alert_rule(name)

    # Loop ------------------------------------------------------------------------------------

    def step(self) -> float:
        """Run one tick now on the calling thread; return its latency in milliseconds."""
        return self._core.step() * 1000.0

    @property
    def queue_manager(self):
        """The QueueManager of this engine's queues: the ones its server serves at
        /api/v1/queues (a queue created on either side is seen by both)."""
        from .queue.queue_manager import QueueManager
        if getattr(self, "_queue_manager", None) is None:
            self._queue_manager = QueueManager(_toolkit=_quack.toolkit(self))
        return self._queue_manager

    def start(self, quack_port: Optional[int] = None, quack_token: Optional[str] = None) -> None:
        """Start the background loop (no-op if running) and the network server when
        a quack address, port or token was given (host from quack_address, else
        127.0.0.1)."""
        _quack.on_start(self, quack_port, quack_token)
        # A running engine always records telemetry and engine alerts.
        if self.metrics_path is not None:
            self._metrics_store()
        _quack.start_server(self)  # first: a taken address fails before the loop runs
        _checkpoint.on_start(self)  # restore before the first tick
        self._core.start()

    def stop(self, timeout: float = 2.0) -> None:
        """Stop the loop after the current tick. Safe from callbacks and when not running.

        `timeout` is accepted for compatibility; stop() returns once the
        current tick has finished.
        """
        _quack.stop_server(self)
        if self.leave_on_stop and self.app_id is not None and self.running:
            try:
                self.leave_application()
            except OSError as error:
                _log.warning("leaving application %s: %s", self.app_id, error)
        self._core.stop()
        _checkpoint.on_stop(self)  # a final checkpoint after the last tick

    def restore_checkpoints(self) -> List[str]:
        """Restore the newest checkpoint of checkpoint_dir; return the restored table names.

        start() does this itself. ValueError without checkpoint_dir.
        """
        if self.checkpointer is None:
            raise ValueError("this engine was made without checkpoint_dir")
        return self.checkpointer.restore_snapshots(self)

    @property
    def running(self) -> bool:
        """True while the background loop runs."""
        return (not self._core.closed) and self._core.running

    def close(self) -> None:
        """Stop the loop as stop() does (with checkpoint_dir: a final checkpoint after
        the last tick), then free the engine. Further calls raise RuntimeError.
        """
        if not self._core.closed:
            # Without this the checkpointer was only destroyed (no final checkpoint,
            # no log line), so rows published since the last periodic checkpoint
            # were gone after a restart (issue 23).
            self.stop()
        self._finalizer()

    def __enter__(self) -> "RillEngine":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def __repr__(self) -> str:
        return (
            f"<RillEngine(trigger_interval_ms={self.trigger_interval_ms}, "
            f"running={self.running}, tables={self.table_names()})>"
        )


def _deliverer(name: str, callback: Callable[[str, pa.Table], None]) -> Callable[[Any], None]:
    # Holds the table's name, not the table or engine: no reference cycle through C++.
    def deliver(capsule: Any) -> None:
        callback(name, _arrow.table_from_stream(capsule))

    return deliver


def _memory_hook(engine_ref: "weakref.ReferenceType[RillEngine]") -> Callable[[int, int], None]:
    def hook(allocated: int, budget: int) -> None:
        engine = engine_ref()
        if engine is not None:
            engine._memory_warning(allocated, budget)

    return hook


def _check_duckdb_connection(connection: Any) -> None:
    # The seed's RillEngine(duckdb_connection=...): not possible with DuckDB in C++.
    if connection is not None:
        raise ValueError(
            "RillEngine(duckdb_connection=...) is not supported: Rill's DuckDB runs inside the "
            "engine's C++ core, where it scans the live tables without copying; an external "
            "DuckDB connection cannot see them. Query live tables with engine.query_sql(), or "
            "register a table's rows in your own connection with "
            "con.register(name, engine.get_table(name).to_arrow())"
        )
