"""Seed 001's toolkit over its C++ core (src/rill/toolkit): the vectorized
aggregation pipeline against plain Python, the C++-backed queue keeping any
Python object, and the queue file shared between processes."""

import random

import pyarrow as pa
import pytest

from rills.aggregation.aggregation_pipeline import AggregationPipeline
from rills.queue.message_queue import MessageQueue, QueueFullError
from rills.queue.queue_store import QueueStore


def test_process_batch_gives_the_seed_result_exactly():
    pipeline = AggregationPipeline("sales").group_by("product")
    pipeline.aggregate("count", "*").aggregate("sum", "amount").aggregate("avg", "amount")
    batch = pa.RecordBatch.from_pylist([{"product": "Laptop", "amount": 999.99},
                                        {"product": "Laptop", "amount": 1299.99},
                                        {"product": "Mouse", "amount": 29.99}])
    result = pipeline.process_batch(batch)
    assert result["Laptop"] == {"count": 2, "sum": 2299.98, "avg": 1149.99}
    assert result == pipeline.process(batch.to_pylist())


@pytest.mark.parametrize("seed", range(6))
def test_process_batch_matches_the_python_rows_path(seed):
    rng = random.Random(seed)
    rows = [{"product": rng.choice(["a", "b", "c", None]), "region": rng.randint(0, 3),
             "amount": round(rng.uniform(-100, 1000), 2), "qty": rng.choice([None, 1, 2, 3])}
            for _ in range(rng.randint(1, 2000))]
    table = pa.Table.from_pylist(rows)
    keys = [["product"], ["product", "region"], []][seed % 3]

    def make():
        p = AggregationPipeline("p").group_by(*keys)
        return (p.aggregate("count", "*").aggregate("sum", "amount").aggregate("min", "amount")
                .aggregate("max", "amount").aggregate("avg", "qty").aggregate("count", "qty", name="qty_n")
                .aggregate("sum", "qty"))

    got = make().process_batch(table)
    want = make().process(rows)
    assert set(got) == set(want)
    for key, values in want.items():
        assert set(got[key]) == set(values)
        for name, value in values.items():
            assert got[key][name] == (pytest.approx(value) if value is not None else None), (key, name)


def test_process_batch_falls_back_for_python_stages():
    rows = [{"k": i % 3, "v": float(i)} for i in range(30)]
    p = AggregationPipeline("f").group_by("k").filter(lambda r: r["v"] > 5).aggregate("sum", "v")
    assert p.process_batch(pa.Table.from_pylist(rows)) == p.process(rows)
    with pytest.raises(KeyError):
        AggregationPipeline("m").group_by("nope").aggregate("sum", "v").process_batch(pa.Table.from_pylist(rows))


def test_in_memory_queue_keeps_any_object_and_releases_dropped_ones():
    class Job:
        pass

    jobs = [Job() for _ in range(5)]
    q = MessageQueue("objects", max_size=3, on_overflow="drop_oldest")
    for j in jobs:
        q.enqueue(j)
    assert q.dequeue_batch(10) == jobs[2:]
    assert q._objects == {}  # evicted objects are not kept alive
    full = MessageQueue("full", max_size=2)
    assert full.enqueue_batch([(1, 2), {3}, "x"]) == 2
    with pytest.raises(QueueFullError):
        full.enqueue(object())
    assert len(full._objects) == 2
    assert full.dequeue() == (1, 2) and full.dequeue() == {3}


def test_priority_order_and_json_round_trip_through_the_store(tmp_path):
    path = str(tmp_path / "q.db")
    q = MessageQueue("p", max_size=100, store=QueueStore(path))
    q.enqueue({"n": 1})
    q.enqueue({"n": 2}, priority=5)
    q.enqueue([1, "two"], priority=5)
    with pytest.raises(TypeError):
        q.enqueue(object())  # persisted messages are JSON
    reopened = MessageQueue("p", max_size=100, store=QueueStore(path))
    assert reopened.dequeue_batch(10) == [{"n": 2}, [1, "two"], {"n": 1}]
    assert reopened.get_stats()["persistent"] is True
