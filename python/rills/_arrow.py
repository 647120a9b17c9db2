"""Arrow plumbing between Python and the engine (private).

Everything that crosses into C++ goes through the Arrow PyCapsule interface,
so buffers are shared, never copied. The helpers here only turn Python-level
inputs (dicts, row lists) into pyarrow tables and capsules back into pyarrow
objects.
"""

from __future__ import annotations

from typing import Any, Optional

import pyarrow as pa

SYSTEM_COLUMNS = ("z_insert_ts", "z_update_ts")

_PUSH_TYPES = (
    "a pyarrow Table, a RecordBatch, a list of RecordBatches, a dict of columns "
    "or a list of row dicts"
)


def table_from_stream(capsule: Any) -> pa.Table:
    """Return the pyarrow Table streamed by an "arrow_array_stream" capsule."""
    return pa.RecordBatchReader._import_from_c_capsule(capsule).read_all()


def schema_from_capsule(capsule: Any) -> pa.Schema:
    """Return the pyarrow Schema of an "arrow_schema" capsule."""
    return pa.Schema._import_from_c_capsule(capsule)


def user_fields(schema: Optional[pa.Schema]) -> dict:
    """Return {name: type} of the non-system fields of `schema` (empty if None)."""
    if schema is None:
        return {}
    return {f.name: f.type for f in schema if f.name not in SYSTEM_COLUMNS}


def _column(values: Any, type_hint: Optional[pa.DataType]) -> Any:
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        return values
    return pa.array(values, type=type_hint)


def _from_columns(columns: dict, schema: Optional[pa.Schema]) -> pa.Table:
    hints = user_fields(schema)
    for key in columns:
        if not isinstance(key, str):
            raise TypeError(f"column names must be str, got {type(key).__name__}: {key!r}")
    return pa.table({name: _column(values, hints.get(name)) for name, values in columns.items()})


def _from_rows(rows: list, schema: Optional[pa.Schema]) -> pa.Table:
    names: dict = {}
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            raise TypeError(
                f"a list of row dicts must hold only dicts; item {i} is {type(row).__name__}"
            )
        for key in row:
            names.setdefault(key, None)
    return _from_columns({name: [row.get(name) for row in rows] for name in names}, schema)


def to_table(data: Any, schema: Optional[pa.Schema] = None, what: str = "push()") -> Optional[pa.Table]:
    """Return `data` as a pyarrow Table, or None when it holds nothing.

    Accepts a pyarrow Table, RecordBatch, a list of RecordBatches (or Tables),
    a dict of columns, a list of row dicts, or any object implementing
    __arrow_c_stream__. `schema` types the columns of dicts and rows.
    TypeError for anything else.
    """
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if isinstance(data, dict):
        if not data:
            return None
        return _from_columns(data, schema)
    if isinstance(data, (list, tuple)):
        if not data:
            return None
        if all(isinstance(item, pa.RecordBatch) for item in data):
            return pa.Table.from_batches(list(data))
        if all(isinstance(item, pa.Table) for item in data):
            return pa.concat_tables(list(data))
        if all(isinstance(item, dict) for item in data):
            return _from_rows(list(data), schema)
        kinds = sorted({type(item).__name__ for item in data})
        raise TypeError(f"{what} takes {_PUSH_TYPES}; got a list of {', '.join(kinds)}")
    if hasattr(data, "__arrow_c_stream__"):
        return pa.table(data)
    raise TypeError(f"{what} takes {_PUSH_TYPES}; got {type(data).__name__}")


def key_list(primary_key: Any) -> list:
    """Return `primary_key` (None, a column name or a list of names) as a list."""
    if primary_key is None:
        return []
    if isinstance(primary_key, str):
        return [primary_key.strip()] if primary_key.strip() else []
    if isinstance(primary_key, (list, tuple)):
        for k in primary_key:
            if not isinstance(k, str):
                raise TypeError(f"primary_key columns must be str, got {type(k).__name__}")
        return [k.strip() for k in primary_key if k.strip()]
    raise TypeError(f"primary_key must be a str or a list of str, got {type(primary_key).__name__}")


def key_public(keys: list) -> Any:
    """Return a key list the way the seed's API shows it: None, 'a' or ['a', 'b']."""
    if not keys:
        return None
    if len(keys) == 1:
        return keys[0]
    return list(keys)


# The operation column of a push (src/rill/common/row_ops.h): int8 codes.
WRITE_OP_COLUMN = "_rill_op"
OP_DELETE = 1


def keys_table(keys: Any, schema: Optional[pa.Schema], key_columns: list,
               what: str = "delete()") -> Optional[pa.Table]:
    """Return the keys to delete as a pyarrow Table, or None when there are none.

    Accepts what to_table accepts (a Table or RecordBatch of keys, a dict of
    key columns, a list of row dicts); a dict of scalars is one key, and a
    list of scalars the values of a single-column key. `schema` types them.
    """
    hints = None
    if schema is not None:
        fields = [schema.field(k) for k in key_columns if k in schema.names]
        hints = pa.schema(fields) if fields else None
    if isinstance(keys, dict) and keys and not any(
        isinstance(v, (list, tuple, pa.Array, pa.ChunkedArray)) or hasattr(v, "__array__")
        for v in keys.values()
    ):
        keys = {k: [v] for k, v in keys.items()}
    elif (isinstance(keys, (list, tuple)) and keys
          and not any(isinstance(item, (dict, pa.RecordBatch, pa.Table)) for item in keys)):
        if len(key_columns) != 1:
            raise TypeError(f"{what}: a list of values needs a single-column key; the key is "
                            f"{key_columns} (pass a dict of key columns or a list of row dicts)")
        keys = {key_columns[0]: list(keys)}
    return to_table(keys, hints, what=what)


def with_delete_ops(table: pa.Table) -> pa.Table:
    """Return `table` with the operation column saying "delete" on every row."""
    ops = pa.array([OP_DELETE] * table.num_rows, type=pa.int8())
    return table.append_column(pa.field(WRITE_OP_COLUMN, pa.int8(), nullable=False), ops)


def rename_op_column(data: Any, op_column: Optional[str]) -> Any:
    """Return a Table or RecordBatch with `op_column` renamed to the operation column."""
    if not op_column or op_column not in data.schema.names:
        return data
    return data.rename_columns([WRITE_OP_COLUMN if n == op_column else n
                                for n in data.schema.names])

