"""Input connectors: BaseConnector (subclass it in Python) and MemoryConnector."""

from __future__ import annotations

import abc
import itertools
import threading
import weakref
from typing import Any, Dict, List, Optional, Union

import pyarrow as pa

from . import _arrow, _core

__all__ = ["BaseConnector", "MemoryConnector"]

_OVERFLOW = ("drop_oldest", "drop_newest", "error")


def _check_limit(name: str, value: Optional[int]) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int or None, got {type(value).__name__}")
    if value < 0:
        raise ValueError(f"{name} must be >= 0 (0 or None: unlimited), got {value}")
    return value


class BaseConnector(abc.ABC):
    """Base class of connectors. Subclass it and implement read_batch().

    The engine calls read_batch() once per tick on its loop thread, with the
    GIL held; whatever it returns (a pyarrow Table, RecordBatch, list of
    RecordBatches, dict of columns, list of row dicts, or None when nothing
    arrived) is written to `target_table`. An exception raised by read_batch(),
    start() or stop() is logged and recorded as an engine event with its
    traceback; the loop goes on.
    """

    def __init__(
        self,
        target_table: str,
        max_buffer_records: Optional[int] = None,
        on_overflow: str = "drop_oldest",
        name: Optional[str] = None,
    ):
        """Args:
            target_table: the table this connector feeds.
            max_buffer_records: rows a subclass may buffer (None: unlimited).
            on_overflow: "drop_oldest", "drop_newest" or "error" (ValueError otherwise).
            name: unique name within an engine (default: derived from target_table).
        """
        if not isinstance(target_table, str) or not target_table:
            raise ValueError(f"target_table must be a non-empty str, got {target_table!r}")
        _check_limit("max_buffer_records", max_buffer_records)
        if on_overflow not in _OVERFLOW:
            raise ValueError(
                f"on_overflow must be one of {', '.join(_OVERFLOW)}; got {on_overflow!r}"
            )
        self.target_table = target_table
        self.max_buffer_records = max_buffer_records
        self.on_overflow = on_overflow
        self.name = name if name is not None else _default_name(target_table)
        self._engine_ref: Optional[weakref.ReferenceType] = None

    def start(self) -> None:
        """Begin reading (threads, sockets). Called when added to an engine. Default: nothing."""

    def stop(self) -> None:
        """Stop reading and release resources. Default: nothing."""

    @abc.abstractmethod
    def read_batch(self) -> Optional[Union[pa.Table, pa.RecordBatch, List[pa.RecordBatch]]]:
        """Return the rows that arrived since the last call, or None."""

    def _attach(self, engine: Any) -> None:
        self._engine_ref = weakref.ref(engine)

    def _detach(self) -> None:
        self._engine_ref = None

    def _announce(self, schema: pa.Schema) -> None:
        # A table registered without a schema takes the schema of its first rows.
        engine = self._engine_ref() if self._engine_ref is not None else None
        if engine is not None:
            engine._ensure_table(self.target_table, schema)

    def _rill_poll(self) -> Optional[pa.Table]:
        """Called by the engine's tick: read_batch() as a pyarrow Table (or None)."""
        data = self.read_batch()
        if data is None:
            return None
        table = _arrow.to_table(data, getattr(self, "schema", None), what="read_batch()")
        if table is None or table.num_rows == 0:
            return None
        self._announce(table.schema)
        return table

    def __repr__(self) -> str:
        return f"<{type(self).__name__}(name={self.name!r}, target_table={self.target_table!r})>"


_names_lock = threading.Lock()
_name_counters: Dict[str, "itertools.count[int]"] = {}


def _default_name(target_table: str) -> str:
    # Several connectors may feed one table; engine connector names must be unique.
    with _names_lock:
        counter = _name_counters.setdefault(target_table, itertools.count(1))
        n = next(counter)
    return target_table if n == 1 else f"{target_table}#{n}"


class MemoryConnector(BaseConnector):
    """A connector fed by push() from application code, from any thread.

    Pushed data is buffered in C++ (bounded by max_buffer_records /
    max_buffer_bytes, with the on_overflow strategy) and written to the target
    table on the next tick. Pushing pyarrow data shares its buffers with the
    engine; nothing is copied.
    """

    def __init__(
        self,
        target_table: str,
        schema: Optional[pa.Schema] = None,
        max_buffer_records: Optional[int] = None,
        on_overflow: str = "drop_oldest",
        max_buffer_bytes: Optional[int] = None,
        name: Optional[str] = None,
    ):
        """Args:
            target_table: the table this connector feeds.
            schema: types for dict / row-list pushes (optional).
            max_buffer_records: buffered rows before on_overflow applies (None: unlimited).
            on_overflow: "drop_oldest" (drop the oldest buffered rows), "drop_newest"
                (keep what is buffered, take the part of a push that fits) or "error"
                (refuse the whole push with BufferError).
            max_buffer_bytes: buffered bytes before on_overflow applies (None: unlimited).
            name: unique name within an engine (default: derived from target_table).
        """
        super().__init__(target_table, max_buffer_records, on_overflow, name)
        if schema is not None and not isinstance(schema, pa.Schema):
            raise TypeError(f"schema must be a pyarrow.Schema, got {type(schema).__name__}")
        self.schema = schema
        self.max_buffer_bytes = max_buffer_bytes
        self._core = _core.MemoryConnector.make(
            target_table,
            schema,
            _check_limit("max_buffer_records", max_buffer_records),
            _check_limit("max_buffer_bytes", max_buffer_bytes),
            on_overflow,
            self.name,
        )

    def push(
        self,
        data: Union[pa.Table, pa.RecordBatch, List[pa.RecordBatch], Dict[str, Any], List[Dict[str, Any]]],
    ) -> None:
        """Buffer rows for the next tick. Any thread.

        Accepts a pyarrow Table, RecordBatch, list of RecordBatches, dict of
        columns or list of row dicts (rows may have different keys; missing
        values are null). Empty input is ignored. BufferError when
        on_overflow="error" and the push does not fit (nothing is buffered
        then); TypeError for other inputs.
        """
        table = _arrow.to_table(data, self.schema, what="MemoryConnector.push()")
        if table is None or table.num_rows == 0:
            return
        self._announce(table.schema)
        self._core.push(table)

    def read_batch(self) -> Optional[pa.Table]:
        """Take everything buffered as one pyarrow Table, or None when empty.

        The engine drains the buffer itself on every tick; call this only for a
        connector that is not attached to an engine.
        """
        capsule = self._core.poll()
        if capsule is None:
            return None
        return _arrow.table_from_stream(capsule)

    def stats(self) -> Dict[str, int]:
        """Return the buffer's counters (buffered, pushed, dropped, refused, drained rows)."""
        return self._core.stats()

    @property
    def buffered_records(self) -> int:
        """Rows waiting for the next tick."""
        return self._core.stats()["buffered_records"]
