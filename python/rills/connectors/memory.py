"""MemoryConnector: rows pushed from application code, buffered in C++."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Union

import pyarrow as pa

from .. import _arrow, _core
from ..schema import extract_primary_key
from .base import BaseConnector, _check_limit, _register_core, register_view_type

__all__ = ["MemoryConnector"]


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
        op_column: Optional[str] = None,
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
            op_column: a column of the pushed rows saying what each row does:
                "insert", "upsert", "update" (or "c", "u", "r") upsert the row,
                "delete" ("d") deletes its key, "truncate" ("t") empties the
                table; rows apply in order, so one push can mix upserts and
                deletes of a key and the last one wins (keyed tables only
                delete). None: every row is an upsert.
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
        if op_column is not None:
            if not isinstance(op_column, str) or not op_column:
                raise TypeError(f"op_column must be a non-empty str, got {op_column!r}")
            self._core.op_column = op_column
        self.op_column = op_column
        _register_core(self._core, self)

    @classmethod
    def _view(cls, core: Any) -> "MemoryConnector":
        """A MemoryConnector over a C++ one an engine holds (its wrapper is gone)."""
        view = cls.__new__(cls)
        max_records, max_bytes, on_overflow = core.limits
        capsule = core.schema_capsule()
        view.target_table = core.target_table
        view.max_buffer_records = max_records or None
        view.on_overflow = on_overflow
        view.name = core.name
        view.schema = None if capsule is None else _arrow.schema_from_capsule(capsule)
        view.max_buffer_bytes = max_bytes or None
        view.op_column = core.op_column or None
        view._core = core
        _register_core(core, view)
        return view

    def _core_connector(self) -> Any:
        return self._core

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
        if type(data) is pa.RecordBatch:  # the fast path: no Table around one batch
            if data.num_rows:
                self._core.push(data)
            return
        table = _arrow.to_table(data, self.schema, what="MemoryConnector.push()")
        if table is None or table.num_rows == 0:
            return
        self._core.push(table)

    def delete(self, keys: Any) -> None:
        """Buffer deletes of the rows with these keys for the next tick. Any thread.

        `keys`: a dict of key columns (lists, or scalars for one key), a list
        of row dicts, a pyarrow Table or RecordBatch of keys, or a list of
        values when the schema's primary key has one column. The deletes keep
        their place among the pushes: a push after them upserts again. The
        target must be a keyed table (a ValueError alert and a rill_rejects
        row otherwise, at the tick). Same buffer limits as push().
        """
        key_columns = extract_primary_key(self.schema) if self.schema is not None else None
        if isinstance(key_columns, str):
            key_columns = [key_columns]
        table = _arrow.keys_table(keys, self.schema, list(key_columns or []),
                                  what="MemoryConnector.delete()")
        if table is None or table.num_rows == 0:
            return
        self._core.push(_arrow.with_delete_ops(table))

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


register_view_type(_core.MemoryConnector, MemoryConnector._view)
