"""RetentionPolicy: how long rows stay in a table."""

from __future__ import annotations

import time
from typing import Optional

import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["RetentionPolicy"]


class RetentionPolicy:
    """Limits on a table's rows, enforced by the engine on every write and tick.

    Rows beyond `max_rows` (oldest writes first) or older than
    `max_age_seconds` (measured on `time_column`, z_insert_ts by default; float
    or integer unix seconds, timestamps and dates work) are removed. Append
    tables must set at least one of the two limits.
    """

    def __init__(
        self,
        max_rows: Optional[int] = None,
        max_age_seconds: Optional[float] = None,
        time_column: Optional[str] = "z_insert_ts",
    ):
        """Create a policy. ValueError for negative limits or an empty time column."""
        if max_rows is not None:
            if isinstance(max_rows, bool) or not isinstance(max_rows, int):
                raise TypeError(f"max_rows must be an int, got {type(max_rows).__name__}")
            if max_rows < 0:
                raise ValueError(f"max_rows must be >= 0, got {max_rows}")
        if max_age_seconds is not None:
            max_age_seconds = float(max_age_seconds)
            if max_age_seconds < 0:
                raise ValueError(f"max_age_seconds must be >= 0, got {max_age_seconds}")
        if time_column is None:
            time_column = "z_insert_ts"
        if not isinstance(time_column, str) or not time_column:
            raise ValueError("time_column must be a non-empty column name")
        self.max_rows = max_rows
        self.max_age_seconds = max_age_seconds
        self.time_column = time_column

    @property
    def enabled(self) -> bool:
        """True if the policy limits anything."""
        return self.max_rows is not None or self.max_age_seconds is not None

    def apply(self, table: Optional[pa.Table], current_time: Optional[float] = None) -> Optional[pa.Table]:
        """Return the rows of `table` this policy keeps at `current_time` (unix seconds, default now).

        The same rule the engine applies to live tables, on any pyarrow
        table: first rows whose `time_column` is older than
        current_time - max_age_seconds are dropped (a float or integer column
        holds unix seconds; timestamp columns are compared in their unit and
        time zone, date columns by day), then only the last `max_rows` rows
        are kept. Rows with a null time never expire. A table
        without `time_column` is not limited by age. None and empty tables are
        returned as they are. TypeError for a time column of another type.
        """
        if table is None or table.num_rows == 0:
            return table
        if isinstance(table, pa.RecordBatch):
            table = pa.Table.from_batches([table])
        if not isinstance(table, pa.Table):
            raise TypeError(f"apply() takes a pyarrow Table, got {type(table).__name__}")
        now = time.time() if current_time is None else float(current_time)
        if self.max_age_seconds is not None and self.time_column in table.column_names:
            column = table.column(self.time_column)
            cutoff = _cutoff_scalar(column.type, now - self.max_age_seconds, self.time_column)
            # Rows with a null time never expire (the engine's rule).
            table = table.filter(pc.fill_null(pc.greater_equal(column, cutoff), True))
        if self.max_rows is not None and table.num_rows > self.max_rows:
            table = table.slice(table.num_rows - self.max_rows, self.max_rows)
        return table

    def _core_args(self) -> dict:
        return {
            "max_rows": self.max_rows,
            "max_age_seconds": self.max_age_seconds,
            "time_column": self.time_column,
        }

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RetentionPolicy):
            return NotImplemented
        return (self.max_rows, self.max_age_seconds, self.time_column) == (
            other.max_rows,
            other.max_age_seconds,
            other.time_column,
        )

    def __repr__(self) -> str:
        return (
            f"RetentionPolicy(max_rows={self.max_rows}, max_age_seconds={self.max_age_seconds}, "
            f"time_column={self.time_column!r})"
        )


_UNIT_PER_SECOND = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}


def _cutoff_scalar(type_: pa.DataType, cutoff: float, column: str) -> pa.Scalar:
    # The oldest time kept, as a scalar of the time column's type.
    if pa.types.is_timestamp(type_):
        return pa.scalar(int(cutoff * _UNIT_PER_SECOND[type_.unit]), type=type_)
    if pa.types.is_date32(type_):
        return pa.scalar(int(cutoff // 86400), type=pa.int32()).cast(type_)
    if pa.types.is_date64(type_):
        return pa.scalar(int(cutoff * 1000), type=pa.int64()).cast(type_)
    if pa.types.is_integer(type_):
        # Integer seconds: the cutoff truncated, as the seed compares them.
        return pa.scalar(int(cutoff), type=pa.int64())
    if pa.types.is_floating(type_) or pa.types.is_decimal(type_):
        return pa.scalar(float(cutoff), type=pa.float64())
    raise TypeError(
        f"retention time column {column!r} has type {type_}; "
        "use float or integer unix seconds, a timestamp or a date"
    )
