"""RetentionPolicy: how long rows stay in a table."""

from typing import Optional

import pyarrow as pa

class RetentionPolicy:
    """Row limits (count and/or age on time_column) enforced on every write and tick."""

    max_rows: Optional[int]
    max_age_seconds: Optional[float]
    time_column: str
    def __init__(
        self,
        max_rows: Optional[int] = None,
        max_age_seconds: Optional[float] = None,
        time_column: Optional[str] = "z_insert_ts",
    ) -> None:
        """Create a policy; ValueError for negative limits or an empty time column."""
    @property
    def enabled(self) -> bool:
        """True if the policy limits anything."""
    def apply(self, table: Optional[pa.Table], current_time: Optional[float] = None) -> Optional[pa.Table]:
        """The rows of `table` this policy keeps at current_time (unix seconds)."""
