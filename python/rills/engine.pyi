"""RillEngine: tables, connectors, tasks and the micro-batch loop."""

from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import pyarrow as pa

from ._sequence import EngineList
from .application_view import ApplicationView
from .connectors import BaseConnector
from .metrics import MetricsRegistry
from .metrics_options import MetricsStoreOptions
from .retention import RetentionPolicy
from .sinks import Sink
from .table import RillTable
from .tasks import DuckDBBridge, ScheduledSQLTask, TableJoinTask

class RillEngine:
    """The streaming engine; the tick loop runs in C++ without the GIL."""

    trigger_interval_ms: float
    memory_budget_bytes: Optional[int]
    memory_budget_policy: str
    on_memory_warning: Optional[Callable[[int, int], None]]
    quack_address: Optional[str]
    quack_token: Optional[str]
    dashboard_url: Optional[str]
    auto_compact_chunks: int
    metrics: MetricsRegistry
    duckdb: DuckDBBridge
    def __init__(
        self,
        trigger_interval_ms: float = 100.0,
        duckdb_connection: None = None,
        memory_budget_bytes: Optional[int] = None,
        memory_budget_mb: Optional[float] = None,
        on_memory_warning: Optional[Callable[[int, int], None]] = None,
        quack_address: Optional[str] = None,
        quack_token: Optional[str] = None,
        auto_compact_chunks: int = 32,
        metrics_path: str = "rill_metrics.db",
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
    ) -> None:
        """Create an engine (the loop starts with start())."""
    app_id: Optional[str]
    instance_id: Optional[str]
    def cluster_status(self) -> Optional[Dict[str, Any]]:
        """This instance in its application (None outside one)."""
    def leave_application(self, timeout_seconds: float = 10.0) -> None:
        """Leave the application's consumer group now (partitions handed over)."""
    def add_application_view(self, view: ApplicationView) -> None:
        """Declare a view over every instance of the application."""
    def remove_application_view(self, view: Union[ApplicationView, str]) -> None:
        """Drop a global view."""
    def register_table(
        self,
        name: str,
        schema: Optional[pa.Schema] = None,
        primary_key: Optional[Union[str, List[str]]] = None,
        retention_policy: Optional[RetentionPolicy] = None,
        mode: Optional[str] = None,
    ) -> RillTable:
        """Create and register a table."""
    def get_table(self, name: str) -> Optional[RillTable]:
        """The table named name, or None."""
    def get_or_create_table(
        self,
        name: str,
        schema: Optional[pa.Schema] = None,
        primary_key: Optional[Union[str, List[str]]] = None,
        retention_policy: Optional[RetentionPolicy] = None,
        mode: Optional[str] = None,
    ) -> RillTable:
        """The table named name, registered first if needed."""
    @property
    def tables(self) -> Dict[str, RillTable]:
        """All user tables by name."""
    def drop_table(self, name: str) -> None:
        """Remove a table (and its SQL view); KeyError if unknown."""
    def table_names(self) -> List[str]:
        """Names of the user tables."""
    def add_connector(self, connector: BaseConnector) -> None:
        """Attach and start a connector."""
    def remove_connector(self, connector: Union[BaseConnector, str]) -> None:
        """Stop and detach a connector."""
    @property
    def connectors(self) -> EngineList[BaseConnector]:
        """The attached connectors, by name: a live sequence (append() adds, remove()/del detach)."""
    def add_sink(self, sink: Sink) -> None:
        """Start a sink (rills.sinks) reading its table's changes."""
    def remove_sink(self, sink: Union[Sink, str]) -> None:
        """Stop a sink after a final flush; KeyError if unknown."""
    @property
    def sinks(self) -> EngineList[Sink]:
        """The running sinks, in the order added: a live sequence (append() adds, remove()/del stop)."""
    def add_sql_task(self, task: ScheduledSQLTask) -> None:
        """Schedule a SQL task."""
    def remove_sql_task(self, task: Union[ScheduledSQLTask, str]) -> None:
        """Unschedule a SQL task."""
    def add_join_task(self, task: TableJoinTask) -> None:
        """Schedule a join task."""
    def remove_join_task(self, task: Union[TableJoinTask, str]) -> None:
        """Unschedule a join task."""
    def add_window_task(self, task: Any) -> None:
        """Add an event-time window task (rills.WindowTask)."""
    def remove_window_task(self, task: Any) -> None:
        """Remove a window task (or the task of that name)."""
    @property
    def sql_tasks(self) -> EngineList[ScheduledSQLTask]:
        """Scheduled SQL tasks."""
    @property
    def join_tasks(self) -> EngineList[TableJoinTask]:
        """Scheduled join tasks."""
    def subscribe(self, table_name: str, callback: Callable[[str, pa.Table], None]) -> None:
        """Call callback(table_name, table) on every change of the table."""
    def register_business_metric(self, name: str, evaluator: Callable[["RillEngine"], Any]) -> None:
        """Evaluate evaluator(engine) on every tick."""
    def recent_events(self) -> List[Dict[str, Any]]:
        """The latest engine events (errors and warnings)."""
    def query_sql(self, sql: str) -> pa.Table:
        """Run DuckDB SQL over the live tables."""
    def execute_ddl(self, sql: str) -> Union[pa.Table, str]:
        """Run pipeline DDL (CREATE / DROP / SHOW): SHOW's table or the command tag."""
    def get_metrics(self) -> Dict[str, Any]:
        """Engine counters and business metrics."""
    def check_memory_budget(self) -> Tuple[int, Optional[int], bool]:
        """(allocated, budget, exceeded); warns and calls on_memory_warning when exceeded."""
    def compact_all(self, max_chunks: Optional[int] = None) -> None:
        """Compact every table with more than max_chunks chunks."""
    def push_alert(self, message: str, severity: str = "warning", detail: str = "") -> None:
        """Record a user alert in rill_alerts."""
    def alert(self, message: str, detail: str = "") -> None:
        """Record an info alert."""
    def warn(self, message: str, detail: str = "") -> None:
        """Record a warning alert."""
    def error(self, message: str, detail: str = "") -> None:
        """Record an error alert."""
    def query_metrics(self, sql: str) -> pa.Table:
        """Read-only SQL on the metrics database."""
    def add_dashboard_scheduled_query(
        self,
        name: str,
        sql: str,
        interval_seconds: float = 1.0,
        chart_type: str = "line",
        x_col: str = "ts",
        y_col: str = "",
    ) -> None:
        """Add a KPI query for the dashboard."""
    def remove_dashboard_scheduled_query(self, name: str) -> None:
        """Remove a KPI query (KeyError if unknown)."""
    def latest_kpis(self) -> Dict[str, Dict[str, Any]]:
        """Return the latest value of each KPI query, by name."""
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
        """Add (or replace) a server-side alert rule, evaluated every metrics flush."""
    def remove_alert_rule(self, name: str) -> None:
        """Remove an alert rule (KeyError if unknown)."""
    def step(self) -> float:
        """Run one tick now; return its latency in milliseconds."""
    @property
    def queue_manager(self) -> Any: ...
    def start(self, quack_port: Optional[int] = None, quack_token: Optional[str] = None) -> None:
        """Start the background loop."""
    def stop(self, timeout: float = 2.0) -> None:
        """Stop the loop after the current tick."""
    @property
    def running(self) -> bool:
        """True while the loop runs."""
    def close(self) -> None:
        """Stop the loop and free the engine."""
    def __enter__(self) -> "RillEngine": ...
    def __exit__(self, *exc: Any) -> None: ...
