"""Stream sinks: a database (SQLite) table, the console, a queue, an engine table."""

from __future__ import annotations

import json
import sqlite3
import threading
from typing import Any, Dict, List, Optional

__all__ = ["StreamSink", "ConsoleSink", "DatabaseSink", "QueueSink", "TableSink"]


class StreamSink:
    """Base class: `write(event)`, `write_batch(events)`; counts what it wrote.

    A stream sink can also follow an engine table over the engine's sink
    runtime (the change feed, its own thread, batching, retries, counters):
    `engine.add_sink(ConsoleSink().for_table("orders"))` calls write_batch()
    with each batch of the table's changes, one dict per changed row (the
    table's columns plus `_op` and `_version`; see rills.sinks.PythonSink).
    """

    def __init__(self, name: str):
        self.name = name
        self.written = 0

    def write(self, event: Any) -> None:
        self.write_batch([event])

    def write_batch(self, events: List[Any]) -> None:
        self._write(list(events))
        self.written += len(events)

    def _write(self, events: List[Any]) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass

    def for_table(self, table: str, name: Optional[str] = None, mode: str = "changelog",
                  **options: Any) -> Any:
        """Return a rills.sinks.PythonSink that writes `table`'s changes here
        (pass it to engine.add_sink). `name` defaults to "<this sink's
        name>_<table>"; `mode` and `options` are the common sink options
        (interval_seconds, max_batch_rows, on_error, ...)."""
        from ..sinks import PythonSink

        return PythonSink(name or f"{self.name}_{table}", table, self.write_batch,
                          format="rows", mode=mode, **options)


class ConsoleSink(StreamSink):
    def __init__(self, name: str = "console", prefix: str = ""):
        super().__init__(name)
        self.prefix = prefix

    def _write(self, events: List[Any]) -> None:
        for e in events:
            print(f"{self.prefix}{e}")


class DatabaseSink(StreamSink):
    """Append events as JSON rows to `table` in the SQLite file `path`."""

    def __init__(self, path: str = "stream.db", table: str = "events", name: str = "database"):
        super().__init__(name)
        if not table.isidentifier():
            raise ValueError(f"table must be an identifier, got {table!r}")
        self.table = table
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(path, check_same_thread=False)
        self._conn.execute(f"CREATE TABLE IF NOT EXISTS {table} (id INTEGER PRIMARY KEY AUTOINCREMENT, "
                           "data TEXT NOT NULL, written_at REAL DEFAULT ((julianday('now') - 2440587.5) * 86400.0))")

    def _write(self, events: List[Any]) -> None:
        with self._lock, self._conn:
            self._conn.executemany(f"INSERT INTO {self.table} (data) VALUES (?)",
                                   [(json.dumps(e),) for e in events])

    def read_all(self) -> List[Any]:
        with self._lock:
            return [json.loads(r[0]) for r in self._conn.execute(f"SELECT data FROM {self.table} ORDER BY id")]

    def close(self) -> None:
        with self._lock:
            self._conn.close()


class QueueSink(StreamSink):
    def __init__(self, queue: Any, priority: Optional[int] = None):
        super().__init__(f"queue_{queue.name}")
        self.queue = queue
        self.priority = priority

    def _write(self, events: List[Any]) -> None:
        self.queue.enqueue_batch(events, self.priority)


class TableSink(StreamSink):
    """Push events (dicts) into an engine table through a MemoryConnector."""

    def __init__(self, engine: Any, table: str):
        from ..connectors import MemoryConnector

        super().__init__(f"table_{table}")
        self.connector = MemoryConnector(name=f"sink_{table}", target_table=table)
        engine.add_connector(self.connector)

    def _write(self, events: List[Dict[str, Any]]) -> None:
        self.connector.push(events)
