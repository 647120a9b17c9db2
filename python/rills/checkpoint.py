"""Checkpoints: the engine's tables, connector positions and KPI/rule
definitions on disk, written every interval and restored at start.

The work is done by the C++ `rill::Checkpointer` (src/rill/engine/checkpoint.h):
one checkpoint is captured at a tick boundary (tables pinned at their current
immutable versions, connector positions as of the same tick), written by its
own thread into a temporary directory, fsynced and renamed into place, so a
crash never leaves a partial checkpoint and ticks never wait for the disk.
See docs/checkpoints.md for the layout and the replay guarantees.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Union

from . import _core

if TYPE_CHECKING:
    from .engine import RillEngine

__all__ = ["Checkpointer"]

_log = logging.getLogger("rills.checkpoint")


class Checkpointer:
    """Persistent state snapshots of a RillEngine (the seed's `rills.checkpoint.Checkpointer`).

    `RillEngine(checkpoint_dir=..., checkpoint_interval_seconds=...)` makes one
    (`engine.checkpointer`): it checkpoints every interval while the engine
    runs and once more on stop(), and restores the newest checkpoint on
    start(). A Checkpointer made by hand works on the engine passed to
    save_snapshots()/restore_snapshots().

    Times (`current_time`, `last_checkpoint_time`) are unix seconds, the
    engine's clock.
    """

    def __init__(
        self,
        checkpoint_dir: Union[str, Path],
        interval_seconds: float = 60.0,
        keep: int = 3,
        format: str = "parquet",
        table_formats: Optional[Dict[str, str]] = None,
        sync: bool = True,
    ):
        """Args:
            checkpoint_dir: directory of the checkpoints (created if missing).
            interval_seconds: seconds between periodic checkpoints (> 0).
            keep: complete checkpoints kept on disk (>= 1).
            format: table file format, "parquet" or "arrow" (Arrow IPC: faster).
            table_formats: per-table formats overriding `format`.
            sync: fsync files and directories (leave on outside benchmarks).
        """
        if interval_seconds is None or not float(interval_seconds) > 0:
            raise ValueError(f"interval_seconds must be > 0, got {interval_seconds!r}")
        if int(keep) < 1:
            raise ValueError(f"keep must be >= 1, got {keep!r}")
        for f in [format, *(table_formats or {}).values()]:
            if f not in ("parquet", "arrow", "ipc", "feather"):
                raise ValueError(f"unknown checkpoint format {f!r}: expected 'parquet' or 'arrow'")
        self.checkpoint_dir = Path(checkpoint_dir)
        self.interval_seconds = float(interval_seconds)
        self.keep = int(keep)
        self.format = format
        self.table_formats = dict(table_formats or {})
        self.sync = bool(sync)
        self._last_time = 0.0
        self._engine_core: Any = None

    # The engine binding ----------------------------------------------------------

    def _bind(self, engine: "RillEngine") -> Any:
        core = engine._core
        if self._engine_core is not core or not _core.checkpoint_exists(core):
            _core.checkpoint_open(
                core, str(self.checkpoint_dir), self.interval_seconds, self.keep,
                self.format, self.table_formats, self.sync,
            )
            self._engine_core = core
        if core.metrics_open:
            _core.checkpoint_attach_metrics(core)
        return core

    # The seed's API ---------------------------------------------------------------

    @property
    def last_checkpoint_time(self) -> float:
        """Unix time of the last checkpoint taken (0.0 before the first)."""
        last = self._last_time
        core = self._engine_core
        if core is not None and not core.closed and _core.checkpoint_exists(core):
            last = max(last, _core.checkpoint_last_time(core))
        return last

    @last_checkpoint_time.setter
    def last_checkpoint_time(self, value: float) -> None:
        self._last_time = float(value)

    def is_due(self, current_time: float) -> bool:
        """True if `interval_seconds` have passed since last_checkpoint_time."""
        return (float(current_time) - self.last_checkpoint_time) >= self.interval_seconds

    def save_snapshots(self, engine: "RillEngine", current_time: Optional[float] = None) -> List[str]:
        """Write one checkpoint of `engine` now (waiting for a running tick to end).

        Returns the names of the tables checkpointed (every user table,
        empty ones included). OSError when the disk write fails.
        """
        info = _core.checkpoint_save(self._bind(engine))
        self._last_time = time.time() if current_time is None else float(current_time)
        return list(info["tables"])

    def restore_snapshots(self, engine: "RillEngine") -> List[str]:
        """Restore the newest complete checkpoint into `engine`; return the restored table names.

        Tables the engine lacks are created with the stored schema, primary
        key, mode and retention; existing ones have their rows replaced.
        Connectors already added resume from their stored positions; KPI
        queries and alert rules are added back. [] when there is no checkpoint.
        """
        info = _core.checkpoint_restore(self._bind(engine))
        return [] if info is None else list(info["tables"])

    # Beyond the seed -------------------------------------------------------------------

    def checkpoints(self, engine: "RillEngine") -> List[Dict[str, Any]]:
        """The complete checkpoints on disk, oldest first (id, path, created_at, tables, rows)."""
        return list(_core.checkpoint_list(self._bind(engine)))

    def stats(self, engine: "RillEngine") -> Dict[str, Any]:
        """Counters: written, failed, skipped_busy, last_write_seconds, last_error, last."""
        return dict(_core.checkpoint_stats(self._bind(engine)))

    def flush(self, engine: "RillEngine") -> None:
        """Wait for a periodic checkpoint being written; raise its error if it failed."""
        _core.checkpoint_flush(self._bind(engine))

    def __repr__(self) -> str:
        return (
            f"<Checkpointer(checkpoint_dir='{self.checkpoint_dir}', "
            f"interval_seconds={self.interval_seconds})>"
        )


# Hooks of RillEngine (engine.py) ------------------------------------------------------


def engine_checkpointer(
    engine: "RillEngine", checkpoint_dir: Optional[Union[str, Path]], interval_seconds: float
) -> Optional[Checkpointer]:
    """The checkpointer of a new engine, or None without checkpoint_dir."""
    if checkpoint_dir is None:
        return None
    checkpointer = Checkpointer(checkpoint_dir, interval_seconds)
    checkpointer._bind(engine)
    return checkpointer


def on_start(engine: "RillEngine") -> None:
    """Restore the newest checkpoint, then checkpoint periodically (before the loop starts)."""
    checkpointer = getattr(engine, "checkpointer", None)
    if checkpointer is None:
        return
    core = checkpointer._bind(engine)
    if _core.checkpoint_started(core):
        return
    checkpointer.restore_snapshots(engine)
    _core.checkpoint_start(core)


def on_stop(engine: "RillEngine") -> None:
    """After the loop stopped: end the periodic checkpoints and write a final one."""
    checkpointer = getattr(engine, "checkpointer", None)
    if checkpointer is None or engine._core.closed:
        return
    core = checkpointer._bind(engine)
    if not _core.checkpoint_started(core):
        return
    _core.checkpoint_stop(core)
    try:
        checkpointer.save_snapshots(engine)
    except ValueError as error:  # stop() from a callback inside a tick
        _log.warning("no final checkpoint: %s", error)
    except OSError as error:  # disk full, read-only: counted and alerted by the engine
        _log.error("the final checkpoint failed (the earlier ones are kept): %s", error)
