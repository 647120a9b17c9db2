"""Bridges between message queues and engine tables.

feed_table_from_queue(engine, queue, table): a daemon thread moves messages
(dicts) from `queue` into `table` through a MemoryConnector (so they are
written on the engine's next tick); returns a QueueBridge to stop it.

feed_queue_from_table(engine, table, queue): every row written to `table`
from now on (an insert or an update, found by z_update_ts) is enqueued into
`queue` as a dict (system columns dropped).
"""

from __future__ import annotations

import threading
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["QueueBridge", "feed_table_from_queue", "feed_queue_from_table"]


class QueueBridge:
    """A running queue -> table bridge; stop() ends it after a final drain."""

    def __init__(self, engine: Any, queue: Any, table: str, batch_size: int, poll_interval: float):
        from ..connectors import MemoryConnector

        self.queue = queue
        self.connector = MemoryConnector(name=f"queue_{queue.name}_to_{table}", target_table=table)
        engine.add_connector(self.connector)
        self._stop = threading.Event()
        self.moved = 0

        def run() -> None:
            while True:
                batch = queue.dequeue_batch(batch_size)
                if batch:
                    self.connector.push(batch)
                    self.moved += len(batch)
                    continue
                if self._stop.wait(poll_interval):
                    return

        self._thread = threading.Thread(target=run, name=self.connector.name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def feed_table_from_queue(engine: Any, queue: Any, table: str, batch_size: int = 1000,
                          poll_interval: float = 0.05) -> QueueBridge:
    return QueueBridge(engine, queue, table, batch_size, poll_interval)


def feed_queue_from_table(engine: Any, table: str, queue: Any, priority: Any = None) -> None:
    cursor = [float("-inf")]
    lock = threading.Lock()

    def on_version(_name: str, data: pa.Table) -> None:
        if data.num_rows == 0 or "z_update_ts" not in data.column_names:
            return
        with lock:
            new = data.filter(pc.greater(data["z_update_ts"], cursor[0]))
            if new.num_rows == 0:
                return
            cursor[0] = pc.max(new["z_update_ts"]).as_py()
        users = new.drop_columns([c for c in ("z_insert_ts", "z_update_ts") if c in new.column_names])
        queue.enqueue_batch(users.to_pylist(), priority)

    engine.subscribe(table, on_version)
