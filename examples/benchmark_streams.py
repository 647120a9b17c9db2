#!/usr/bin/env python3
"""Streaming benchmark: throughput and latency per stage for 1K, 10K and 1M products.

For each catalogue size the benchmark loads the products into a snapshot table
(keyed by product_id), then streams price updates touching 10% of the
products per round and measures each stage:

    push      MemoryConnector.push of a pyarrow batch (Python -> C++ buffer)
    tick      engine.step(): drain + upsert through the key index
    sql       an aggregate query over the live table (DuckDB, zero copy)
    read      table.to_arrow() (zero-copy export to pyarrow)

    python examples/benchmark_streams.py            # 1K, 10K, 1M products
    python examples/benchmark_streams.py --quick    # small sizes, few rounds
    python examples/benchmark_streams.py --json     # JSON lines for bench/run
"""

import argparse
import json
import statistics
import time

import pyarrow as pa
import pyarrow.compute as pc

from rills import MemoryConnector, RillEngine, schema

PRODUCTS_SCHEMA = schema(
    [("product_id", pa.int64()), ("category", pa.string()), ("price", pa.float64()), ("stock", pa.int64())],
    primary_key="product_id")


def make_batch(ids, round_no):
    n = len(ids)
    ids_arr = pa.array(ids, pa.int64())
    return pa.table({
        "product_id": ids_arr,
        "category": pc.cast(pc.add(pc.bit_wise_and(ids_arr, 15), 0), pa.string()),
        "price": pc.add(pc.multiply(pc.cast(ids_arr, pa.float64()), 0.01), float(round_no)),
        "stock": pa.array([round_no] * n, pa.int64()),
    })


def timed(fn):
    t0 = time.perf_counter()
    result = fn()
    return time.perf_counter() - t0, result


def bench_size(products, rounds, emit):
    engine = RillEngine(trigger_interval_ms=1000)
    table = engine.register_table("products", schema=PRODUCTS_SCHEMA)
    conn = MemoryConnector("products")
    engine.add_connector(conn)
    label = f"{products // 1000}k" if products < 1_000_000 else f"{products // 1_000_000}m"

    load = make_batch(list(range(products)), 0)
    push_s, _ = timed(lambda: conn.push(load))
    tick_s, _ = timed(engine.step)
    emit(f"load_{label}_rows_per_s", products / (push_s + tick_s), "rows/s")
    assert table.num_rows == products

    update_rows = max(1, products // 10)
    push_lat, tick_lat, sql_lat, read_lat = [], [], [], []
    for r in range(1, rounds + 1):
        start = (r * 7919) % products
        ids = [(start + i) % products for i in range(update_rows)]
        batch = make_batch(ids, r)
        s, _ = timed(lambda: conn.push(batch))
        push_lat.append(s)
        s, _ = timed(engine.step)
        tick_lat.append(s)
        s, _ = timed(lambda: engine.query_sql(
            "SELECT category, COUNT(*) AS n, AVG(price) AS avg_price, SUM(stock) AS stock "
            "FROM products GROUP BY category"))
        sql_lat.append(s)
        s, _ = timed(table.to_arrow)
        read_lat.append(s)
    assert table.num_rows == products

    def report(stage, lat, rows):
        med = statistics.median(lat)
        emit(f"{stage}_{label}_latency_ms", med * 1000.0, "ms")
        if rows:
            emit(f"{stage}_{label}_rows_per_s", rows / med if med > 0 else float("inf"), "rows/s")

    report("push", push_lat, update_rows)
    report("tick", tick_lat, update_rows)
    report("sql", sql_lat, products)
    report("read", read_lat, products)
    engine.close()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1K and 10K products, 3 rounds")
    parser.add_argument("--duration", type=float, default=None,
                        help="accepted for symmetry with the other demos; implies --quick when < 5")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--json", action="store_true", help='print {"name","value","unit"} JSON lines')
    args = parser.parse_args(argv)
    quick = args.quick or (args.duration is not None and args.duration < 5)
    sizes = [1_000, 10_000] if quick else [1_000, 10_000, 1_000_000]
    rounds = 3 if quick else args.rounds

    def emit(name, value, unit):
        if args.json:
            print(json.dumps({"name": f"python_{name}", "value": round(value, 4), "unit": unit}), flush=True)
        else:
            print(f"{name:<32} {value:>16,.2f} {unit}", flush=True)

    for size in sizes:
        if not args.json:
            print(f"--- {size:,} products ---")
        bench_size(size, rounds, emit)


if __name__ == "__main__":
    main()
