"""Closing or dropping a RillEngine from its own threads (issue 23).

A callback runs on the engine's loop thread, inside a tick. Closing the engine
there (or letting go of its last reference there) cannot destroy it on the spot:
the tick goes on over the engine's members, and the loop thread cannot join
itself. The close is handed to the reaper thread, which destroys the engine once
that tick is over; _core.wait_for_deferred_closes() waits for it. The loop
thread (its Linux thread id, seen from inside the callback) is gone afterwards.
"""

import gc
import os
import threading
import weakref

import pytest

from rills import MemoryConnector, RillEngine, _core

from conftest import wait_until


def thread_exists(tid):
    return os.path.exists(f"/proc/self/task/{tid}")


def engine_kwargs(kind, tmp_path):
    kwargs = {"trigger_interval_ms": 5, "metrics_path": None}
    if kind == "metrics":
        kwargs["metrics_path"] = str(tmp_path / "rill_metrics.db")
    elif kind == "server":
        kwargs["quack_address"] = "quack:127.0.0.1:0"
        kwargs["quack_token"] = "destroy-test-token"
    elif kind == "checkpoints":
        kwargs["checkpoint_dir"] = str(tmp_path / "checkpoints")
        kwargs["checkpoint_interval_seconds"] = 0.01
    return kwargs


@pytest.mark.parametrize("kind", ["plain", "metrics", "server", "checkpoints"])
def test_close_from_a_subscriber_on_the_loop_thread_destroys_after_the_tick(kind, tmp_path):
    engine = RillEngine(**engine_kwargs(kind, tmp_path))
    engine.register_table("t", primary_key="id")
    connector = MemoryConnector(target_table="t")
    engine.add_connector(connector)
    calls, loop_tid, closed = [], [], threading.Event()

    def on_change(name, table):
        calls.append(table.num_rows)
        if len(calls) == 1:
            loop_tid.append(threading.get_native_id())
            engine.close()  # on the loop thread, inside the tick
            closed.set()

    engine.subscribe("t", on_change)
    engine.start()
    connector.push({"id": [1, 2, 3]})
    assert closed.wait(60), "the subscriber was not called"
    _core.wait_for_deferred_closes()
    assert loop_tid[0] != threading.get_native_id()
    wait_until(lambda: not thread_exists(loop_tid[0]), timeout=60, what="the loop thread to end")
    assert calls == [3]
    with pytest.raises(RuntimeError, match="closed"):
        engine.query_sql("SELECT 1")
    engine.close()  # again: a no-op


def test_close_from_a_subscriber_inside_step_destroys_after_step_returns():
    engine = RillEngine(trigger_interval_ms=5, metrics_path=None)
    engine.register_table("t", primary_key="id")
    connector = MemoryConnector(target_table="t")
    engine.add_connector(connector)
    callers = []

    def on_change(name, table):
        callers.append(threading.get_native_id())
        engine.close()

    engine.subscribe("t", on_change)
    connector.push({"id": [1]})
    engine.step()  # the subscriber closes the engine inside this tick
    assert callers == [threading.get_native_id()]
    _core.wait_for_deferred_closes()
    with pytest.raises(RuntimeError, match="closed"):
        engine.step()


def test_an_engine_collected_while_running_stops_its_loop():
    engine = RillEngine(trigger_interval_ms=5, metrics_path=None)
    engine.register_table("t", primary_key="id")
    connector = MemoryConnector(target_table="t")
    engine.add_connector(connector)
    loop_tid = []
    engine.subscribe("t", lambda name, table: loop_tid.append(threading.get_native_id()))
    connector.push({"id": [1, 2]})
    engine.start()
    wait_until(lambda: loop_tid, timeout=60, what="the first tick")
    ref = weakref.ref(engine)
    del engine, connector
    gc.collect()  # here, on the main thread: the close joins the loop
    assert ref() is None
    wait_until(lambda: not thread_exists(loop_tid[0]), timeout=60, what="the loop thread to end")


def test_an_engine_dropped_by_its_own_callback_is_destroyed_after_the_tick():
    holder = [RillEngine(trigger_interval_ms=5, metrics_path=None)]
    holder[0].register_table("t", primary_key="id")
    connector = MemoryConnector(target_table="t")
    holder[0].add_connector(connector)
    connector.push({"id": [1, 2, 3]})
    loop_tid, go, dropped = [], threading.Event(), threading.Event()

    def on_change(name, table):
        if loop_tid:
            return
        loop_tid.append(threading.get_native_id())
        assert go.wait(60)
        holder.clear()  # the last reference: the engine is collected on the loop thread
        gc.collect()
        dropped.set()

    holder[0].subscribe("t", on_change)
    ref = weakref.ref(holder[0])
    holder[0].start()
    del connector
    go.set()
    assert dropped.wait(60), "the subscriber did not run"
    _core.wait_for_deferred_closes()
    assert ref() is None
    wait_until(lambda: not thread_exists(loop_tid[0]), timeout=60, what="the loop thread to end")
