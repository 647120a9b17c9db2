"""Sinks: a table's changes written on to Kafka, PostgreSQL, files or Python."""

import os
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Union

SINK_MODES: Tuple[str, ...]
SINK_ERROR_POLICIES: Tuple[str, ...]
FILE_FORMATS: Tuple[str, ...]

class Sink:
    """Base of the sinks: common options, stats() and flush()."""

    type: str
    name: str
    table: str
    mode: str
    interval_seconds: float
    max_batch_rows: int
    on_error: str
    retry_initial_seconds: float
    retry_max_seconds: float
    max_backlog_rows: int
    emit_retention_deletes: bool
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
    ) -> None: ...
    @property
    def added(self) -> bool:
        """True while the sink runs in an engine."""
    def stats(self) -> Dict[str, Any]:
        """rows_written, batches, bytes, errors, retries, dropped_rows, snapshots,
        committed_version, lag_versions, lag_seconds, backpressure, last_error."""
    def flush(self, timeout: float = 10.0) -> None:
        """Write and commit everything published so far; raise after `timeout` seconds."""

class KafkaSink(Sink):
    topic: str
    kafka_config: Dict[str, str]
    format: str
    key_columns: List[str]
    key_format: str
    exactly_once: bool
    transactional_id: str
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
        interval_seconds: float = 1.0,
        max_batch_rows: int = 100000,
        on_error: str = "retry",
        retry_initial_seconds: float = 0.1,
        retry_max_seconds: float = 10.0,
        max_backlog_rows: int = 1000000,
        emit_retention_deletes: bool = False,
    ) -> None: ...

class PostgresSink(Sink):
    dsn: str
    target_table: str
    create_table: bool
    connect_timeout_seconds: float
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
        interval_seconds: float = 1.0,
        max_batch_rows: int = 100000,
        on_error: str = "retry",
        retry_initial_seconds: float = 0.1,
        retry_max_seconds: float = 10.0,
        max_backlog_rows: int = 1000000,
        emit_retention_deletes: bool = False,
    ) -> None: ...

class FileSink(Sink):
    path: str
    format: str
    partition_by: List[str]
    roll_rows: int
    roll_seconds: float
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
        interval_seconds: float = 1.0,
        max_batch_rows: int = 100000,
        on_error: str = "retry",
        retry_initial_seconds: float = 0.1,
        retry_max_seconds: float = 10.0,
        max_backlog_rows: int = 1000000,
        emit_retention_deletes: bool = False,
    ) -> None: ...

class PythonSink(Sink):
    write: Callable[[Any], None]
    commit: Optional[Callable[[int], None]]
    format: str
    def __init__(
        self,
        name: str,
        table: str,
        write: Callable[[Any], None],
        format: str = "arrow",
        commit: Optional[Callable[[int], None]] = None,
        *,
        mode: str = "changelog",
        interval_seconds: float = 1.0,
        max_batch_rows: int = 100000,
        on_error: str = "retry",
        retry_initial_seconds: float = 0.1,
        retry_max_seconds: float = 10.0,
        max_backlog_rows: int = 1000000,
        emit_retention_deletes: bool = False,
    ) -> None: ...
