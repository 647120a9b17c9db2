"""Seed 001's toolkit, the ten test areas of its test list, each against an
independent reference (plain Python on random inputs; DuckDB for windows)."""

import math
import os
import random
import signal
import subprocess
import sys
import textwrap
import time

import duckdb
import pytest

from rills.aggregation.aggregation_pipeline import AggregationPipeline
from rills.aggregation.aggregators import AvgAggregator, CountAggregator, MaxAggregator, MinAggregator, SumAggregator
from rills.aggregation.pipeline_store import PipelineStore
from rills.analytics.analytics_engine import AnalyticsEngine
from rills.analytics.stream_analytics import StreamAnalytics
from rills.queue.message_queue import MessageQueue, QueueFullError
from rills.queue.queue_manager import QueueManager
from rills.queue.queue_store import QueueStore
from rills.stream.stream_processor import StreamProcessor
from rills.stream.stream_sink import DatabaseSink, QueueSink
from rills.stream.stream_source import EventSource, QueueSource
from rills.windowing.sliding_window import SlidingWindow
from rills.windowing.tumbling_window import TumblingWindow


# 1. Message queue ----------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(5))
def test_message_queue_matches_a_sorted_reference(seed):
    rng = random.Random(seed)
    q = MessageQueue("events", max_size=10_000)
    ref, seq = [], 0
    for _ in range(2000):
        if rng.random() < 0.6:
            prio = rng.choice([None, None, 0, 1, 5])
            msg = {"n": seq}
            q.enqueue(msg, priority=prio)
            ref.append((-(prio or 0), seq, msg))
            seq += 1
        else:
            ref.sort()
            want = ref.pop(0)[2] if ref else None
            assert q.peek() == want
            assert q.dequeue() == want
    assert q.size() == len(ref)
    stats = q.get_stats()
    assert stats["current_size"] == len(ref)
    assert stats["total_enqueued"] == seq
    assert stats["total_dequeued"] == seq - len(ref)


def test_full_queue_follows_on_overflow():
    q = MessageQueue("q", max_size=2)
    q.enqueue(1)
    q.enqueue(2)
    with pytest.raises(QueueFullError):
        q.enqueue(3)
    q = MessageQueue("q", max_size=2, on_overflow="drop_newest")
    assert q.enqueue(1) and q.enqueue(2) and not q.enqueue(3)
    assert q.get_stats()["dropped"] == 1
    q = MessageQueue("q", max_size=2, on_overflow="drop_oldest")
    q.enqueue(1)
    q.enqueue(2)
    q.enqueue(3)
    assert [q.dequeue(), q.dequeue(), q.dequeue()] == [2, 3, None]


# 2. Queue persistence --------------------------------------------------------------------

def test_persisted_queue_comes_back_in_order(tmp_path):
    path = str(tmp_path / "q.db")
    store = QueueStore(path)
    q = MessageQueue("jobs", max_size=100, store=store)
    q.enqueue_batch([{"i": i} for i in range(10)])
    q.enqueue({"urgent": True}, priority=9)
    assert q.dequeue() == {"urgent": True}
    assert q.dequeue() == {"i": 0}
    store.close()
    again = MessageQueue("jobs", max_size=100, store=QueueStore(path))
    assert [again.dequeue() for _ in range(9)] == [{"i": i} for i in range(1, 10)]
    assert again.dequeue() is None


CHILD = textwrap.dedent("""
    import sys
    from rills.queue.message_queue import MessageQueue
    from rills.queue.queue_store import QueueStore
    q = MessageQueue("q", max_size=1_000_000, store=QueueStore(sys.argv[1]))
    i = 0
    while True:
        q.enqueue({"i": i})
        print("e", i, flush=True)
        if i % 5 == 4:
            m = q.dequeue()
            print("d", m["i"], flush=True)
        i += 1
""")


def test_kill_9_keeps_every_acknowledged_message_exactly_once(tmp_path):
    path = str(tmp_path / "kill.db")
    proc = subprocess.Popen([sys.executable, "-c", CHILD, path], stdout=subprocess.PIPE, text=True)
    enq, deq = [], []
    deadline = time.time() + 60
    while len(enq) < 300 and time.time() < deadline:
        kind, n = proc.stdout.readline().split()
        (enq if kind == "e" else deq).append(int(n))
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert len(enq) >= 300
    recovered = [m["i"] for m in MessageQueue("q", max_size=1_000_000, store=QueueStore(path)).dequeue_batch(10**6)]
    assert len(recovered) == len(set(recovered)), "a message came back twice"
    acked = set(enq) - set(deq)
    # Every acknowledged, not dequeued message is there; the only extras are the
    # one enqueue in flight (not yet acknowledged) and a dequeue in flight.
    missing = acked - set(recovered)
    assert len(missing) <= 1 and all(m == min(acked) for m in missing)
    extra = set(recovered) - acked
    assert extra <= {max(enq) + 1}
    assert recovered == sorted(recovered)


# 3. Stream processing --------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(5))
def test_stream_processor_matches_plain_python(seed):
    rng = random.Random(seed)
    events = [{"value": rng.randint(-50, 50)} for _ in range(500)]
    k, threshold = rng.randint(1, 4), rng.randint(-20, 20)
    p = StreamProcessor("p")
    p.map(lambda x: {**x, "value": x["value"] * k}).filter(lambda x: x["value"] > threshold)
    p.reduce(lambda acc, x: acc + x["value"], 0)
    got = p.process_batch(events)
    want = [{"value": e["value"] * k} for e in events if e["value"] * k > threshold]
    assert got == want
    assert p.result() == sum(e["value"] for e in want)
    assert p.get_stats()["filtered"] == len(events) - len(want)
    assert p.process({"value": -1000}) is None


def test_seed_example_and_vectorized_steps():
    import pyarrow as pa
    import pyarrow.compute as pc

    p = StreamProcessor("my-processor")
    p.map(lambda x: {**x, "value": x["value"] * 2})
    p.filter(lambda x: x["value"] > 10)
    assert p.process_batch([{"value": 5}, {"value": 10}, {"value": 15}]) == [{"value": 20}, {"value": 30}]
    v = StreamProcessor("vec")
    v.map_arrow(lambda b: pa.RecordBatch.from_arrays([pc.multiply(b["value"], 2)], names=["value"]))
    v.filter_arrow(lambda b: pc.greater(b["value"], 10))
    out = v.process_arrow(pa.record_batch({"value": [5, 10, 15]}))
    assert out.to_pylist() == [{"value": 20}, {"value": 30}]


def test_sources_and_sinks_connect_through_queues(tmp_path):
    q = MessageQueue("src", max_size=1000)
    events = EventSource(seed=1).read(50)
    QueueSink(q).write_batch(events)
    sink = DatabaseSink(str(tmp_path / "s.db"), table="out")
    sink.write_batch(QueueSource(q).read(100))
    assert sink.read_all() == events


# 4./5./9. Tumbling and sliding windows, window aggregation --------------------------------

def _random_events(seed, n=400):
    rng = random.Random(seed)
    t = 1000.0
    out = []
    for _ in range(n):
        t += rng.uniform(0, 0.5)
        out.append({"timestamp": round(t, 3), "value": rng.randint(1, 100)})
    return out


@pytest.mark.parametrize("seed", range(3))
def test_tumbling_window_matches_duckdb_time_buckets(seed):
    events = _random_events(seed)
    w = TumblingWindow(duration=10)
    for e in events:
        w.add_event(e)
    got = [(c["start"], c["count"], sum(e["value"] for e in c["events"])) for c in w.get_closed_windows()]
    last = events[-1]["timestamp"]
    rows = duckdb.sql(
        "SELECT floor(ts / 10) * 10 AS s, count(*), sum(v) FROM (SELECT unnest($ts) AS ts, unnest($v) AS v) "
        "GROUP BY s HAVING s + 10 <= $last ORDER BY s",
        params={"ts": [e["timestamp"] for e in events], "v": [e["value"] for e in events], "last": last}).fetchall()
    assert got == [(float(s), c, v) for s, c, v in rows]
    cur = w.get_current_window()
    assert cur["start"] == math.floor(last / 10) * 10 and cur["count"] == sum(
        1 for e in events if e["timestamp"] >= cur["start"])
    # 9: window aggregation over the closed windows.
    assert [a["result"] for a in w.aggregate_closed(lambda evs: sum(e["value"] for e in evs))] == [r[2] for r in rows]
    assert w.aggregate(len) == cur["count"]


@pytest.mark.parametrize("seed", range(3))
def test_sliding_window_matches_a_reference(seed):
    events = _random_events(seed)
    w = SlidingWindow(size=30, slide=10)
    for e in events:
        w.add_event(e)
    last = events[-1]["timestamp"]
    want = {}
    for e in events:
        k = math.floor(e["timestamp"] / 10) * 10
        s = k
        while s > e["timestamp"] - 30:
            want.setdefault(s, []).append(e["value"])
            s -= 10
    closed = {c["start"]: [e["value"] for e in c["events"]] for c in w.get_closed_windows()}
    assert closed == {s: v for s, v in want.items() if s + 30 <= last}
    current = min(s for s in want if s <= last < s + 30)
    assert w.get_current_window()["count"] == len(want[current])
    assert w.get_current_window()["start"] == current


def _reference_windows(events, size, slide, closes=()):
    """Plain-Python model of the windowing rule: the watermark is the latest
    event time (or a close_expired time); an event joins its windows whose end
    is past the watermark, and is late when there are none; windows close once
    the watermark reaches their end. `closes` maps event index -> close time
    applied after that event. Returns (closed {start: values}, late values)."""
    watermark = -math.inf
    open_, closed, late = {}, {}, []

    def close():
        for s in sorted(open_):
            if s + size <= watermark:
                closed[s] = open_.pop(s)

    for i, e in enumerate(events):
        t = e["timestamp"]
        starts = []
        s = math.floor(t / slide) * slide
        while s > t - size:
            if s + size > watermark:
                starts.append(s)
            s -= slide
        if not starts:
            late.append(e["value"])
        else:
            for s in starts:
                open_.setdefault(float(s), []).append(e["value"])
            watermark = max(watermark, t)
        close()
        if i in closes:
            watermark = max(watermark, closes[i])
            close()
    return closed, late


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("size,slide", [(10, 10), (30, 10), (10, 4)])
def test_windows_with_out_of_order_events_match_a_reference(seed, size, slide):
    rng = random.Random(seed)
    events, t = [], 1000.0
    for _ in range(300):
        t += rng.uniform(0, 1)
        back = rng.choice([0, 0, 0, rng.uniform(0, 8), rng.uniform(0, 40)])
        events.append({"timestamp": round(t - back, 3), "value": rng.randint(1, 100)})
    closes = {i: events[i]["timestamp"] + rng.uniform(0, 15) for i in rng.sample(range(300), 5)}
    w = TumblingWindow(duration=size) if size == slide else SlidingWindow(size=size, slide=slide)
    for i, e in enumerate(events):
        w.add_event(e)
        if i in closes:
            w.close_expired(closes[i])
    want_closed, want_late = _reference_windows(events, size, slide, closes)
    got = {c["start"]: [e["value"] for e in c["events"]] for c in w.get_closed_windows()}
    assert got == want_closed
    assert [e["value"] for e in w.late] == want_late and w.late_events == len(want_late)
    assert w.total_events == len(events)
    # Every on-time event is in all of its windows still open or closed.
    kept = sum(len(v) for v in got.values()) + sum(o["count"] for o in w.get_open_windows())
    assert kept == sum(len(v) for v in want_closed.values()) + sum(
        len(v) for v in _reference_open(events, size, slide, closes))


def _reference_open(events, size, slide, closes):
    watermark = -math.inf
    open_ = {}
    for i, e in enumerate(events):
        t = e["timestamp"]
        s = math.floor(t / slide) * slide
        joined = False
        while s > t - size:
            if s + size > watermark:
                open_.setdefault(s, []).append(e["value"])
                joined = True
            s -= slide
        if joined:
            watermark = max(watermark, t)
        if i in closes:
            watermark = max(watermark, closes[i])
        for s in [s for s in open_ if s + size <= watermark]:
            del open_[s]
    return list(open_.values())


def test_late_events_are_counted_and_kept():
    w = TumblingWindow(duration=10)
    w.add_event({"timestamp": 5, "value": 1})
    w.add_event({"timestamp": 25, "value": 1})   # closes [0, 10)
    w.add_event({"timestamp": 3, "value": 7})    # late
    assert w.late_events == 1 and w.late == [{"timestamp": 3, "value": 7}]
    assert [c["count"] for c in w.get_closed_windows()] == [1]


# 6./8. Aggregation pipelines and aggregators -----------------------------------------------

def test_seed_pipeline_example_exactly():
    pipeline = AggregationPipeline("sales")
    pipeline.group_by("product")
    pipeline.aggregate("count", "*")
    pipeline.aggregate("sum", "amount")
    pipeline.aggregate("avg", "amount")
    data = [{"product": "Laptop", "amount": 999.99}, {"product": "Laptop", "amount": 1299.99},
            {"product": "Mouse", "amount": 29.99}]
    assert pipeline.process(data)["Laptop"] == {"count": 2, "sum": 2299.98, "avg": 1149.99}


@pytest.mark.parametrize("seed", range(5))
def test_pipeline_matches_plain_python(seed, tmp_path):
    rng = random.Random(seed)
    rows = [{"product": rng.choice("abcd"), "region": rng.choice("xy"), "amount": rng.randint(1, 1000),
             "qty": rng.choice([None, 1, 2, 3])} for _ in range(300)]
    store = PipelineStore(str(tmp_path / "p.db"))
    p = (AggregationPipeline("p").group_by("product", "region").filter(lambda r: r["amount"] > 100)
         .aggregate("count", "*").aggregate("sum", "amount").aggregate("min", "amount")
         .aggregate("max", "amount").aggregate("avg", "qty").aggregate("count", "qty", name="qty_n")
         .having(lambda g: g["count"] > 2).store(store))
    got = p.process(rows)
    want = {}
    for r in rows:
        if r["amount"] > 100:
            want.setdefault((r["product"], r["region"]), []).append(r)
    want = {k: {"count": len(v), "sum": sum(r["amount"] for r in v), "min": min(r["amount"] for r in v),
                "max": max(r["amount"] for r in v),
                "avg": (sum(r["qty"] for r in v if r["qty"] is not None) / len([r for r in v if r["qty"] is not None]))
                if any(r["qty"] is not None for r in v) else None,
                "qty_n": sum(1 for r in v if r["qty"] is not None)}
            for k, v in want.items() if len(v) > 2}
    assert got == want
    assert store.latest("p") == want
    # Incremental processing in two halves equals one pass (aggregators merge).
    p2 = (AggregationPipeline("p2").group_by("product").aggregate("sum", "amount").aggregate("avg", "amount"))
    p2.process_incremental(rows[:150])
    assert p2.process_incremental(rows[150:]) == AggregationPipeline("p3").group_by("product") \
        .aggregate("sum", "amount").aggregate("avg", "amount").process(rows)


@pytest.mark.parametrize("agg,ref", [(CountAggregator(), len), (SumAggregator(), sum), (MinAggregator(), min),
                                     (MaxAggregator(), max), (AvgAggregator(), lambda v: sum(v) / len(v))])
def test_aggregators_add_and_merge(agg, ref):
    rng = random.Random(3)
    values = [rng.randint(-100, 100) for _ in range(100)]
    a, b = agg.init(), agg.init()
    for v in values[:40]:
        a = agg.add(a, v)
    for v in values[40:]:
        b = agg.add(b, v)
    assert agg.result(agg.merge(a, b)) == pytest.approx(ref(values))


def test_custom_aggregator():
    class Range:
        name = "range"

        def init(self):
            return (math.inf, -math.inf)

        def add(self, s, v):
            return (min(s[0], v), max(s[1], v))

        def merge(self, a, b):
            return (min(a[0], b[0]), max(a[1], b[1]))

        def result(self, s):
            return s[1] - s[0]

    p = AggregationPipeline("r").group_by("k").aggregate(Range(), "v")
    assert p.process([{"k": 1, "v": 3}, {"k": 1, "v": 10}, {"k": 2, "v": 5}]) == {1: {"range": 7}, 2: {"range": 0}}
    with pytest.raises(TypeError):
        AggregationPipeline("bad").aggregate(object(), "v")
    with pytest.raises(ValueError):
        AggregationPipeline("bad").aggregate("median", "v")


# 7. Stream analytics -----------------------------------------------------------------------

def test_stream_analytics_matches_plain_python(tmp_path):
    rng = random.Random(9)
    now = [1000.0]
    a = StreamAnalytics(db_path=str(tmp_path / "m.db"), rate_window=10, clock=lambda: now[0])
    ref = {}
    for _ in range(500):
        name = rng.choice(["page_views", "api_calls", "latency"])
        value = rng.uniform(0, 10)
        now[0] += 0.05
        a.track_metric(name, value)
        ref.setdefault(name, []).append((now[0], value))
    for name, items in ref.items():
        m = a.get_metric(name)
        values = [v for _, v in items]
        assert m["count"] == len(values)
        assert m["sum"] == pytest.approx(sum(values))
        assert m["avg"] == pytest.approx(sum(values) / len(values))
        assert (m["min"], m["max"]) == (min(values), max(values))
        assert m["rate_per_second"] == pytest.approx(sum(1 for t, _ in items if t >= now[0] - 10) / 10)
        assert [v for _, v in a.get_history(name)] == pytest.approx(values)
    assert set(a.get_all_metrics()) == set(ref)
    assert a.get_metric("nope") is None


def test_analytics_engine_runs_queues_through_everything():
    engine = AnalyticsEngine()
    q = engine.queues.create_queue("events")
    engine.add_processor(StreamProcessor("double").map(lambda e: {**e, "value": e["value"] * 2}))
    engine.add_window("w", TumblingWindow(10))
    engine.add_pipeline(AggregationPipeline("by_user").group_by("user_id").aggregate("sum", "value"))
    for i in range(20):
        q.enqueue({"user_id": i % 2, "value": i, "timestamp": float(i)})
    assert engine.run_once() == 20
    dash = engine.get_dashboard()
    assert dash["pipelines"]["by_user"] == {0: {"sum": 2 * sum(range(0, 20, 2))}, 1: {"sum": 2 * sum(range(1, 20, 2))}}
    assert dash["metrics"]["value"]["count"] == 20
    assert dash["windows"]["w"]["closed_windows"] == 1


# 10. Queue manager -------------------------------------------------------------------------

def test_queue_manager(tmp_path):
    path = str(tmp_path / "m.db")
    m = QueueManager(path)
    a = m.create_queue("a", max_size=10)
    b = m.create_queue("b")
    with pytest.raises(ValueError):
        m.create_queue("a")
    a.enqueue(1)
    a.enqueue(2)
    b.enqueue(3)
    b.dequeue()
    assert m.list_queues() == ["a", "b"]
    assert m.get_queue("a") is a and m.get_queue("zz") is None
    stats = m.get_all_stats()
    assert (stats["total_queues"], stats["total_messages"], stats["total_enqueued"], stats["total_dequeued"]) == (2, 2, 3, 1)
    assert m.delete_queue("b") and not m.delete_queue("b")
    again = QueueManager(path)   # persistent: queues and messages come back
    assert again.list_queues() == ["a"]
    assert again.get_queue("a").dequeue_batch(10) == [1, 2]


def test_queue_feeds_a_table_and_a_table_feeds_a_queue():
    import pyarrow as pa

    from rills import RillEngine
    from rills.queue import feed_queue_from_table, feed_table_from_queue

    engine = RillEngine(metrics_path=None)
    engine.register_table("orders", schema=pa.schema([("id", pa.int64()), ("amount", pa.float64())]),
                          primary_key="id")
    inbox = MessageQueue("inbox", max_size=1000)
    outbox = MessageQueue("outbox", max_size=1000)
    feed_queue_from_table(engine, "orders", outbox)
    bridge = feed_table_from_queue(engine, inbox, "orders")
    inbox.enqueue_batch([{"id": i, "amount": float(i)} for i in range(5)])
    deadline = time.time() + 10
    while bridge.moved < 5 and time.time() < deadline:
        time.sleep(0.01)
    engine.step()
    inbox.enqueue({"id": 2, "amount": 99.0})
    while bridge.moved < 6 and time.time() < deadline:
        time.sleep(0.01)
    engine.step()
    bridge.stop()
    assert sorted(r["id"] for r in engine.get_table("orders").to_arrow().to_pylist()) == [0, 1, 2, 3, 4]
    assert outbox.dequeue_batch(100) == [{"id": i, "amount": float(i)} for i in range(5)] + [{"id": 2, "amount": 99.0}]
