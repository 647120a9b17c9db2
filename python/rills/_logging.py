"""C++ log records delivered to Python's logging (private).

Every C++ logger of the engine ("rill.engine", "rill.connector.orders", ...)
writes into a bounded in-memory queue (src/rill/common/logging.h) instead of
stderr. A daemon thread of this module waits on that queue with the GIL
released and re-emits each record through logging.getLogger("rills.<component>")
at the matching level (C++ "trace" is level 5), with the C++ record's time and
thread id (record.rill_thread_id). So applications configure Rill's logs the
Python way: handlers, levels and propagation of the "rills" logger tree.

The C++ side never waits for Python: a log call only appends to the queue
(the oldest records are dropped, and counted, beyond 10,000 queued ones). The
C++ loggers' level follows the most verbose effective level of the "rills"
loggers (but lets warnings and errors through always, so Python's own filter
decides on them at once), re-read by the drain thread about four times a
second, so debug records Python would discard are not even formatted.

rills.flush_logs() delivers what is queued now, on the calling thread (e.g.
in tests, right after engine.step()).
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
from typing import Optional

from . import _core

__all__ = ["flush_logs", "install", "uninstall"]

_QUEUE_CAPACITY = 10_000
_WAIT_SECONDS = 0.25

_lock = threading.Lock()
_deliver = threading.Lock()
_thread: Optional[threading.Thread] = None
_stop = threading.Event()
_level: Optional[int] = None


def _python_name(cpp_name: str) -> str:
    # "rill.engine" -> "rills.engine"
    if cpp_name.startswith("rill."):
        return "rills." + cpp_name[len("rill."):]
    return "rills." + cpp_name


def _emit(records: list) -> None:
    for cpp_name, level, message, created, thread_id in records:
        logger = logging.getLogger(_python_name(cpp_name))
        if not logger.isEnabledFor(level):
            continue
        record = logger.makeRecord(logger.name, level, "(C++)", 0, message, None, None)
        record.created = created
        record.msecs = (created - int(created)) * 1000.0
        record.relativeCreated = (created - logging._startTime) * 1000.0
        record.rill_thread_id = thread_id
        logger.handle(record)


def _sync_level() -> None:
    # The C++ level: the most verbose effective level of any "rills" logger.
    global _level
    levels = [logging.getLogger("rills").getEffectiveLevel()]
    for name, item in list(logging.Logger.manager.loggerDict.items()):
        if name.startswith("rills.") and isinstance(item, logging.Logger):
            levels.append(item.getEffectiveLevel())
    # Warnings and errors are always queued (they are rare), so a level
    # lowered in Python takes effect at once for them; more verbose levels
    # follow Python's within one poll (about 0.25 s).
    level = min(min(levels), logging.WARNING)
    if level != _level:
        _core.set_log_level(level)
        _level = level


def flush_logs() -> None:
    """Deliver the C++ log records queued so far to Python's logging, now, on this thread."""
    with _deliver:  # waits for a batch the drain thread has taken but not yet emitted
        _sync_level()
        _emit(_core.take_log_records(0.0))


def _drain() -> None:
    while not _stop.is_set():
        try:
            # Wait without taking; take and emit only under _deliver, so
            # flush_logs() never returns while records taken here are on their way.
            _core.wait_log_records(_WAIT_SECONDS)
            with _deliver:
                _sync_level()
                _emit(_core.take_log_records(0.0))
        except Exception:  # a failing handler must not end log delivery
            logging.getLogger("rills").exception("delivering C++ log records failed")


def install() -> None:
    """Route the C++ loggers into Python's logging (idempotent; done at `import rills`)."""
    global _thread
    with _lock:
        if _thread is not None:
            return
        _stop.clear()
        _sync_level()
        _core.enable_log_queue(_QUEUE_CAPACITY)
        _thread = threading.Thread(target=_drain, name="rills-log-drain", daemon=True)
        _thread.start()


def uninstall() -> None:
    """Stop the drain thread, deliver what is queued and send C++ logs to stderr again."""
    global _thread
    with _lock:
        thread, _thread = _thread, None
        if thread is None:
            return
        _stop.set()
        _core.wake_log_waiters()
        thread.join(timeout=2.0)
        _core.disable_log_queue()
    try:
        _emit(_core.take_log_records(0.0))
    except Exception:
        pass


# Stop the thread before the interpreter finalizes (a daemon thread returning
# from C++ into a finalizing interpreter would be torn down mid-call).
atexit.register(uninstall)


def _after_fork_in_child() -> None:
    # The drain thread does not survive fork(): start a new one in the child.
    global _thread, _lock
    _lock = threading.Lock()
    if _thread is not None:
        _thread = None
        install()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
