"""PostgresCDCConnector: a PostgreSQL table mirrored by logical replication
(``rills.connectors.postgres_cdc``); docs/postgres_cdc.md."""

from __future__ import annotations

from typing import Any, Dict, Optional

from .. import _core
from .._io_connectors import _ReaderConnector
from .base import BaseConnector, _check_limit, _register_core

__all__ = ["PostgresCDCConnector"]


class PostgresCDCConnector(_ReaderConnector):
    """The rows of a PostgreSQL table, then its changes, read in C++ by libpq's
    logical replication protocol with the built-in ``pgoutput`` plugin.

    On its first start (and whenever no checkpoint holds its position) the
    connector takes a consistent snapshot of ``table`` (``COPY`` inside the
    exported snapshot of the replication slot's creation), then streams the
    slot: each source transaction's inserts, updates, deletes and truncates are
    applied to ``target_table`` in the same tick. The target table should be
    keyed by the source's primary key (deletes carry the key columns).

    With a checkpoint directory the slot's confirmed position only advances to
    what a complete checkpoint holds, so a crash loses nothing and applies
    nothing twice; without one it re-snapshots on start.

    Args:
        target_table: the Rill table fed.
        dsn: a libpq connection string or URI (the user needs the REPLICATION
            attribute, and CREATE on the database for the default publication).
        table: the source table, ``"name"`` or ``"schema.name"``.
        slot_name: the logical replication slot (lower case, digits, ``_``).
        publication: the publication to read; None: ``"rill_<slot_name>"``,
            created ``FOR TABLE <table>`` when missing.
        snapshot: take the initial snapshot (False: stream the slot from its
            confirmed position, creating it if missing).
        numeric_as: ``"decimal"`` (numeric(p, s) -> decimal128(p, s),
            unconstrained numeric -> decimal128(38, 9)) or ``"float64"``.
        max_buffer_records: rows buffered before the reader waits (a
            transaction is never split).
        status_interval_ms: standby status updates and slot lag queries.
        lag_alert_bytes: an alert when the slot's lag passes this (0: never).
        name: unique name within an engine (default: derived from target_table).
    """

    def __init__(
        self,
        target_table: str,
        dsn: str,
        table: str,
        slot_name: str,
        publication: Optional[str] = None,
        snapshot: bool = True,
        numeric_as: str = "decimal",
        max_buffer_records: Optional[int] = None,
        status_interval_ms: int = 1000,
        lag_alert_bytes: int = 1 << 30,
        name: Optional[str] = None,
    ):
        BaseConnector.__init__(self, target_table, max_buffer_records, "error", name)
        for arg, value in (("dsn", dsn), ("table", table), ("slot_name", slot_name)):
            if not isinstance(value, str) or not value:
                raise ValueError(f"{arg} must be a non-empty string, got {value!r}")
        if numeric_as not in ("decimal", "float64"):
            raise ValueError(f"numeric_as must be 'decimal' or 'float64', got {numeric_as!r}")
        self.dsn = dsn
        self.table = table
        self.slot_name = slot_name
        self.snapshot = bool(snapshot)
        self.numeric_as = numeric_as
        self._core = _core.PostgresCDCConnector.make(
            target_table, dsn, table, slot_name, publication or "", bool(snapshot), numeric_as,
            _check_limit("max_buffer_records", max_buffer_records), int(status_interval_ms),
            int(lag_alert_bytes), self.name)
        _register_core(self._core, self)

    @property
    def publication(self) -> str:
        """The publication read (``"rill_<slot_name>"`` by default)."""
        return self._core.publication

    @property
    def confirmed_lsn(self) -> int:
        """The LSN the slot may confirm (sent with the standby status updates)."""
        return self._core.confirmed_lsn

    def position(self) -> str:
        """The position document as of the last poll (what a checkpoint stores)."""
        return self._core.save_position()

    def stats(self) -> Dict[str, Any]:
        """Counters, plus ``lag_bytes`` (slot lag) and the snapshot's progress
        (``snapshot_rows``, ``snapshot_rows_total``, ``snapshot_rows_per_s``,
        ``snapshot_eta_seconds``, ``snapshot_done``)."""
        return self._core.stats()
