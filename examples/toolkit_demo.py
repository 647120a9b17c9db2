"""Seed 001's main.py on Rill: queues, stream processing, windows, aggregation
pipelines, analytics, and an engine window task, in one run.

    python examples/toolkit_demo.py            # uses a temporary directory for SQLite files
"""

import random
import tempfile
import time

import pyarrow as pa

from rills import (AggregationPipeline, MemoryConnector, MessageQueue, QueueManager, QueueStore, RetentionPolicy,
                   RillEngine, SlidingWindow, StreamAnalytics, StreamProcessor, TumblingWindow, WindowTask, schema)


def section(title):
    print(f"\n=== {title} ===")


def main():
    tmp = tempfile.mkdtemp(prefix="rills_toolkit_")
    rng = random.Random(1)

    section("Message queue")
    queue = MessageQueue("events", max_size=1000)
    queue.enqueue({"event": "user_login", "user_id": 1})
    queue.enqueue({"event": "page_view", "page": "/dashboard"})
    queue.enqueue({"event": "alert", "level": "high"}, priority=10)
    print("dequeued:", queue.dequeue())
    print(f"Queue size: {queue.get_stats()['current_size']}")

    section("Queue persistence and manager")
    manager = QueueManager(QueueStore(f"{tmp}/queues.db"))
    jobs = manager.create_queue("jobs", max_size=100)
    jobs.enqueue_batch([{"job": i} for i in range(3)])
    print("queues:", manager.list_queues(), "totals:",
          {k: v for k, v in manager.get_all_stats().items() if k != "queues"})
    print("after restart:", QueueManager(f"{tmp}/queues.db").get_queue("jobs").dequeue_batch(10))

    section("Stream processing")
    processor = StreamProcessor("my-processor")
    processor.map(lambda x: {**x, "value": x["value"] * 2})
    processor.filter(lambda x: x["value"] > 10)
    print(processor.process_batch([{"value": 5}, {"value": 10}, {"value": 15}]))

    section("Tumbling and sliding windows")
    tumbling, sliding = TumblingWindow(duration=10), SlidingWindow(size=30, slide=10)
    t0 = 1_000.0
    for i in range(60):
        event = {"value": rng.randint(1, 20), "timestamp": t0 + i}
        tumbling.add_event(event)
        sliding.add_event(event)
    print("closed tumbling windows:", [(w["start"], w["count"]) for w in tumbling.get_closed_windows()])
    print("current window total:", tumbling.aggregate(lambda events: sum(e["value"] for e in events)))
    print(f"Events in sliding window: {sliding.get_current_window()['count']}")

    section("Aggregation pipeline")
    pipeline = AggregationPipeline("sales")
    pipeline.group_by("product")
    pipeline.aggregate("count", "*")
    pipeline.aggregate("sum", "amount")
    pipeline.aggregate("avg", "amount")
    print(pipeline.process([{"product": "Laptop", "amount": 999.99}, {"product": "Laptop", "amount": 1299.99},
                            {"product": "Mouse", "amount": 29.99}]))

    section("Stream analytics")
    analytics = StreamAnalytics(db_path=f"{tmp}/metrics.db")
    analytics.track_metric("page_views", 1)
    analytics.track_metric("api_calls", 5)
    page_views = analytics.get_metric("page_views")
    print(f"Page views: {page_views['count']}")
    print(f"Rate: {page_views['rate_per_second']}/sec")

    section("Engine window task (C++)")
    engine = RillEngine(metrics_path=None)
    engine.register_table("orders", schema=schema([("ts", pa.float64()), ("product", pa.string()),
                                                   ("amount", pa.float64())], mode="append"),
                          retention_policy=RetentionPolicy(max_rows=100_000))
    conn = MemoryConnector(name="orders_in", target_table="orders")
    engine.add_connector(conn)
    task = WindowTask("per_10s", "orders", "orders_per_10s", time_column="ts", size_seconds=10,
                      group_by="product", aggregations={"orders": "count(*)", "revenue": "sum(amount)",
                                                        "p50": "median(amount)"})
    engine.add_window_task(task)
    for tick in range(5):
        conn.push([{"ts": t0 + tick * 5 + rng.random(), "product": rng.choice(["Laptop", "Mouse"]),
                    "amount": round(rng.uniform(10, 1000), 2)} for _ in range(20)])
        engine.step()
    print(engine.query_sql("SELECT window_start, product, orders, round(revenue, 2) AS revenue, p50 "
                           "FROM orders_per_10s ORDER BY window_start, product").to_pylist())
    print("window state:", {k: task.stats()[k] for k in ("windows_open", "groups_open", "state_bytes")})
    engine.close()
    time.sleep(0)


if __name__ == "__main__":
    main()
