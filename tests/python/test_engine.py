"""Engine step, callbacks, start/stop lifecycle, errors in callbacks, shutdown."""

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pyarrow as pa
import pytest

from rills import BaseConnector, MemoryConnector, RillEngine


def test_step_and_callbacks(engine):
    engine.register_table("events", primary_key="event_id")
    seen = []
    engine.subscribe("events", lambda name, table: seen.append((name, table.num_rows)))
    c = MemoryConnector(target_table="events")
    engine.add_connector(c)
    c.push({"event_id": [1, 2], "type": ["click", "view"]})
    assert engine.step() > 0.0  # the tick's measured latency, in seconds
    assert seen == [("events", 2)]
    c.push({"event_id": [2, 3], "type": ["view_updated", "purchase"]})
    engine.step()
    assert seen[-1] == ("events", 3)
    assert engine.get_table("events").num_rows == 3
    engine.step()  # nothing new: no callback
    assert len(seen) == 2


def test_start_stop_loop(make_engine):
    engine = make_engine(trigger_interval_ms=50)
    c = MemoryConnector(target_table="live_tbl")
    engine.add_connector(c)
    engine.start()
    try:
        assert engine.running
        c.push({"id": [10, 20]})
        deadline = time.time() + 5
        while engine.get_table("live_tbl") is None or engine.get_table("live_tbl").num_rows < 2:
            assert time.time() < deadline
            time.sleep(0.02)
    finally:
        engine.stop()
    assert not engine.running
    engine.stop()  # twice is fine
    engine.start()
    engine.stop()
    engine.close()
    with pytest.raises(RuntimeError, match="closed"):
        engine.step()


def test_subscriber_exception_is_recorded_and_loop_continues(engine):
    def bad(name, table):
        raise ValueError("subscriber exploded")

    engine.subscribe("t", bad)
    good = []
    engine.subscribe("t", lambda n, t: good.append(t.num_rows))
    c = MemoryConnector("t")
    engine.add_connector(c)
    c.push({"v": [1]})
    engine.step()
    c.push({"v": [2]})
    engine.step()
    assert good == [1, 2]
    events = [e for e in engine.recent_events() if "subscriber exploded" in e["message"]]
    assert len(events) == 2
    assert "Traceback" in events[0]["detail"] and "bad" in events[0]["detail"]


class FlakyConnector(BaseConnector):
    def __init__(self):
        super().__init__("flaky")
        self.calls = 0
        self.started = self.stopped = False

    def start(self):
        self.started = True

    def stop(self):
        self.stopped = True

    def read_batch(self):
        self.calls += 1
        if self.calls == 2:
            raise OSError("source went away")
        return pa.table({"n": [self.calls]})


def test_python_connector_errors_do_not_stop_the_loop(engine):
    conn = FlakyConnector()
    engine.add_connector(conn)
    assert conn.started
    for _ in range(3):
        engine.step()
    assert engine.get_table("flaky").to_arrow().column("n").to_pylist() == [1, 3]
    assert any("source went away" in e["message"] for e in engine.recent_events())
    assert engine.get_metrics()["connectors"]["flaky"]["errors"] == 1
    engine.remove_connector(conn)
    assert conn.stopped


def test_stop_from_callback_does_not_deadlock(make_engine):
    engine = make_engine(trigger_interval_ms=10)
    stopped = threading.Event()

    def stop_me(name, table):
        engine.stop()
        stopped.set()

    engine.subscribe("t", stop_me)
    c = MemoryConnector("t")
    engine.add_connector(c)
    engine.start()
    c.push({"v": [1]})
    assert stopped.wait(5)
    deadline = time.time() + 5
    while engine.running:
        assert time.time() < deadline
        time.sleep(0.01)
    engine.close()


def test_stop_while_callback_runs_does_not_deadlock(make_engine):
    engine = make_engine(trigger_interval_ms=10)
    entered = threading.Event()

    def slow(name, table):
        entered.set()
        time.sleep(0.3)  # holds the GIL only in bursts; stop() must not block on it

    engine.subscribe("t", slow)
    c = MemoryConnector("t")
    engine.add_connector(c)
    engine.start()
    c.push({"v": [1]})
    assert entered.wait(5)
    # stop() returns while the callback still sleeps (a deadlock would never return).
    stopper = threading.Thread(target=engine.stop)
    stopper.start()
    stopper.join(timeout=60)
    assert not stopper.is_alive(), "stop() blocked on a callback holding the GIL"
    engine.close()


def test_registration_errors(engine):
    engine.register_table("dup")
    # As in the seed, registering a taken name replaces the table (issue 14).
    replaced = engine.register_table("dup", schema=pa.schema([("a", pa.int64())]))
    assert replaced.schema.names[0] == "a"
    with pytest.raises(ValueError, match="reserved"):
        engine.register_table("rill_x", schema=pa.schema([("a", pa.int64())]))
    with pytest.raises(TypeError):
        engine.add_connector(object())
    c = MemoryConnector("x", name="same")
    engine.add_connector(c)
    engine.add_connector(c)  # same object: no-op
    with pytest.raises(ValueError, match="same"):
        engine.add_connector(MemoryConnector("y", name="same"))
    assert engine.get_table("nope") is None


def _run_script(body, **kwargs):
    script = textwrap.dedent(body)
    return subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, **kwargs)


def test_interpreter_exits_with_running_engine():
    proc = _run_script("""
        import time
        from rills import RillEngine, MemoryConnector
        engine = RillEngine(trigger_interval_ms=5)
        c = MemoryConnector("t")
        engine.add_connector(c)
        engine.subscribe("t", lambda n, t: None)
        engine.register_business_metric("m", lambda e: 1.0)
        engine.start()
        for i in range(20):
            c.push({"v": [i]})
            time.sleep(0.005)
        print("done", flush=True)
    """)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "done" in out


def test_ctrl_c_stops_a_running_script():
    proc = _run_script("""
        import time
        from rills import RillEngine, MemoryConnector
        engine = RillEngine(trigger_interval_ms=5)
        c = MemoryConnector("t")
        engine.add_connector(c)
        engine.subscribe("t", lambda n, t: None)
        engine.start()
        print("running", flush=True)
        try:
            while True:
                c.push({"v": [1]})
                time.sleep(0.001)
        except KeyboardInterrupt:
            engine.stop()
            print("interrupted", flush=True)
    """)
    assert proc.stdout.readline().strip() == "running"
    time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "interrupted" in out


def test_the_first_engine_of_a_process_warms_the_push_path_and_leaves_no_trace():
    # RillEngine's first construction in a process pushes a throw-away batch
    # through a connector of its own (issue 29): nothing of it may show.
    code = textwrap.dedent("""
        import pyarrow as pa
        from rills import MemoryConnector, RillEngine
        engine = RillEngine(trigger_interval_ms=1000, metrics_path=None)
        assert "rill_warm_up" not in engine.tables, engine.tables
        assert all(c.name != "rill_warm_up" for c in engine.connectors), engine.connectors
        c = MemoryConnector("t")
        engine.add_connector(c)
        c.push(pa.record_batch({"key": pa.array([1, 2, 1]), "name": pa.array(["a", "b", "c"])}))
        engine.step()
        assert engine.query_sql("SELECT count(*) AS n FROM t").column("n")[0].as_py() == 3
        assert engine.query_sql("SELECT count(*) AS n FROM rill_rejects").column("n")[0].as_py() == 0
        assert "rill_warm_up" not in engine.tables
        engine.close()
        print("ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
