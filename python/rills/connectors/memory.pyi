"""MemoryConnector: rows pushed from application code, buffered in C++."""

from typing import Any, Dict, List, Optional, Union

import pyarrow as pa

from .base import BaseConnector, PushData

class MemoryConnector(BaseConnector):
    """A connector fed by push() from any thread, buffered in C++ with backpressure."""

    schema: Optional[pa.Schema]
    max_buffer_bytes: Optional[int]
    op_column: Optional[str]
    def __init__(
        self,
        target_table: str,
        schema: Optional[pa.Schema] = None,
        max_buffer_records: Optional[int] = None,
        on_overflow: str = "drop_oldest",
        max_buffer_bytes: Optional[int] = None,
        name: Optional[str] = None,
        op_column: Optional[str] = None,
    ) -> None:
        """on_overflow: "drop_oldest", "drop_newest" or "error"; op_column: per-row operation."""
    def push(self, data: PushData) -> None:
        """Buffer rows for the next tick; BufferError when on_overflow="error" refuses them."""
    def delete(self, keys: Any) -> None:
        """Buffer deletes of these keys for the next tick (keyed target tables)."""
    def read_batch(self) -> Optional[pa.Table]:
        """Take everything buffered, or None."""
    def stats(self) -> Dict[str, int]:
        """Buffer counters."""
    @property
    def buffered_records(self) -> int:
        """Rows waiting for the next tick."""
