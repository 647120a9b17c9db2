"""Relational operations on pyarrow tables: join, filter, aggregate.

Each function takes and returns pyarrow tables and runs in Arrow's C++
kernels (Acero hash join and hash aggregation, the filter kernel); nothing is
looped over in Python.
"""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple, Union

import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["join_tables", "filter_table", "aggregate_table", "JOIN_TYPES"]

Keys = Union[str, List[str]]

#: The join types pyarrow's Table.join accepts.
JOIN_TYPES = (
    "inner", "left outer", "right outer", "full outer",
    "left semi", "right semi", "left anti", "right anti",
)

# The right side's system columns: a joined row keeps the left side's stamps.
_RIGHT_SYSTEM_COLUMNS = ("z_insert_ts_right", "z_update_ts_right")


def _check_table(value: object, what: str) -> pa.Table:
    if isinstance(value, pa.RecordBatch):
        return pa.Table.from_batches([value])
    if not isinstance(value, pa.Table):
        raise TypeError(f"{what} must be a pyarrow Table, got {type(value).__name__}")
    return value


def join_tables(
    left: pa.Table,
    right: pa.Table,
    keys: Keys,
    join_type: str = "inner",
    right_keys: Optional[Keys] = None,
    left_suffix: str = "",
    right_suffix: str = "_right",
) -> pa.Table:
    """Return the relational join of `left` and `right` on `keys`.

    Args:
        left, right: pyarrow Tables (RecordBatches accepted).
        keys: key column(s) of `left`.
        join_type: one of JOIN_TYPES ("inner", "left outer", "right outer",
            "full outer", "left semi", "right semi", "left anti", "right anti").
        right_keys: key column(s) of `right` when named differently.
        left_suffix, right_suffix: appended to non-key column names present on
            both sides.

    The key columns appear once (coalesced for outer joins, as pyarrow does).
    The right side's z_insert_ts/z_update_ts are dropped, so a join of two
    Rill tables keeps the left rows' stamps. Row order is not defined.
    ValueError for an unknown join type; pyarrow's errors for unknown columns.
    """
    left = _check_table(left, "left")
    right = _check_table(right, "right")
    if join_type not in JOIN_TYPES:
        raise ValueError(f"join_type must be one of {', '.join(JOIN_TYPES)}; got {join_type!r}")
    joined = left.join(
        right,
        keys=keys,
        right_keys=right_keys,
        join_type=join_type,
        left_suffix=left_suffix,
        right_suffix=right_suffix,
        use_threads=True,
    )
    drop = [c for c in joined.column_names if c in _RIGHT_SYSTEM_COLUMNS]
    return joined.drop_columns(drop) if drop else joined


def filter_table(
    table: pa.Table,
    mask_or_expression: Union[pa.Array, pa.ChunkedArray, pc.Expression],
) -> pa.Table:
    """Return the rows of `table` where the boolean mask (or compute expression) is true.

    Nulls in a mask drop the row. ValueError when the mask's length differs.
    """
    table = _check_table(table, "table")
    return table.filter(mask_or_expression)


def aggregate_table(
    table: pa.Table,
    group_by: Optional[Keys],
    aggregations: Sequence[Tuple[str, str]],
) -> pa.Table:
    """Group `table` by `group_by` (None or [] for one global row) and aggregate.

    `aggregations` are (column, function) pairs with pyarrow's hash aggregate
    names ("sum", "count", "mean", "min", "max", "count_distinct", ...); as
    pyarrow orders them, the "<column>_<function>" columns come first, then
    the group columns.
    """
    table = _check_table(table, "table")
    if isinstance(group_by, str):
        group_by = [group_by]
    return table.group_by(list(group_by or [])).aggregate(list(aggregations))
