"""Python-level stress: pushes from several threads while the loop runs and queries read."""

import threading
import time

import pyarrow as pa

from rills import MemoryConnector, RetentionPolicy, ScheduledSQLTask, schema


def test_concurrent_pushes_queries_and_subscribers_lose_nothing(make_engine):
    engine = make_engine(trigger_interval_ms=5)
    engine.register_table("orders", schema=schema(
        [("order_id", pa.int64()), ("producer", pa.int64()), ("amount", pa.float64())],
        primary_key="order_id"))
    engine.register_table("log", schema=schema([("producer", pa.int64()), ("seq", pa.int64())], mode="append"),
                          retention_policy=RetentionPolicy(max_rows=1_000_000))
    engine.add_sql_task(ScheduledSQLTask("totals", "SELECT producer, COUNT(*) AS n FROM orders GROUP BY producer",
                                         "totals", interval_seconds=0.01))
    orders = MemoryConnector("orders")
    log = MemoryConnector("log")
    engine.add_connector(orders)
    engine.add_connector(log)
    updates = []
    engine.subscribe("orders", lambda name, table: updates.append(table.num_rows))
    engine.start()

    producers, batches, rows = 4, 50, 200
    errors = []

    def produce(p):
        try:
            for b in range(batches):
                base = (p * batches + b) * rows
                ids = list(range(base, base + rows))
                orders.push({"order_id": ids, "producer": [p] * rows, "amount": [1.0] * rows})
                # Rewrite half of the previous batch: upserts must not duplicate keys.
                if b:
                    prev = list(range(base - rows, base - rows // 2))
                    orders.push({"order_id": prev, "producer": [p] * len(prev), "amount": [2.0] * len(prev)})
                log.push(pa.table({"producer": [p] * rows, "seq": ids}))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    stop_reading = threading.Event()
    reads_by_reader = [[], []]

    def read(reads):
        while not stop_reading.is_set():
            try:
                reads.append(engine.query_sql("SELECT COUNT(*) AS n FROM orders").column("n")[0].as_py())
                engine.get_metrics()
            except Exception as exc:  # pragma: no cover
                errors.append(exc)

    threads = [threading.Thread(target=produce, args=(p,)) for p in range(producers)]
    readers = [threading.Thread(target=read, args=(r,)) for r in reads_by_reader]
    try:
        for t in threads + readers:
            t.start()
        for t in threads:
            t.join(timeout=60)
        expected = producers * batches * rows
        deadline = time.time() + 30
        while engine.get_table("orders").num_rows < expected or engine.get_table("log").num_rows < expected:
            assert time.time() < deadline, (engine.get_table("orders").num_rows, engine.get_table("log").num_rows)
            time.sleep(0.01)
    finally:  # never leave reader threads querying after a failure
        stop_reading.set()
        for t in readers:
            if t.is_alive():
                t.join(timeout=30)
    engine.stop()

    assert not errors, errors
    orders_t = engine.get_table("orders").to_arrow()
    assert orders_t.num_rows == expected
    assert len(set(orders_t.column("order_id").to_pylist())) == expected
    assert engine.query_sql("SELECT SUM(amount) AS s FROM orders").column("s")[0].as_py() == (
        expected + producers * (batches - 1) * rows // 2)
    assert engine.get_table("log").num_rows == expected
    for reads in reads_by_reader:
        assert reads and all(0 <= n <= expected for n in reads)
        assert reads == sorted(reads)  # each query sees one version; versions only grow
    assert updates and updates[-1] == expected
