"""RillTable: a live table in C++ memory, and the pure upsert_table() function."""

from __future__ import annotations

import threading
import time
import weakref
from typing import Any, Callable, Dict, List, Optional, Union

import pyarrow as pa
import pyarrow.compute as pc

from . import _arrow, _core
from ._arrow import SYSTEM_COLUMNS
from .retention import RetentionPolicy
from .schema import estimate_schema_row_size, extract_mode, extract_primary_key, normalize_mode

__all__ = ["RillTable", "upsert_table"]

Subscriber = Callable[[str, pa.Table], None]


def _retention_from_tuple(value: Any) -> Optional[RetentionPolicy]:
    if value is None:
        return None
    max_rows, max_age_seconds, time_column = value
    return RetentionPolicy(max_rows, max_age_seconds, time_column)


class RillTable:
    """A live table: rows in Arrow chunks owned by the C++ engine.

    In "snapshot" mode with a primary key, writes upsert by key (the last row
    per key wins, z_insert_ts is kept from the replaced row); otherwise they
    append. Append-mode tables need a RetentionPolicy. Every row carries
    z_insert_ts and z_update_ts (float64 unix seconds).

    A table made without a schema takes the schema of its first write.
    Reads (to_arrow, num_rows) see the latest published version without
    copying; all methods may be called from any thread.

    The tables of an engine (register_table, get_table, engine.tables) are
    views: they hold the engine and the table's name, and every property and
    method asks the C++ engine, which alone owns the table, its options and
    its subscribers. Two views of one name are equal. A view reads the
    engine: after engine.close() its methods raise RuntimeError.
    """

    def __init__(
        self,
        name: str,
        schema: Optional[pa.Schema] = None,
        primary_key: Optional[Union[str, List[str]]] = None,
        retention_policy: Optional[RetentionPolicy] = None,
        mode: Optional[str] = None,
    ):
        """Create a standalone table (engines create theirs with register_table).

        ValueError for an append table without a retention policy, an unknown
        mode or key column; TypeError for arguments of the wrong type.
        """
        _check_table_args(name, schema, retention_policy)
        self._name = name
        self._engine_ref: Optional[weakref.ReferenceType] = None
        self._keys = _arrow.key_list(primary_key)
        self._mode = normalize_mode(mode)
        self._retention = retention_policy
        self._declared_schema = schema
        self._standalone: Optional[Any] = None
        self._reporter = _core.Reporter()
        self._lock = threading.RLock()
        self._subscriptions: Dict[Any, Optional[int]] = {}
        if schema is not None:
            self._materialize(schema)
        else:  # the C++ rule (append needs a retention policy), checked now
            _core.check_table_options(
                name, self._mode, **(retention_policy._core_args() if retention_policy else {})
            )

    @classmethod
    def _view(cls, engine: Any, name: str) -> "RillTable":
        """The table `name` of `engine` (which must exist or be declared)."""
        table = cls.__new__(cls)
        table._name = name
        table._engine_ref = weakref.ref(engine)
        return table

    # Where the state lives ---------------------------------------------------

    def _engine(self) -> Any:
        engine = self._engine_ref() if self._engine_ref is not None else None
        if engine is None:
            raise RuntimeError(f"the engine of table '{self._name}' is gone")
        return engine

    @property
    def _core(self) -> Optional[Any]:
        """The C++ table, or None while it has no schema."""
        if self._engine_ref is None:
            return self._standalone
        return self._engine()._core.get_table(self._name)

    def _declaration(self) -> Optional[Dict[str, Any]]:
        """Key, mode and retention of a table without a schema yet (engine tables)."""
        if self._engine_ref is None:
            return {
                "primary_key": self._keys,
                "mode": self._mode,
                "retention": None,
            }
        return self._engine()._core.table_declaration(self._name)

    def _materialize(self, schema: pa.Schema) -> Any:
        """Return the C++ table, creating a table without a schema from `schema`."""
        if self._engine_ref is not None:
            return self._engine()._core.table_for_write(self._name, schema)
        with self._lock:
            if self._standalone is not None:
                return self._standalone
            args = dict(primary_key=self._keys, mode=self._mode,
                        **(self._retention._core_args() if self._retention else {}))
            core = _core.LiveTable.make(self._name, schema, auto_compact_chunks=None, **args)
            for callback in list(self._subscriptions):
                self._subscriptions[callback] = core.subscribe(
                    _deliverer(self._name, callback), self._reporter
                )
            self._standalone = core
            return core

    # Properties ----------------------------------------------------------------

    @property
    def name(self) -> str:
        """The table's name."""
        return self._name

    @property
    def schema(self) -> Optional[pa.Schema]:
        """The full schema (user columns, then z_insert_ts, z_update_ts); None before the first write of a schema-less table."""
        core = self._core
        if core is not None:
            return _arrow.schema_from_capsule(core.schema_capsule())
        return self._declared_schema if self._engine_ref is None else None

    @property
    def primary_key(self) -> Optional[Union[str, List[str]]]:
        """The key: None, a column name, or a list of names for a composite key."""
        core = self._core
        if core is not None:
            return _arrow.key_public(list(core.primary_key))
        if self._engine_ref is None and not self._keys and self._declared_schema is not None:
            return extract_primary_key(self._declared_schema)
        declaration = self._declaration()
        return _arrow.key_public(list(declaration["primary_key"]) if declaration else [])

    @property
    def mode(self) -> str:
        """"snapshot" or "append"."""
        core = self._core
        if core is not None:
            return core.mode
        declaration = self._declaration()
        if declaration and declaration["mode"] is not None:
            return declaration["mode"]
        if self._engine_ref is None and self._declared_schema is not None:
            return extract_mode(self._declared_schema)
        return "snapshot"

    @property
    def retention_policy(self) -> Optional[RetentionPolicy]:
        """The table's RetentionPolicy, if any."""
        if self._engine_ref is None:
            return self._retention
        core = self._core
        if core is not None:
            return _retention_from_tuple(core.retention)
        declaration = self._declaration()
        return _retention_from_tuple(declaration["retention"]) if declaration else None

    @property
    def num_rows(self) -> int:
        """Number of live rows."""
        core = self._core
        return core.num_rows if core is not None else 0

    @property
    def num_columns(self) -> int:
        """Number of columns, system columns included (0 before the first write)."""
        core = self._core
        return core.num_columns if core is not None else 0

    @property
    def num_chunks(self) -> int:
        """Number of Arrow chunks holding the rows."""
        core = self._core
        return core.num_chunks if core is not None else 0

    @property
    def version(self) -> int:
        """Version number of the published state (+1 per change)."""
        core = self._core
        return core.version if core is not None else 0

    # Writes --------------------------------------------------------------------

    def upsert(
        self,
        batch_or_table: Any,
        promote_options: str = "default",
        current_time: Optional[float] = None,
    ) -> pa.Table:
        """Write rows: upsert by key in snapshot mode with a key, append otherwise.

        Accepts a pyarrow Table, RecordBatch, list of RecordBatches, dict of
        columns or list of row dicts. Columns are matched by name and cast
        safely to the table's types. `current_time` (unix seconds) stamps
        z_insert_ts/z_update_ts and is the "now" of retention. Returns the
        table's new state. ValueError when the rows do not fit the schema
        (the message names the column and types), TypeError for other inputs.
        """
        data = _arrow.to_table(batch_or_table, self._type_hints(batch_or_table), what="upsert()")
        if data is None:
            return self.to_arrow()
        core = self._materialize(data.schema)
        core.write(data, None if current_time is None else float(current_time))
        return self.to_arrow()

    def delete(self, keys: Any, current_time: Optional[float] = None) -> Optional[pa.Table]:
        """Delete the rows with these keys; return the table's new state.

        `keys`: a pyarrow Table or RecordBatch holding (at least) the key
        columns, a dict of key columns (lists, or scalars for one key), a list
        of row dicts, or a list of values of a single-column key. Keys not in
        the table are ignored. One new version, seen by SQL, subscribers, the
        change feed and checkpoints. ValueError for an append table or a table
        without a primary key, and for keys missing a key column.
        """
        core = self._core
        declaration = None if core is not None else self._declaration()
        keys_of = list(core.primary_key) if core is not None else list(
            (declaration or {}).get("primary_key") or [])
        data = _arrow.keys_table(keys, self.schema if core is not None else None, keys_of,
                                 what="delete()")
        if core is None:
            mode = (declaration or {}).get("mode")
            if not keys_of or mode == "append":
                raise ValueError(f"Table '{self._name}' is "
                                 f"{'an append table' if mode == 'append' else 'not keyed'}: "
                                 "rows cannot be deleted by key")
            return self.to_arrow()  # no rows yet
        if data is not None and data.num_rows:
            core.delete(data, None if current_time is None else float(current_time))
        elif not core.keyed:
            core.delete(pa.table({}), None)  # the table's own error
        return self.to_arrow()

    def replace_state(self, new_table: Any, current_time: Optional[float] = None) -> pa.Table:
        """Replace all rows with `new_table` (last row per key wins). Returns the new state."""
        data = _arrow.to_table(new_table, self._type_hints(new_table), what="replace_state()")
        if data is None:
            data = pa.table({})
        core = self._materialize(data.schema)
        core.replace_state(data, None if current_time is None else float(current_time))
        return self.to_arrow()

    def _type_hints(self, data: Any) -> Optional[pa.Schema]:
        # Types for dict and row-list writes: the table's schema once it has one.
        if isinstance(data, (pa.Table, pa.RecordBatch)):
            return None
        return self.schema

    def apply_retention(self, current_time: Optional[float] = None) -> Optional[pa.Table]:
        """Remove expired rows now (as of `current_time`, default now). Returns the state."""
        core = self._core
        if core is not None:
            core.apply_retention(None if current_time is None else float(current_time))
        return self.to_arrow()

    def compact(self, max_chunks: int = 32) -> Optional[pa.Table]:
        """Merge chunks when there are more than `max_chunks`; rewrite dead rows away.

        With max_chunks <= 1 the table is rewritten into as few chunks as possible.
        Returns the state.
        """
        core = self._core
        if core is not None and core.num_chunks > max_chunks:
            core.compact(False)
            if core.num_chunks > max_chunks:
                core.compact(True)
        return self.to_arrow()

    # Reads ---------------------------------------------------------------------

    def to_arrow(self) -> Optional[pa.Table]:
        """Return the current rows as a pyarrow Table sharing the engine's buffers.

        None before the first write of a table made without a schema.
        """
        core = self._core
        if core is None:
            return None
        return _arrow.table_from_stream(core.to_stream())

    def estimate_row_size(self, avg_string_length: int = 32, avg_list_length: int = 5) -> Optional[float]:
        """Return the estimated bytes per row of the table's schema (see estimate_schema_row_size); None without a schema."""
        schema = self.schema
        if schema is None:
            return None
        # The seed's schema has nullable system columns: one validity bit each.
        schema = pa.schema([f.with_nullable(True) if f.name in SYSTEM_COLUMNS else f for f in schema],
                           metadata=schema.metadata)
        return estimate_schema_row_size(schema, avg_string_length=avg_string_length,
                                        avg_list_length=avg_list_length)

    def estimate_records_capacity(
        self,
        memory_budget_bytes: int,
        safety_factor: float = 0.75,
        avg_string_length: int = 32,
        avg_list_length: int = 5,
    ) -> Optional[int]:
        """Return how many rows fit in `memory_budget_bytes` * `safety_factor`; None without a schema."""
        if memory_budget_bytes < 0:
            raise ValueError(f"memory_budget_bytes must be >= 0, got {memory_budget_bytes}")
        if not 0 < safety_factor <= 1:
            raise ValueError(f"safety_factor must be in (0, 1], got {safety_factor}")
        row_size = self.estimate_row_size(avg_string_length, avg_list_length)
        if not row_size:
            return None
        return int(memory_budget_bytes * safety_factor / row_size)

    # Subscribers -----------------------------------------------------------------

    def subscribe(self, callback: Subscriber) -> None:
        """Call `callback(table_name, table)` with every new state of the table.

        Callbacks run on the thread that wrote (the engine's loop thread for
        connector data) with the GIL held; an exception is logged and recorded
        as an engine event, never raised into the engine. Subscribing the same
        callback twice has no effect.
        """
        if not callable(callback):
            raise TypeError(f"callback must be callable, got {type(callback).__name__}")
        if self._engine_ref is not None:
            self._engine()._subscribe(self._name, callback)
            return
        with self._lock:
            if callback in self._subscriptions:
                return
            sub_id = None
            if self._standalone is not None:
                sub_id = self._standalone.subscribe(_deliverer(self._name, callback), self._reporter)
            self._subscriptions[callback] = sub_id

    def unsubscribe(self, callback: Subscriber) -> None:
        """Stop calling `callback`. Unknown callbacks are ignored."""
        if self._engine_ref is not None:
            self._engine()._unsubscribe(self._name, callback)
            return
        with self._lock:
            sub_id = self._subscriptions.pop(callback, None)
            if sub_id is not None and self._standalone is not None:
                self._standalone.unsubscribe(sub_id)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RillTable):
            return NotImplemented
        if self._engine_ref is None or other._engine_ref is None:
            return self is other
        return self._name == other._name and self._engine_ref() is other._engine_ref()

    def __hash__(self) -> int:
        return hash(self._name)

    def __repr__(self) -> str:
        return (
            f"<RillTable(name={self._name!r}, mode={self.mode!r}, num_rows={self.num_rows}, "
            f"num_columns={self.num_columns}, primary_key={self.primary_key!r})>"
        )


def _check_table_args(name: Any, schema: Any, retention_policy: Any) -> None:
    if not isinstance(name, str) or not name:
        raise ValueError(f"a table needs a non-empty name, got {name!r}")
    if schema is not None and not isinstance(schema, pa.Schema):
        raise TypeError(f"schema must be a pyarrow.Schema, got {type(schema).__name__}")
    if retention_policy is not None and not isinstance(retention_policy, RetentionPolicy):
        raise TypeError(
            f"retention_policy must be a RetentionPolicy, got {type(retention_policy).__name__}"
        )


def _deliverer(name: str, callback: Subscriber) -> Callable[[Any], None]:
    # Holds the table's name, not the table: no reference cycle through C++.
    def deliver(capsule: Any) -> None:
        callback(name, _arrow.table_from_stream(capsule))

    return deliver


def _with_stamps(old: Optional[pa.Table], new: pa.Table, keys: List[str], ts: float):
    # The seed's system columns: old rows get z_insert_ts/z_update_ts = ts when
    # missing; new rows keep the z_insert_ts of the old row with their key (ts
    # otherwise) and get z_update_ts = ts, unless they bring their own.
    def stamp(table: pa.Table) -> pa.Table:
        for column in SYSTEM_COLUMNS:
            if column not in table.column_names:
                table = table.append_column(column, pa.array([ts] * table.num_rows, pa.float64()))
        return table

    if old is not None:
        old = stamp(old)
    if "z_insert_ts" not in new.column_names:
        inserted = pa.array([ts] * new.num_rows, pa.float64())
        if old is not None and old.num_rows and keys:
            index = pa.table({**{k: new.column(k) for k in keys},
                              "__row": pa.array(range(new.num_rows), pa.int64())})
            found = index.join(old.select(keys + ["z_insert_ts"]), keys=keys, join_type="left outer")
            found = found.group_by(["__row"]).aggregate([("z_insert_ts", "min")]).sort_by("__row")
            inserted = pc.fill_null(found.column("z_insert_ts_min"), ts).cast(pa.float64())
        new = new.append_column("z_insert_ts", inserted)
    if "z_update_ts" not in new.column_names:
        new = new.append_column("z_update_ts", pa.array([ts] * new.num_rows, pa.float64()))
    return old, new


def upsert_table(
    old_table: Optional[Any],
    new_table: Any,
    primary_key: Optional[Union[str, List[str]]] = None,
    promote_options: str = "default",
    current_time: Optional[float] = None,
) -> pa.Table:
    """Return `new_table` upserted into `old_table` by `primary_key`.

    A pure function on pyarrow tables (RecordBatches accepted): the last row per
    key wins, surviving old rows keep their order, replaced and new rows come
    last. Without a key the rows are appended. `old_table` may be None.

    As in the seed, the result carries the system columns: rows without
    z_insert_ts / z_update_ts get `current_time` (unix seconds, default now),
    and a new row replacing an old one keeps the old row's z_insert_ts.
    `promote_options` is passed to pa.concat_tables when schemas differ
    ("default" or "permissive").
    """
    new = _arrow.to_table(new_table, what="upsert_table()")
    old = None if old_table is None else _arrow.to_table(old_table, what="upsert_table()")
    if new is None:
        if old is None:
            raise ValueError("upsert_table() needs at least one non-empty table")
        return old
    keys = _arrow.key_list(primary_key)
    ts = time.time() if current_time is None else float(current_time)
    old, new = _with_stamps(old, new, keys, ts)
    if old is None or old.num_rows == 0:
        return new
    if new.num_rows == 0:
        return old
    if old.schema != new.schema and set(old.column_names) == set(new.column_names):
        try:  # same columns: align new to old's order and types
            new = new.select(old.column_names).cast(old.schema)
        except (pa.ArrowInvalid, pa.ArrowTypeError, ValueError):
            pass  # left to concat_tables' promotion
    if not keys:
        return pa.concat_tables([old, new], promote_options=promote_options)
    return _arrow.table_from_stream(_core.upsert_table(old, new, keys))
