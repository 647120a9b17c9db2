#!/usr/bin/env python3
"""Quack dashboard demo: a live engine served on the network for the dashboard.

Starts Rill with its server enabled (HTTP API, WebSocket streams, Prometheus
/metrics, the dashboard at /), streams simulated orders, keeps KPI queries and
an alert rule running, varies memory allocation so the memory charts move, and
pushes an occasional alert. The address, the token and the dashboard URL are
printed at start; open the URL in a browser, or query it:

    python examples/quack_dashboard_demo.py --duration 60
    curl -H "Authorization: Bearer <token>" http://127.0.0.1:9494/api/v1/info
    curl -H "Authorization: Bearer <token>" -d '{"sql":"SELECT * FROM revenue_by_tier"}' \\
         http://127.0.0.1:9494/api/v1/query

`--address quack:0.0.0.0:9494` serves other machines (a token is then
required); `--port 0` picks a free port.
"""

import argparse
import random
import threading
import time

import pyarrow as pa

from rills import MemoryConnector, RillEngine, ScheduledSQLTask, schema

TIERS = ["Bronze", "Silver", "Gold", "Platinum"]


def produce(connector, stop, rate_hz, batch_size):
    rng = random.Random(42)
    next_id = 0
    while not stop.is_set():
        ids = list(range(next_id, next_id + batch_size))
        next_id += batch_size
        connector.push(pa.table({
            "order_id": pa.array(ids, pa.int64()),
            "user_tier": [rng.choice(TIERS) for _ in ids],
            "amount": [round(rng.uniform(5, 500), 2) for _ in ids],
        }))
        time.sleep(1.0 / rate_hz)


def vary_memory(stop, engine):
    """Hold and release buffers of changing size so memory telemetry moves."""
    held = []
    rng = random.Random(1)
    while not stop.is_set():
        if len(held) < 8 and rng.random() < 0.6:
            held.append(pa.array(range(rng.randrange(100_000, 1_000_000)), pa.int64()))
        elif held:
            held.pop(rng.randrange(len(held)))
        if rng.random() < 0.05:
            engine.warn("memory swing on the demo allocator", detail=f"{len(held)} buffers held")
        time.sleep(0.5)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", default="quack:127.0.0.1:9494")
    parser.add_argument("--port", type=int, default=None, help="override the port (0: any free)")
    parser.add_argument("--token", default=None, help="default: a random token")
    parser.add_argument("--duration", type=float, default=0, help="seconds (0: until Ctrl-C)")
    parser.add_argument("--rate", type=float, default=20, help="batches per second")
    parser.add_argument("--batch-size", type=int, default=200)
    parser.add_argument("--metrics-path", default="rill_metrics.db")
    args = parser.parse_args()

    engine = RillEngine(trigger_interval_ms=200, memory_budget_mb=500.0,
                        quack_address=args.address, quack_token=args.token,
                        metrics_path=args.metrics_path)
    orders_schema = schema([("order_id", pa.int64()), ("user_tier", pa.string()),
                            ("amount", pa.float64())], primary_key="order_id", mode="snapshot")
    engine.register_table("orders", schema=orders_schema)
    connector = MemoryConnector(target_table="orders")
    engine.add_connector(connector)
    engine.add_sql_task(ScheduledSQLTask(
        name="tier_revenue",
        query="SELECT user_tier, SUM(amount) AS total_revenue, COUNT(*) AS order_count "
              "FROM orders GROUP BY user_tier",
        output_table="revenue_by_tier", interval_seconds=1.0))
    engine.add_dashboard_scheduled_query(
        name="Max Order Amount", sql="SELECT MAX(amount) AS max_amount FROM orders",
        interval_seconds=1.0, chart_type="bar", x_col="ts", y_col="max_amount")
    engine.add_dashboard_scheduled_query(
        name="Total Revenue", sql="SELECT SUM(amount) AS revenue FROM orders",
        interval_seconds=1.0, chart_type="line", x_col="ts", y_col="revenue")
    engine.add_alert_rule("slow ticks", "tick_latency_p99_s", ">", 0.5, cooldown_seconds=30)

    engine.start(quack_port=args.port, quack_token=args.token)
    engine.alert("quack dashboard demo started")
    stop = threading.Event()
    threads = [threading.Thread(target=produce, args=(connector, stop, args.rate, args.batch_size),
                                daemon=True),
               threading.Thread(target=vary_memory, args=(stop, engine), daemon=True)]
    for t in threads:
        t.start()
    start = time.time()
    try:
        while not args.duration or time.time() - start < args.duration:
            time.sleep(min(1.0, args.duration or 1.0))
            orders = engine.get_table("orders")
            print(f"[{time.time() - start:5.1f}s] orders={orders.num_rows:,}  "
                  f"serving on {engine.quack_address}", flush=True)
    except KeyboardInterrupt:
        pass
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=2)
        engine.stop()
        engine.close()


if __name__ == "__main__":
    main()
