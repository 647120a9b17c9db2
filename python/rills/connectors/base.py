"""BaseConnector: the base of input connectors (subclass it in Python).

The engine holds its connectors in C++. A connector implemented in Python is
held through an adapter that calls its read_batch() every tick; a connector
backed by a C++ object (MemoryConnector) hands that object to the engine
(see BaseConnector._core_connector). connector_of() turns what the engine
holds back into the Python connector.
"""

from __future__ import annotations

import abc
import itertools
import threading
import weakref
from typing import Any, Dict, List, Optional, Union

import pyarrow as pa

from .. import _arrow, _core

__all__ = ["BaseConnector"]

_OVERFLOW = ("drop_oldest", "drop_newest", "error")


def _check_limit(name: str, value: Optional[int]) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int or None, got {type(value).__name__}")
    if value < 0:
        raise ValueError(f"{name} must be >= 0 (0 or None: unlimited), got {value}")
    return value


class BaseConnector(abc.ABC):
    """Base class of connectors. Subclass it and implement read_batch().

    The engine calls read_batch() once per tick on its loop thread, with the
    GIL held; whatever it returns (a pyarrow Table, RecordBatch, list of
    RecordBatches, dict of columns, list of row dicts, or None when nothing
    arrived) is written to `target_table`. An exception raised by read_batch(),
    start() or stop() is logged and recorded as an engine event with its
    traceback; the loop goes on.
    """

    def __init__(
        self,
        target_table: str,
        max_buffer_records: Optional[int] = None,
        on_overflow: str = "drop_oldest",
        name: Optional[str] = None,
    ):
        """Args:
            target_table: the table this connector feeds.
            max_buffer_records: rows a subclass may buffer (None: unlimited).
            on_overflow: "drop_oldest", "drop_newest" or "error" (ValueError otherwise).
            name: unique name within an engine (default: derived from target_table).
        """
        if not isinstance(target_table, str) or not target_table:
            raise ValueError(f"target_table must be a non-empty str, got {target_table!r}")
        _check_limit("max_buffer_records", max_buffer_records)
        if on_overflow not in _OVERFLOW:
            raise ValueError(
                f"on_overflow must be one of {', '.join(_OVERFLOW)}; got {on_overflow!r}"
            )
        self.target_table = target_table
        self.max_buffer_records = max_buffer_records
        self.on_overflow = on_overflow
        self.name = name if name is not None else _default_name(target_table)

    def start(self) -> None:
        """Begin reading (threads, sockets). Called when added to an engine. Default: nothing."""

    def stop(self) -> None:
        """Stop reading and release resources. Default: nothing."""

    @abc.abstractmethod
    def read_batch(self) -> Optional[Union[pa.Table, pa.RecordBatch, List[pa.RecordBatch]]]:
        """Return the rows that arrived since the last call, or None."""

    def _core_connector(self) -> Optional[Any]:
        """The C++ connector (a rills._core.Connector) the engine should hold, or
        None to have the engine call this object's read_batch() every tick.

        Connectors backed by C++ override this and call _register_core() on
        the object they return, so that engine.connectors gives them back.
        """
        return None

    def _rill_poll(self) -> Optional[pa.Table]:
        """Called by the engine's tick: read_batch() as a pyarrow Table (or None)."""
        data = self.read_batch()
        if data is None:
            return None
        table = _arrow.to_table(data, getattr(self, "schema", None), what="read_batch()")
        if table is None or table.num_rows == 0:
            return None
        return table

    def __repr__(self) -> str:
        return f"<{type(self).__name__}(name={self.name!r}, target_table={self.target_table!r})>"


_names_lock = threading.Lock()
_name_counters: Dict[str, "itertools.count[int]"] = {}


def _default_name(target_table: str) -> str:
    # Several connectors may feed one table; engine connector names must be unique.
    with _names_lock:
        counter = _name_counters.setdefault(target_table, itertools.count(1))
        n = next(counter)
    return target_table if n == 1 else f"{target_table}#{n}"


# C++ connectors (by address) -> their Python wrapper, while the wrapper lives.
_wrappers: "weakref.WeakValueDictionary[int, BaseConnector]" = weakref.WeakValueDictionary()
# C++ connector type -> function(core) making a Python view of it, for a
# connector whose wrapper is gone (see register_view_type).
_view_types: Dict[type, Any] = {}


def _register_core(core: Any, wrapper: BaseConnector) -> None:
    """Remember that `wrapper` is the Python face of the C++ connector `core`."""
    _wrappers[core.address] = wrapper


def register_view_type(core_type: type, make_view: Any) -> None:
    """Let connector_of() rebuild a Python connector of `core_type` by `make_view(core)`."""
    _view_types[core_type] = make_view


def connector_of(core: Any) -> BaseConnector:
    """Return the Python connector of a C++ connector held by an engine."""
    if isinstance(core, _core.PyConnector):
        return core.py_object
    wrapper = _wrappers.get(core.address)
    if wrapper is not None:
        return wrapper
    for core_type, make_view in _view_types.items():
        if isinstance(core, core_type):
            return make_view(core)
    return _CoreConnectorView(core)


class _CoreConnectorView(BaseConnector):
    """A C++ connector of a kind Python has no class for: name, target and stats."""

    def __init__(self, core: Any):
        self.target_table = core.target_table
        self.max_buffer_records = None
        self.on_overflow = "drop_oldest"
        self.name = core.name
        self._core = core

    def _core_connector(self) -> Any:
        return self._core

    def read_batch(self) -> None:
        """The engine drains C++ connectors itself."""
        return None

    def stats(self) -> Dict[str, int]:
        """The connector's counters."""
        return self._core.stats()
