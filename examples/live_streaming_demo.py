#!/usr/bin/env python3
"""Live streaming demo: continuous orders, upserts, scheduled SQL and live stats.

A producer thread pushes batches of orders (new ones and status updates of
earlier ones) into a MemoryConnector; the engine upserts them by order_id
every tick, a scheduled SQL task keeps revenue per tier up to date, a business
metric tracks the average ticket, and the main thread prints live stats.

    python examples/live_streaming_demo.py --duration 10
"""

import argparse
import random
import threading
import time

import pyarrow as pa

from rills import MemoryConnector, OutputAPI, RillEngine, ScheduledSQLTask, schema

TIERS = ["Bronze", "Silver", "Gold", "Platinum"]
STATUSES = ["new", "paid", "shipped", "cancelled"]


def produce(connector, stop, batch_size, rate_hz, counters):
    rng = random.Random(7)
    next_id = 0
    while not stop.is_set():
        n_new = batch_size
        ids = list(range(next_id, next_id + n_new))
        next_id += n_new
        # A quarter of each batch updates earlier orders (upserts by key).
        if next_id > 4 * batch_size:
            ids += [rng.randrange(0, next_id - n_new) for _ in range(batch_size // 4)]
        connector.push(pa.table({
            "order_id": pa.array(ids, pa.int64()),
            "user_tier": [rng.choice(TIERS) for _ in ids],
            "status": [rng.choice(STATUSES) for _ in ids],
            "amount": [round(rng.uniform(5, 500), 2) for _ in ids],
        }))
        counters["pushed"] += len(ids)
        time.sleep(1.0 / rate_hz)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=10.0, help="seconds to run")
    parser.add_argument("--quick", action="store_true", help="short run for smoke tests")
    parser.add_argument("--batch-size", type=int, default=500)
    parser.add_argument("--rate", type=float, default=20.0, help="batches per second")
    parser.add_argument("--sink", default="/tmp/rill_demo_output/tier_revenue.parquet",
                        help="where to write the final revenue table (parquet, csv, json or ndjson by extension)")
    args = parser.parse_args(argv)
    duration = 1.5 if args.quick else args.duration

    engine = RillEngine(trigger_interval_ms=100, memory_budget_mb=512)
    engine.register_table("orders", schema=schema(
        [("order_id", pa.int64()), ("user_tier", pa.string()), ("status", pa.string()),
         ("amount", pa.float64())], primary_key="order_id", mode="snapshot"))
    connector = MemoryConnector(target_table="orders", max_buffer_records=200_000)
    engine.add_connector(connector)
    engine.add_sql_task(ScheduledSQLTask(
        name="tier_revenue",
        query="SELECT user_tier, SUM(amount) AS revenue, COUNT(*) AS orders "
              "FROM orders WHERE status <> 'cancelled' GROUP BY user_tier ORDER BY user_tier",
        output_table="revenue_by_tier", interval_seconds=1.0, primary_key="user_tier"))

    def avg_ticket(eng):
        result = eng.query_sql("SELECT AVG(amount) AS a FROM orders")
        return result.column("a")[0].as_py() or 0.0

    engine.register_business_metric("avg_ticket", avg_ticket)
    counters = {"pushed": 0}
    stop = threading.Event()
    producer = threading.Thread(target=produce, args=(connector, stop, args.batch_size, args.rate, counters))

    engine.start()
    producer.start()
    t0 = time.time()
    try:
        while time.time() - t0 < duration:
            time.sleep(min(1.0, duration / 2))
            m = engine.get_metrics()
            print(f"[{time.time() - t0:5.1f}s] orders={engine.get_table('orders').num_rows:>8} "
                  f"pushed={counters['pushed']:>8} rps={m['records_per_second']:>10.0f} "
                  f"tick={m['last_batch_latency_ms']:.2f}ms avg_ticket={m['business_metrics'].get('avg_ticket')}")
            revenue = engine.get_table("revenue_by_tier")
            if revenue is not None and revenue.num_rows:
                print("   revenue by tier:", {r["user_tier"]: round(r["revenue"], 2)
                                             for r in revenue.to_arrow().to_pylist()})
    except KeyboardInterrupt:
        print("interrupted")
    finally:
        stop.set()
        producer.join()
        engine.stop()
    engine.step()  # drain what is still buffered
    output_api = OutputAPI(engine)
    scalars = output_api.get_all_scalars()
    print(f"processed {scalars['total_records_processed']} records, "
          f"avg tick {scalars['avg_batch_latency_ms']:.2f} ms, tables {scalars['table_row_counts']}")
    # Refresh the revenue table from the final orders (its task is due one
    # interval ahead), then sink it to disk as the seed's demo does.
    engine.duckdb.run_due_tasks(current_time=time.time() + 1.0)
    revenue = engine.get_table("revenue_by_tier")
    if revenue is not None and revenue.num_rows:
        print("final revenue by tier:", {r["user_tier"]: round(r["revenue"], 2)
                                         for r in revenue.to_arrow().to_pylist()})
    sink_format = args.sink.rsplit(".", 1)[-1] if "." in args.sink else "parquet"
    if output_api.sink_to_file("revenue_by_tier", args.sink, format=sink_format):
        print(f"sink: wrote table 'revenue_by_tier' to {args.sink}")
    total = engine.query_sql("SELECT COUNT(*) AS n, SUM(amount) AS revenue FROM orders").to_pylist()[0]
    print(f"final: {total['n']} distinct orders, revenue {total['revenue']:.2f}")
    engine.close()


if __name__ == "__main__":
    main()
