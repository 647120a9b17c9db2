"""Input connectors."""

import abc
from typing import Any, Dict, List, Optional, Union

import pyarrow as pa

PushData = Union[pa.Table, pa.RecordBatch, List[pa.RecordBatch], Dict[str, Any], List[Dict[str, Any]]]

class BaseConnector(abc.ABC):
    """Base of connectors; subclasses implement read_batch(), called once per tick."""

    target_table: str
    max_buffer_records: Optional[int]
    on_overflow: str
    name: str
    def __init__(
        self,
        target_table: str,
        max_buffer_records: Optional[int] = None,
        on_overflow: str = "drop_oldest",
        name: Optional[str] = None,
    ) -> None:
        """ValueError for an unknown on_overflow or a negative limit."""
    def start(self) -> None:
        """Begin reading; called when added to an engine."""
    def stop(self) -> None:
        """Stop reading."""
    @abc.abstractmethod
    def read_batch(self) -> Optional[Union[pa.Table, pa.RecordBatch, List[pa.RecordBatch]]]:
        """Return the rows that arrived since the last call, or None."""

class MemoryConnector(BaseConnector):
    """A connector fed by push() from any thread, buffered in C++ with backpressure."""

    schema: Optional[pa.Schema]
    max_buffer_bytes: Optional[int]
    def __init__(
        self,
        target_table: str,
        schema: Optional[pa.Schema] = None,
        max_buffer_records: Optional[int] = None,
        on_overflow: str = "drop_oldest",
        max_buffer_bytes: Optional[int] = None,
        name: Optional[str] = None,
    ) -> None:
        """on_overflow: "drop_oldest", "drop_newest" or "error"."""
    def push(self, data: PushData) -> None:
        """Buffer rows for the next tick; BufferError when on_overflow="error" refuses them."""
    def read_batch(self) -> Optional[pa.Table]:
        """Take everything buffered, or None."""
    def stats(self) -> Dict[str, int]:
        """Buffer counters."""
    @property
    def buffered_records(self) -> int:
        """Rows waiting for the next tick."""
