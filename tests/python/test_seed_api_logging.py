"""C++ log records reach Python's logging as "rills.<component>" (issue 14)."""

import logging
import threading
import time

import pyarrow as pa
import pytest

import rills
from rills import ScheduledSQLTask

from conftest import wait_until


def _failing_task(engine, name="bad_task"):
    engine.add_sql_task(ScheduledSQLTask(name, "SELECT * FROM missing_table", "out",
                                         interval_seconds=0.0))


def test_task_error_reaches_the_components_python_logger(engine, caplog):
    caplog.set_level(logging.DEBUG, logger="rills")
    _failing_task(engine)
    engine.step()
    rills.flush_logs()
    records = [r for r in caplog.records if r.name == "rills.bad_task"]
    assert records, [r.name for r in caplog.records]
    assert records[0].levelno == logging.ERROR
    assert "missing_table" in records[0].getMessage()
    assert records[0].rill_thread_id > 0
    assert abs(records[0].created - time.time()) < 60


def test_python_levels_filter_cpp_records(engine, caplog):
    caplog.set_level(logging.CRITICAL, logger="rills")
    _failing_task(engine, "quiet_task")
    engine.step()
    rills.flush_logs()
    assert not [r for r in caplog.records if r.name == "rills.quiet_task"]
    # A handler on the component's own logger, configured the Python way.
    caplog.set_level(logging.ERROR, logger="rills")
    seen = []
    handler = logging.Handler()
    handler.emit = seen.append
    logging.getLogger("rills.loud_task").addHandler(handler)
    try:
        _failing_task(engine, "loud_task")
        engine.step()
        rills.flush_logs()
    finally:
        logging.getLogger("rills.loud_task").removeHandler(handler)
    assert seen and all(r.levelno == logging.ERROR for r in seen)


def test_records_from_the_tick_thread_arrive_without_flushing(make_engine, caplog):
    caplog.set_level(logging.ERROR, logger="rills")
    engine = make_engine(trigger_interval_ms=10, metrics_path=None)
    _failing_task(engine, "loop_task")
    engine.start()
    wait_until(lambda: any(r.name == "rills.loop_task" for r in caplog.records), timeout=10,
               what="a record delivered by the drain thread")


def test_logging_from_the_tick_thread_while_python_holds_the_gil_does_not_deadlock(make_engine, caplog):
    # The tick thread logs (failing task every tick) and takes the GIL for a
    # subscriber, while this thread keeps the GIL busy and emits Python logs.
    caplog.set_level(logging.ERROR, logger="rills")
    engine = make_engine(trigger_interval_ms=1, metrics_path=None)
    _failing_task(engine, "busy_task")
    table = engine.register_table("t", schema=pa.schema([("a", pa.int64())]), primary_key="a")
    seen = []
    engine.subscribe("t", lambda name, tbl: (seen.append(tbl.num_rows),
                                             logging.getLogger("rills.user").error("cb")))
    engine.start()
    deadline = time.monotonic() + 1.0
    i = 0
    while time.monotonic() < deadline:
        table.upsert(pa.table({"a": [i]}))
        engine.query_sql("SELECT COUNT(*) FROM t")
        logging.getLogger("rills.user").error("main %d", i)
        i += 1
    done = threading.Event()
    threading.Thread(target=lambda: (engine.stop(), done.set()), daemon=True).start()
    assert done.wait(10), "stop() hung"
    rills.flush_logs()
    assert any(r.name == "rills.busy_task" for r in caplog.records)
    assert seen


def test_a_forked_child_still_delivers_cpp_logs(tmp_path):
    import os
    import subprocess
    import sys
    script = (
        "import logging, os, sys, time\n"
        "import rills\n"
        "from rills import RillEngine, ScheduledSQLTask\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    got = []\n"
        "    h = logging.Handler(); h.emit = got.append\n"
        "    logging.getLogger('rills').addHandler(h)\n"
        "    e = RillEngine(metrics_path=None)\n"
        "    e.add_sql_task(ScheduledSQLTask('child_task', 'SELECT * FROM nope', 'o', 0.0))\n"
        "    e.step()\n"
        "    deadline = time.time() + 10\n"
        "    while time.time() < deadline and not any(r.name == 'rills.child_task' for r in got):\n"
        "        time.sleep(0.01)\n"
        "    os._exit(0 if any(r.name == 'rills.child_task' for r in got) else 3)\n"
        "_, status = os.waitpid(pid, 0)\n"
        "sys.exit(os.waitstatus_to_exitcode(status))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
