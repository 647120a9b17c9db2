"""One set of queues for Python and the network server.

A RillEngine's server serves the toolkit of `engine.queue_manager`: a queue
made in Python is listed and drained at /api/v1/queues, and one made over
REST is a Python queue (over real HTTP on 127.0.0.1). `rill serve
--queue-db` keeps queues and messages across restarts of the process."""

import json
import signal
import subprocess
import time

import pytest

import rills
from test_toolkit_serve import RILL, TOKEN, call
from conftest import requires


@pytest.fixture
def engine():
    eng = rills.RillEngine(trigger_interval_ms=50, quack_address="quack:127.0.0.1:0",
                           quack_token=TOKEN, metrics_path=None)
    eng.start()
    try:
        yield eng, eng.quack_address[len("quack:"):]
    finally:
        eng.stop()
        eng.close()


def test_python_queue_is_served_over_rest(engine):
    eng, address = engine
    qm = eng.queue_manager
    assert qm is eng.queue_manager
    q = qm.create_queue("jobs", max_size=5)
    q.enqueue({"job": 1})
    q.enqueue({"job": 2}, priority=7)
    status, listing = call(address, "GET", "/api/v1/queues")
    assert status == 200 and [s["name"] for s in listing["queues"]] == ["jobs"]
    status, stats = call(address, "GET", "/api/v1/queues/jobs/stats")
    assert (stats["current_size"], stats["max_size"], stats["total_enqueued"]) == (2, 5, 2)
    assert stats == {**q.get_stats(), "last_dequeue_at": stats["last_dequeue_at"]}
    status, out = call(address, "POST", "/api/v1/queues/jobs/dequeue")
    assert status == 200 and out["message"] == {"job": 2}  # higher priority first
    assert q.size() == 1 and q.get_stats()["total_dequeued"] == 1
    assert q.dequeue() == {"job": 1}
    assert qm.delete_queue("jobs") is True
    assert call(address, "GET", "/api/v1/queues/jobs/stats")[0] == 404
    assert qm.delete_queue("jobs") is False


def test_rest_queue_is_a_python_queue(engine):
    eng, address = engine
    assert call(address, "POST", "/api/v1/queues",
                {"name": "events", "max_size": 3, "on_overflow": "drop_oldest"})[0] == 201
    for i in range(4):
        assert call(address, "POST", "/api/v1/queues/events/enqueue", {"message": {"i": i}})[0] == 201
    qm = eng.queue_manager
    assert qm.list_queues() == ["events"]
    q = qm.get_queue("events")
    assert (q.name, q.max_size, q.on_overflow) == ("events", 3, "drop_oldest")
    assert q.peek() == {"i": 1}  # {"i": 0} was dropped as the oldest
    assert q.dequeue_batch(10) == [{"i": 1}, {"i": 2}, {"i": 3}]
    totals = qm.get_all_stats()
    assert (totals["total_queues"], totals["total_enqueued"], totals["total_dequeued"]) == (1, 4, 3)
    with pytest.raises(ValueError):
        qm.create_queue("events")
    assert call(address, "POST", "/api/v1/queues", {"name": "events"})[0] == 409
    assert qm.get_or_create_queue("events").max_size == 3
    assert qm.get_queue("nope") is None


def _serve(args):
    proc = subprocess.Popen([str(RILL), "serve", "--metrics", ":memory:", "--listen", "127.0.0.1:0",
                             "--token", TOKEN, *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 20
    while time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        if "listening on " in line:
            return proc, line.split("listening on ", 1)[1].strip()
    proc.kill()
    raise AssertionError("rill serve did not print its address: " + proc.stderr.read())


def _stop(proc):
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=30)
    assert proc.returncode == 0


@requires(not RILL.exists(), f"{RILL} not built")
@pytest.mark.parametrize("how", ["flag", "file"])
def test_rill_serve_queue_db_keeps_queues_across_restarts(tmp_path, how):
    db = tmp_path / "queues.db"
    if how == "flag":
        args = ["--queue-db", str(db)]
    else:
        pipeline = tmp_path / "p.yaml"
        pipeline.write_text(f"server:\n  queue_db: {json.dumps(str(db))}\n")
        args = [str(pipeline)]
    proc, address = _serve(args)
    try:
        assert call(address, "POST", "/api/v1/queues", {"name": "orders", "max_size": 100})[0] == 201
        sent = [{"id": i, "p": i % 3} for i in range(20)]
        for m in sent:
            assert call(address, "POST", "/api/v1/queues/orders/enqueue",
                        {"message": m, "priority": m["p"]})[0] == 201
        status, first = call(address, "POST", "/api/v1/queues/orders/dequeue?count=5")
        assert status == 200 and len(first["messages"]) == 5
    finally:
        _stop(proc)
    assert db.exists()
    proc, address = _serve(args)
    try:
        status, stats = call(address, "GET", "/api/v1/queues/orders/stats")
        assert status == 200 and stats["current_size"] == 15 and stats["persistent"] is True
        status, rest = call(address, "POST", "/api/v1/queues/orders/dequeue?count=100")
        got = first["messages"] + rest["messages"]
        # Each message exactly once, and priority order (stable) across the restart.
        assert sorted(m["id"] for m in got) == list(range(20))
        want = sorted(sent, key=lambda m: (-m["p"], m["id"]))
        assert got == want
    finally:
        _stop(proc)


@requires(not RILL.exists(), f"{RILL} not built")
def test_rill_serve_queues_stay_in_memory_without_queue_db(tmp_path):
    proc, address = _serve([])
    try:
        assert call(address, "POST", "/api/v1/queues", {"name": "tmp"})[0] == 201
        status, stats = call(address, "GET", "/api/v1/queues/tmp/stats")
        assert stats["persistent"] is False
    finally:
        _stop(proc)
    proc, address = _serve([])
    try:
        assert call(address, "GET", "/api/v1/queues/tmp/stats")[0] == 404
    finally:
        _stop(proc)
