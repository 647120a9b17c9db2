#!/usr/bin/env python3
"""Multi-stream join demo: user profiles joined with a continuous orders stream.

Two connectors feed `user_profiles` (snapshot, keyed by user_id, occasionally
moving users between regions) and `orders` (append-only with retention). A
TableJoinTask maintains `orders_enriched`; a scheduled SQL task recomputes
regional revenue every second.

    python examples/multi_stream_join_demo.py --duration 10
"""

import argparse
import random
import threading
import time

import pyarrow as pa

from rills import MemoryConnector, RetentionPolicy, RillEngine, ScheduledSQLTask, TableJoinTask, schema

REGIONS = ["NA", "EU", "APAC", "LATAM"]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=10.0, help="seconds to run")
    parser.add_argument("--quick", action="store_true", help="short run for smoke tests")
    parser.add_argument("--users", type=int, default=1000)
    args = parser.parse_args(argv)
    duration = 1.5 if args.quick else args.duration
    rng = random.Random(11)

    engine = RillEngine(trigger_interval_ms=100)
    engine.register_table("user_profiles", schema=schema(
        [("user_id", pa.int64()), ("name", pa.string()), ("region", pa.string())], primary_key="user_id"))
    engine.register_table("orders", schema=schema(
        [("order_id", pa.int64()), ("user_id", pa.int64()), ("amount", pa.float64())], mode="append"),
        retention_policy=RetentionPolicy(max_rows=500_000, max_age_seconds=3600))
    profiles = MemoryConnector("user_profiles")
    orders = MemoryConnector("orders")
    engine.add_connector(profiles)
    engine.add_connector(orders)
    engine.add_join_task(TableJoinTask(
        name="enrich_orders", left_table="orders", right_table="user_profiles", keys="user_id",
        output_table="orders_enriched", join_type="inner", interval_seconds=0.5))
    engine.add_sql_task(ScheduledSQLTask(
        name="regional_revenue",
        query="SELECT p.region, SUM(o.amount) AS revenue, COUNT(*) AS orders "
              "FROM orders o JOIN user_profiles p USING (user_id) GROUP BY p.region ORDER BY p.region",
        output_table="regional_revenue", interval_seconds=1.0, primary_key="region"))

    profiles.push({"user_id": list(range(args.users)),
                   "name": [f"user{i}" for i in range(args.users)],
                   "region": [rng.choice(REGIONS) for _ in range(args.users)]})
    stop = threading.Event()

    def stream():
        next_order = 0
        while not stop.is_set():
            n = 200
            orders.push({"order_id": list(range(next_order, next_order + n)),
                         "user_id": [rng.randrange(args.users) for _ in range(n)],
                         "amount": [round(rng.uniform(1, 300), 2) for _ in range(n)]})
            next_order += n
            if rng.random() < 0.2:  # a few users move
                moved = [rng.randrange(args.users) for _ in range(5)]
                profiles.push([{"user_id": u, "name": f"user{u}", "region": rng.choice(REGIONS)}
                               for u in moved])
            time.sleep(0.05)

    producer = threading.Thread(target=stream)
    engine.start()
    producer.start()
    t0 = time.time()
    try:
        while time.time() - t0 < duration:
            time.sleep(min(1.0, duration / 2))
            revenue = engine.get_table("regional_revenue")
            enriched = engine.get_table("orders_enriched")
            print(f"[{time.time() - t0:5.1f}s] orders={engine.get_table('orders').num_rows} "
                  f"enriched={0 if enriched is None else enriched.num_rows}")
            if revenue is not None:
                for row in revenue.to_arrow().to_pylist():
                    print(f"   {row['region']:>6}: {row['revenue']:>12.2f} over {row['orders']} orders")
    except KeyboardInterrupt:
        print("interrupted")
    finally:
        stop.set()
        producer.join()
        engine.stop()
    engine.close()


if __name__ == "__main__":
    main()
