"""Schemas carrying a table's primary key and mode in their metadata.

`schema()` writes the metadata keys b"primary_key" ("a" or "a,b") and b"mode"
("snapshot" or "append") that the engine reads (the same keys as
src/rill/table/schema.h), and appends the system columns z_insert_ts and
z_update_ts (float64 unix seconds).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import pyarrow as pa

from ._arrow import SYSTEM_COLUMNS, key_list

__all__ = [
    "schema", "extract_primary_key", "extract_mode", "estimate_schema_row_size",
    "estimate_datatype_size",
]

_MODES = {"snapshot": "snapshot", "upsert": "snapshot", "append": "append"}

FieldSpec = Union[Tuple[str, pa.DataType], pa.Field]


def normalize_mode(mode: Optional[str]) -> Optional[str]:
    """Return "snapshot" or "append" for a mode name (alias "upsert"); None stays None."""
    if mode is None:
        return None
    if not isinstance(mode, str):
        raise TypeError(f"mode must be a str, got {type(mode).__name__}")
    key = mode.strip().lower()
    if key not in _MODES:
        raise ValueError(f"mode must be 'snapshot', 'upsert' or 'append', got {mode!r}")
    return _MODES[key]


def schema(
    fields: Union[Sequence[FieldSpec], pa.Schema],
    primary_key: Optional[Union[str, List[str]]] = None,
    mode: Optional[str] = None,
    metadata: Optional[Dict[str, str]] = None,
) -> pa.Schema:
    """Return a pyarrow Schema for a Rill table.

    Args:
        fields: (name, type) tuples, pyarrow Fields, or an existing Schema
            (whose metadata is kept).
        primary_key: the key column, or a list of columns for a composite key.
        mode: "snapshot" (alias "upsert": upsert by key) or "append".
        metadata: extra metadata to embed.

    The system columns z_insert_ts and z_update_ts (float64) are appended when
    missing. ValueError for a key column that is not a field or an unknown
    mode; TypeError for a field that is neither a tuple nor a Field.
    """
    if isinstance(fields, pa.Schema):
        field_list = list(fields)
        meta = {k.decode(): v.decode() for k, v in (fields.metadata or {}).items()}
    else:
        field_list = []
        for item in fields:
            if isinstance(item, pa.Field):
                field_list.append(item)
            elif isinstance(item, tuple) and len(item) == 2:
                field_list.append(pa.field(item[0], item[1]))
            else:
                raise TypeError(
                    f"schema() fields must be (name, type) tuples or pyarrow Fields, got {item!r}"
                )
        meta = {}
    if metadata:
        meta.update({str(k): str(v) for k, v in metadata.items()})
    names = [f.name for f in field_list]
    if primary_key is not None:
        keys = key_list(primary_key)
        for k in keys:
            if k not in names:
                raise ValueError(f"primary_key column {k!r} is not a field of the schema {names}")
        meta["primary_key"] = ",".join(keys)
    if mode is not None:
        meta["mode"] = normalize_mode(mode)
    for column in SYSTEM_COLUMNS:
        if column not in names:
            field_list.append(pa.field(column, pa.float64()))
    return pa.schema(field_list, metadata=meta or None)


def _metadata_value(schema_obj: Optional[pa.Schema], key: bytes) -> Optional[str]:
    if schema_obj is None or not schema_obj.metadata:
        return None
    value = schema_obj.metadata.get(key)
    return None if value is None else value.decode().strip()


def extract_primary_key(schema_obj: Optional[pa.Schema]) -> Optional[Union[str, List[str]]]:
    """Return the primary key recorded in `schema_obj`'s metadata.

    A str for one column, a list of str for a composite key, None if there is none.
    """
    value = _metadata_value(schema_obj, b"primary_key")
    if not value:
        return None
    keys = [k.strip() for k in value.split(",") if k.strip()]
    if not keys:
        return None
    return keys[0] if len(keys) == 1 else keys


def extract_mode(schema_obj: Optional[pa.Schema]) -> str:
    """Return the mode recorded in `schema_obj`'s metadata: "append" or "snapshot" (default)."""
    value = _metadata_value(schema_obj, b"mode")
    if value and value.lower() in _MODES:
        return _MODES[value.lower()]
    return "snapshot"


def estimate_datatype_size(
    data_type: pa.DataType, avg_string_length: int = 32, avg_list_length: int = 5
) -> float:
    """Return the estimated bytes one value of `data_type` takes in an Arrow array.

    Fixed-width types: their byte width; booleans 1/8 byte; strings and
    binaries: a 4-byte offset (8 for the large variants) plus
    `avg_string_length`; lists: the offset plus `avg_list_length` values
    (fixed-size lists: their size, no offset); maps: the offset plus
    `avg_list_length` keys and items; structs: the sum of their fields;
    dictionaries: their index width. Other types count 8 bytes.
    """
    try:
        return float(data_type.byte_width)
    except ValueError:  # not fixed width
        pass
    types = pa.types
    if types.is_boolean(data_type):
        return 0.125
    if types.is_string(data_type) or types.is_binary(data_type):
        return 4.0 + avg_string_length
    if types.is_large_string(data_type) or types.is_large_binary(data_type):
        return 8.0 + avg_string_length

    def child(t: pa.DataType) -> float:
        return estimate_datatype_size(t, avg_string_length, avg_list_length)

    if types.is_list(data_type):
        return 4.0 + avg_list_length * child(data_type.value_type)
    if types.is_large_list(data_type):
        return 8.0 + avg_list_length * child(data_type.value_type)
    if types.is_fixed_size_list(data_type):
        return data_type.list_size * child(data_type.value_type)
    if types.is_map(data_type):
        return 4.0 + avg_list_length * (child(data_type.key_type) + child(data_type.item_type))
    if types.is_struct(data_type):
        return float(sum(child(data_type.field(i).type) for i in range(data_type.num_fields)))
    return 8.0


def estimate_schema_row_size(
    schema_obj: pa.Schema,
    avg_string_length: int = 32,
    avg_list_length: int = 5,
    include_validity_bitmap: bool = True,
) -> float:
    """Return the estimated in-memory bytes of one row of `schema_obj` (fractional).

    The sum over the fields of estimate_datatype_size(), plus 1/8 byte (one
    validity bit) per nullable field when `include_validity_bitmap`. For
    example an int64 and an int32 column with the two float64 system columns
    take 8 + 4 + 8 + 8 = 28 bytes, 28.5 with validity bits. Variable-width
    columns count `avg_string_length` bytes per string and `avg_list_length`
    values per list.
    """
    if not isinstance(schema_obj, pa.Schema):
        raise TypeError(f"expected a pyarrow.Schema, got {type(schema_obj).__name__}")
    if avg_string_length < 0 or avg_list_length < 0:
        raise ValueError("avg_string_length and avg_list_length must be >= 0")
    total = 0.0
    for field in schema_obj:
        total += estimate_datatype_size(field.type, avg_string_length, avg_list_length)
        if include_validity_bitmap and field.nullable:
            total += 0.125
    return total
