"""BaseConnector: the base of input connectors."""

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
    def _core_connector(self) -> Optional[Any]:
        """The C++ connector the engine holds for this one, or None (read_batch() is called)."""

def register_view_type(core_type: type, make_view: Any) -> None:
    """Let engine.connectors rebuild a Python connector of a C++ connector type."""

def connector_of(core: Any) -> BaseConnector:
    """The Python connector of a C++ connector held by an engine."""
