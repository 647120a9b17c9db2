"""RillTable: a live table in C++ memory, and upsert_table()."""

from typing import Any, Callable, List, Optional, Union

import pyarrow as pa

from .retention import RetentionPolicy

Subscriber = Callable[[str, pa.Table], None]

class RillTable:
    """A live table (upsert by key in snapshot mode, append otherwise), owned by the C++ engine."""

    def __init__(
        self,
        name: str,
        schema: Optional[pa.Schema] = None,
        primary_key: Optional[Union[str, List[str]]] = None,
        retention_policy: Optional[RetentionPolicy] = None,
        mode: Optional[str] = None,
    ) -> None:
        """Create a standalone table; ValueError for an append table without retention."""
    @property
    def name(self) -> str:
        """The table's name."""
    @property
    def schema(self) -> Optional[pa.Schema]:
        """The full schema (system columns last); None before the first write without a schema."""
    @property
    def primary_key(self) -> Optional[Union[str, List[str]]]:
        """None, a column name, or a list of names."""
    @property
    def mode(self) -> str:
        """"snapshot" or "append"."""
    @property
    def retention_policy(self) -> Optional[RetentionPolicy]:
        """The retention policy, if any."""
    @property
    def num_rows(self) -> int:
        """Number of live rows."""
    @property
    def num_columns(self) -> int:
        """Number of columns, system columns included."""
    @property
    def num_chunks(self) -> int:
        """Number of Arrow chunks."""
    @property
    def version(self) -> int:
        """Version of the published state."""
    def upsert(
        self, batch_or_table: Any, promote_options: str = "default", current_time: Optional[float] = None
    ) -> pa.Table:
        """Write rows (upsert or append); return the new state."""
    def delete(self, keys: Any, current_time: Optional[float] = None) -> Optional[pa.Table]:
        """Delete the rows with these keys (keyed tables); return the new state."""
    def replace_state(self, new_table: Any, current_time: Optional[float] = None) -> pa.Table:
        """Replace all rows; return the new state."""
    def apply_retention(self, current_time: Optional[float] = None) -> Optional[pa.Table]:
        """Remove expired rows now; return the state."""
    def compact(self, max_chunks: int = 32) -> Optional[pa.Table]:
        """Merge chunks beyond max_chunks; return the state."""
    def to_arrow(self) -> Optional[pa.Table]:
        """Return the current rows, sharing the engine's buffers."""
    def estimate_row_size(self, avg_string_length: int = 32, avg_list_length: int = 5) -> Optional[float]:
        """Estimated bytes per row."""
    def estimate_records_capacity(
        self,
        memory_budget_bytes: int,
        safety_factor: float = 0.75,
        avg_string_length: int = 32,
        avg_list_length: int = 5,
    ) -> Optional[int]:
        """Rows that fit in memory_budget_bytes * safety_factor."""
    def subscribe(self, callback: Subscriber) -> None:
        """Call callback(table_name, table) with every new state."""
    def unsubscribe(self, callback: Subscriber) -> None:
        """Stop calling callback."""

def upsert_table(
    old_table: Optional[Any], new_table: Any, primary_key: Optional[Union[str, List[str]]] = None,
    promote_options: str = "default", current_time: Optional[float] = None
) -> pa.Table:
    """Return new_table upserted into old_table by primary_key (append without a key)."""
