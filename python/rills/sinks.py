"""Sinks: a table's changes written on to Kafka, PostgreSQL, files or Python.

    from rills.sinks import FileSink, KafkaSink, PostgresSink

    engine.add_sink(FileSink("orders_files", "orders", "out/orders", format="parquet",
                             partition_by=["region"]))
    engine.add_sink(KafkaSink("orders_topic", "orders", "orders-out",
                              {"bootstrap.servers": "127.0.0.1:9092"}, mode="upsert"))
    engine.add_sink(PostgresSink("orders_pg", "orders", "postgresql://...", "public.orders",
                                 create_table=True))
    engine.sinks                     # a live sequence over the engine's sinks
    engine.sinks[0].stats()          # rows_written, batches, bytes, errors, lag_versions, ...

Each sink reads its table's change feed on its own C++ thread (it never
blocks the tick), batches by `interval_seconds` / `max_batch_rows`, applies
`mode` and retries or drops per `on_error`. A sink object only holds options
until engine.add_sink() starts it; the engine owns the running sink
(rill::SinkSet), the object is a handle on it. docs/sinks.md has the modes,
the counters and the exactly-once guarantees.

Common keyword options (every sink):
    mode: "changelog" (every change as a row with `_op` and `_version`),
        "upsert" (the current value per key; deletes as deletes; keyed tables)
        or "append" (appended rows only).
    interval_seconds: write at least this often when there are changes (> 0).
    max_batch_rows: write as soon as this many change rows wait, never more
        in one write (0: no row bound).
    on_error: "retry" (backoff, a bounded backlog, then backpressure on the
        table's connectors) or "drop" (the batch is dropped, counted, alerted).
    retry_initial_seconds, retry_max_seconds: first and longest wait between retries.
    max_backlog_rows: change rows held while the target fails (on_error="retry").
    emit_retention_deletes: also write rows removed by retention, as deletes.
"""

from __future__ import annotations

import os
import weakref
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

from . import _arrow, _core

__all__ = ["Sink", "KafkaSink", "PostgresSink", "FileSink", "PythonSink", "SINK_MODES",
           "SINK_ERROR_POLICIES"]

SINK_MODES = ("changelog", "upsert", "append")
SINK_ERROR_POLICIES = ("retry", "drop")

# Python sinks by the address of their running C++ sink (like connectors'
# wrappers): engine.sinks returns the object that was added while it lives.
_wrappers: "weakref.WeakValueDictionary[int, Sink]" = weakref.WeakValueDictionary()


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class Sink:
    """Base of the sinks: the options every sink has, stats() and flush().

    Subclasses: KafkaSink, PostgresSink, FileSink, PythonSink. Construction
    checks every option and raises TypeError / ValueError naming it.
    """

    type: str = ""

    def __init__(
        self,
        name: str,
        table: str,
        *,
        mode: str = "changelog",
        interval_seconds: float = 1.0,
        max_batch_rows: int = 100000,
        on_error: str = "retry",
        retry_initial_seconds: float = 0.1,
        retry_max_seconds: float = 10.0,
        max_backlog_rows: int = 1000000,
        emit_retention_deletes: bool = False,
    ):
        self.name = self._text("name", name)
        self.table = self._text("table", table)
        self.mode = self._choice("mode", mode, SINK_MODES)
        self.interval_seconds = self._positive("interval_seconds", interval_seconds)
        self.max_batch_rows = self._count("max_batch_rows", max_batch_rows)
        self.on_error = self._choice("on_error", on_error, SINK_ERROR_POLICIES)
        self.retry_initial_seconds = self._positive("retry_initial_seconds", retry_initial_seconds)
        self.retry_max_seconds = self._positive("retry_max_seconds", retry_max_seconds)
        if self.retry_max_seconds < self.retry_initial_seconds:
            raise ValueError(
                f"{self._kind()}: retry_max_seconds ({retry_max_seconds}) must not be below "
                f"retry_initial_seconds ({retry_initial_seconds})")
        self.max_backlog_rows = self._count("max_backlog_rows", max_backlog_rows)
        self.emit_retention_deletes = self._flag("emit_retention_deletes", emit_retention_deletes)
        self._core: Any = None  # the running rills._core.Sink once added
        self._engine_core: Any = None  # the _core.Engine it runs in

    # Option checks (errors name the option) ------------------------------------------------

    def _kind(self) -> str:
        return type(self).__name__

    def _text(self, option: str, value: Any) -> str:
        if not isinstance(value, str):
            raise TypeError(f"{self._kind()}: {option} must be a str, got {type(value).__name__}")
        if not value:
            raise ValueError(f"{self._kind()}: {option} must not be empty")
        return value

    def _choice(self, option: str, value: Any, allowed: Sequence[str]) -> str:
        if not isinstance(value, str) or value not in allowed:
            names = ", ".join(repr(a) for a in allowed)
            raise ValueError(f"{self._kind()}: {option} must be one of {names}, got {value!r}")
        return value

    def _positive(self, option: str, value: Any) -> float:
        if not _is_number(value):
            raise TypeError(f"{self._kind()}: {option} must be a number, got {value!r}")
        if not float(value) > 0:
            raise ValueError(f"{self._kind()}: {option} must be > 0, got {value!r}")
        return float(value)

    def _count(self, option: str, value: Any) -> int:
        if not _is_int(value):
            raise TypeError(f"{self._kind()}: {option} must be an int, got {value!r}")
        if value < 0:
            raise ValueError(f"{self._kind()}: {option} must be >= 0, got {value!r}")
        return int(value)

    def _flag(self, option: str, value: Any) -> bool:
        if not isinstance(value, bool):
            raise TypeError(f"{self._kind()}: {option} must be True or False, got {value!r}")
        return value

    def _names(self, option: str, value: Any) -> List[str]:
        if value is None:
            return []
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, (list, tuple)) or not all(
                isinstance(v, str) and v for v in value):
            raise TypeError(f"{self._kind()}: {option} must be a column name or a list of "
                            f"column names, got {value!r}")
        if len(set(value)) != len(value):
            raise ValueError(f"{self._kind()}: {option} names a column twice: {list(value)!r}")
        return list(value)

    # Running ---------------------------------------------------------------------------------

    def _common_options(self) -> Dict[str, Any]:
        return {
            "name": self.name,
            "table": self.table,
            "mode": self.mode,
            "interval_seconds": self.interval_seconds,
            "max_batch_rows": self.max_batch_rows,
            "on_error": self.on_error,
            "retry_initial_seconds": self.retry_initial_seconds,
            "retry_max_seconds": self.retry_max_seconds,
            "max_backlog_rows": self.max_backlog_rows,
            "emit_retention_deletes": self.emit_retention_deletes,
        }

    def _start(self, engine_core: Any) -> Any:
        """Add this sink to `engine_core` (a _core.Engine); return the _core.Sink."""
        raise NotImplementedError

    @property
    def added(self) -> bool:
        """True while the sink runs in an engine (engine.add_sink, until remove_sink)."""
        return self._core is not None and self._engine_core is not None and \
            not self._engine_core.closed

    def _running(self) -> Any:
        if self._core is None:
            raise RuntimeError(f"sink '{self.name}' is not added to an engine (engine.add_sink)")
        if self._engine_core is not None and self._engine_core.closed:
            raise RuntimeError(f"sink '{self.name}': its engine is closed")
        return self._core

    def stats(self) -> Dict[str, Any]:
        """Return the sink's counters: rows_written, batches, bytes, errors, retries,
        dropped_rows, snapshots, committed_version, lag_versions, lag_seconds,
        backpressure, last_error. RuntimeError before engine.add_sink().

        After engine.remove_sink() they stay readable (frozen at the removal).
        """
        if self._core is None:
            raise RuntimeError(f"sink '{self.name}' is not added to an engine (engine.add_sink)")
        if self._engine_core is not None and self._engine_core.closed:
            raise RuntimeError(f"sink '{self.name}': its engine is closed")
        return self._core.stats()

    def flush(self, timeout: float = 10.0) -> None:
        """Write and commit everything the table published so far (with a
        checkpoint_dir: up to the newest complete checkpoint); return when done.

        TimeoutError (an OSError) when `timeout` seconds pass first, with the
        last error of the target if it kept failing; RuntimeError when the
        sink is not running (not added, removed, or its engine closed).
        """
        if not _is_number(timeout) or timeout <= 0:
            raise ValueError(f"timeout must be a number > 0, got {timeout!r}")
        self._running().flush(float(timeout))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sink):
            return NotImplemented
        if self is other:
            return True
        return self._core is not None and other._core is not None and \
            self._core.address == other._core.address

    def __hash__(self) -> int:
        return hash((self.type, self.name))

    def __repr__(self) -> str:
        state = "running" if self.added else "not added"
        return f"<{self._kind()} {self.name!r} of table {self.table!r}, mode={self.mode}, {state}>"


class KafkaSink(Sink):
    """A table's changes as Kafka messages (librdkafka producer).

    The message key is the table's primary key (or `key_columns`) as a JSON
    object, or the one key column's value as text with key_format="string";
    the value is the row as JSON (format="json") or Avro (format="avro"). In
    mode="upsert" a delete is a tombstone (null value), so a compacted topic
    holds the table. exactly_once=True uses a transactional producer
    (transactional.id: `transactional_id`, below) and,
    with a checkpoint_dir, commits once per checkpoint: a read_committed
    consumer sees every change exactly once (docs/sinks.md).

    kafka_config: librdkafka properties; must set "bootstrap.servers". Values
    are passed as text (True/False as "true"/"false").
    transactional_id: the producer's transactional.id (exactly_once) and the
    name its progress group is derived from; default "rill-<name>" (unless
    kafka_config sets "transactional.id"). Keep it stable across restarts and
    unique among the engines writing to one cluster: a second producer with
    the same id fences the first.
    format="avro": values in the Confluent wire format (magic byte 0, 4-byte
    schema id, Avro binary); the Avro schema of the written columns (each
    field a union [null, T]) is registered with the Confluent-compatible
    registry at `schema_registry_url` under the subject "<topic>-value", and
    the id it returns is written in every value (docs/avro.md).
    schema_registry_url / schema_registry_user / schema_registry_password:
    the registry and its HTTP basic auth (userinfo in the URL works too).
    """

    type = "kafka"

    def __init__(
        self,
        name: str,
        table: str,
        topic: str,
        kafka_config: Mapping[str, Any],
        format: str = "json",
        key_columns: Optional[Union[str, List[str]]] = None,
        exactly_once: bool = False,
        *,
        key_format: str = "json",
        transactional_id: Optional[str] = None,
        mode: str = "changelog",
        schema_registry_url: Optional[str] = None,
        schema_registry_user: Optional[str] = None,
        schema_registry_password: Optional[str] = None,
        **common: Any,
    ):
        super().__init__(name, table, mode=mode, **common)
        self.topic = self._text("topic", topic)
        if not isinstance(kafka_config, Mapping):
            raise TypeError(f"KafkaSink: kafka_config must be a dict of librdkafka properties, "
                            f"got {type(kafka_config).__name__}")
        config: Dict[str, str] = {}
        for key, value in kafka_config.items():
            if not isinstance(key, str) or not key:
                raise TypeError(f"KafkaSink: kafka_config keys must be property names, got {key!r}")
            if isinstance(value, bool):
                value = "true" if value else "false"
            config[key] = str(value)
        if not config.get("bootstrap.servers"):
            raise ValueError("KafkaSink: kafka_config must set 'bootstrap.servers'")
        self.kafka_config = config
        self.format = self._choice("format", format, ("json", "avro"))
        if self.format == "avro" and not schema_registry_url:
            raise ValueError('KafkaSink: format="avro" needs schema_registry_url')
        self.schema_registry_url = schema_registry_url or ""
        self.schema_registry_user = schema_registry_user or ""
        self.schema_registry_password = schema_registry_password or ""
        self.key_columns = self._names("key_columns", key_columns)
        self.key_format = self._choice("key_format", key_format, ("json", "string"))
        if self.key_format == "string" and len(self.key_columns) > 1:
            raise ValueError("KafkaSink: key_format='string' needs one key column, "
                             f"key_columns has {len(self.key_columns)}")
        self.exactly_once = self._flag("exactly_once", exactly_once)
        self.transactional_id = (
            (config.get("transactional.id") or f"rill-{self.name}") if transactional_id is None
            else self._text("transactional_id", transactional_id))

    def _start(self, engine_core: Any) -> Any:
        return _core.sink_add_kafka(engine_core, self._common_options(), self.topic,
                                    self.kafka_config, self.format, self.key_columns,
                                    self.key_format, self.exactly_once, self.transactional_id,
                                    self.schema_registry_url, self.schema_registry_user,
                                    self.schema_registry_password)


class PostgresSink(Sink):
    """A table's changes into a PostgreSQL table (libpq).

    Each batch goes through COPY into a temporary table and is applied in one
    transaction (upsert: INSERT ... ON CONFLICT (key) DO UPDATE and DELETE;
    changelog and append: INSERT), together with the sink's progress row in
    rill_sink_progress, so a crash never leaves a batch half applied or
    applied twice. create_table=True creates the target table (key as
    PRIMARY KEY, mapped types) when it is missing.
    """

    type = "postgres"

    def __init__(
        self,
        name: str,
        table: str,
        dsn: str,
        target_table: str,
        mode: str = "upsert",
        create_table: bool = False,
        *,
        connect_timeout_seconds: float = 10.0,
        **common: Any,
    ):
        super().__init__(name, table, mode=mode, **common)
        self.dsn = self._text("dsn", dsn)
        self.target_table = self._text("target_table", target_table)
        self.create_table = self._flag("create_table", create_table)
        self.connect_timeout_seconds = self._positive("connect_timeout_seconds",
                                                      connect_timeout_seconds)

    def _start(self, engine_core: Any) -> Any:
        return _core.sink_add_postgres(engine_core, self._common_options(), self.dsn,
                                       self.target_table, self.create_table,
                                       self.connect_timeout_seconds)

    def __repr__(self) -> str:  # never show the DSN: it may hold a password
        return super().__repr__().replace(">", f", target_table={self.target_table!r}>", 1)


FILE_FORMATS = ("parquet", "ndjson", "csv", "arrow")


class FileSink(Sink):
    """A table's changes as files in the directory `path` (Arrow's writers).

    format: "parquet", "ndjson", "csv" or "arrow" (IPC file). partition_by:
    Hive-style partition columns (path/region=eu/part-....parquet). A file is
    written under a temporary name and renamed into place when complete, so
    readers (DuckDB, pyarrow.dataset) never see half a file; file names carry
    the version range they hold. A file is rolled after `roll_rows` rows or
    `roll_seconds` seconds. mode: "changelog" or "append" (a file cannot
    replace a key's earlier row; read the last change per key with
    arg_max(..., _version) for the current table).
    """

    type = "file"

    def __init__(
        self,
        name: str,
        table: str,
        path: Union[str, "os.PathLike[str]"],
        format: str = "parquet",
        partition_by: Optional[Union[str, List[str]]] = None,
        roll_rows: int = 1000000,
        roll_seconds: float = 60.0,
        *,
        mode: str = "changelog",
        **common: Any,
    ):
        super().__init__(name, table, mode=mode, **common)
        if self.mode == "upsert":
            raise ValueError("FileSink: mode 'upsert' is not supported by files (a file cannot "
                             "replace a key's earlier row); use mode 'changelog' or 'append'")
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"FileSink: path must be a str or a path, got {type(path).__name__}")
        self.path = self._text("path", os.fspath(path))
        self.format = self._choice("format", format, FILE_FORMATS)
        self.partition_by = self._names("partition_by", partition_by)
        self.roll_rows = self._count("roll_rows", roll_rows)
        if self.roll_rows == 0:
            raise ValueError("FileSink: roll_rows must be > 0, got 0")
        self.roll_seconds = self._positive("roll_seconds", roll_seconds)

    def _start(self, engine_core: Any) -> Any:
        return _core.sink_add_file(engine_core, self._common_options(), self.path, self.format,
                                   self.partition_by, self.roll_rows, self.roll_seconds)


class PythonSink(Sink):
    """A table's changes handed to a Python callable, on the sink's thread.

    `write(data)` is called with each batch of changes: a pyarrow.Table
    (format="arrow") or a list of dicts, one per row (format="rows"), with
    the table's columns plus `_op` and `_version`. `commit(version)`, when
    given, is called after each batch. An exception counts as a failed
    write: the batch is retried or dropped per on_error. At-least-once: after
    a restart the sink starts from the table's state (a snapshot).

    Seed 001's stream sinks (rills.stream.ConsoleSink, DatabaseSink,
    QueueSink, ...) follow a table this way: StreamSink.for_table(table).
    """

    type = "python"

    def __init__(
        self,
        name: str,
        table: str,
        write: Callable[[Any], None],
        format: str = "arrow",
        commit: Optional[Callable[[int], None]] = None,
        *,
        mode: str = "changelog",
        **common: Any,
    ):
        super().__init__(name, table, mode=mode, **common)
        if not callable(write):
            raise TypeError(f"PythonSink: write must be callable, got {type(write).__name__}")
        if commit is not None and not callable(commit):
            raise TypeError(f"PythonSink: commit must be callable, got {type(commit).__name__}")
        self.write = write
        self.commit = commit
        self.format = self._choice("format", format, ("arrow", "rows"))

    def _start(self, engine_core: Any) -> Any:
        return _core.sink_add_python(engine_core, self._common_options(), _PythonTarget(self))


class _PythonTarget:
    """What the C++ PySinkWriter calls (bind_sink.cc). Holds the callables, not
    the sink object, so the engine does not keep the sink object alive."""

    def __init__(self, sink: PythonSink):
        self._write = sink.write
        self._commit = sink.commit
        self._rows = sink.format == "rows"

    def _rill_write(self, capsule: Any, mode: str, snapshot: bool) -> None:
        table = _arrow.table_from_stream(capsule)
        self._write(table.to_pylist() if self._rows else table)

    def _rill_commit(self, version: int) -> None:
        if self._commit is not None:
            self._commit(version)


class _SinkView(Sink):
    """A running sink whose Python object is gone (or that came from elsewhere):
    its common options, stats() and flush()."""

    def __init__(self, core: Any, engine_core: Any):
        options = core.options()
        Sink.__init__(self, options.pop("name"), options.pop("table"), **options)
        self.type = core.type
        self._core = core
        self._engine_core = engine_core


# Used by RillEngine (rills/engine.py) -----------------------------------------------------------


def add_sink(engine_core: Any, sink: Sink) -> None:
    """Start `sink` in the engine (see RillEngine.add_sink)."""
    if not isinstance(sink, Sink):
        raise TypeError(f"add_sink() takes a rills.sinks sink (KafkaSink, PostgresSink, "
                        f"FileSink, PythonSink), got {type(sink).__name__}")
    if sink.added:
        if sink._engine_core is engine_core:
            return
        raise ValueError(f"sink '{sink.name}' already runs in another engine")
    if isinstance(sink, _SinkView):
        raise ValueError(f"sink '{sink.name}' was removed; make a new sink object to add it again")
    core = sink._start(engine_core)
    sink._core = core
    sink._engine_core = engine_core
    _wrappers[core.address] = sink


def remove_sink(engine_core: Any, sink: Union[Sink, str]) -> None:
    """Stop and forget a sink (see RillEngine.remove_sink)."""
    name = sink if isinstance(sink, str) else getattr(sink, "name", None)
    if not isinstance(name, str):
        raise TypeError(f"remove_sink() takes a sink or its name, got {type(sink).__name__}")
    if not _core.sink_remove(engine_core, name):
        raise KeyError(f"no sink named '{name}' in this engine")
    if isinstance(sink, Sink):
        sink._engine_core = None


def sink_of(core: Any, engine_core: Any) -> Sink:
    """The Python sink of a running C++ sink."""
    sink = _wrappers.get(core.address)
    if sink is None:
        sink = _SinkView(core, engine_core)
        _wrappers[core.address] = sink
    return sink


def engine_sinks(engine_core: Any) -> List[Sink]:
    """The running sinks of an engine, in the order they were added."""
    if engine_core.closed:
        return []
    return [sink_of(core, engine_core) for core in _core.sink_list(engine_core)]


def sink_stats(engine_core: Any) -> Dict[str, Dict[str, Any]]:
    """{sink name: stats()} of an engine's sinks."""
    if engine_core.closed:
        return {}
    return {core.name: core.stats() for core in _core.sink_list(engine_core)}

