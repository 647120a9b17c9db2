"""RetentionPolicy: how long rows stay in a table."""

from __future__ import annotations

from typing import Optional

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
