#!/usr/bin/env python3
"""Fixed cost per Python call of `rills` (push, step, query_sql, to_arrow),
each against the pyarrow (or DuckDB) operation it cannot avoid (issue 16).

    .venv/bin/python bench/py_call_bench.py [--rows 100] [--table-rows 1000] [--reps 5]

A keyed table of `--table-rows` products (the products workload of
examples/benchmark_streams.py) receives batches of `--rows` rows. Every
figure is the median of `--calls` calls, and the median of that over
`--reps` repetitions, interleaving ours and the baseline. One JSON line per
call on stdout:

    {"name": "py_call_us_push", "value": <us>, "unit": "us",
     "baseline": "<the pyarrow operation>", "baseline_value": <us>,
     "ratio": baseline_value / value, ...}

ratio is oriented like bench/run (bigger is better for Rill): 1.0 means the
call costs what the pyarrow operation alone costs; 0.1 means ten times as
much. The baselines:
    push      MemoryConnector.push(batch)      vs pa.Table.from_batches([batch]).__arrow_c_stream__()
              (the conversion every push needs: a Table, exported as a C stream)
    step      engine.step() after a push       vs pa.concat_tables([live, batch]) (append in pyarrow)
    step_idle engine.step() with nothing new   vs the same concat (the floor of a tick)
    query     engine.query_sql(aggregate)      vs duckdb over the same pyarrow table
    to_arrow  table.to_arrow()                 vs importing the same table through the
              Arrow C stream (pa.RecordBatchReader._import_from_c_capsule(...).read_all())
"""
import argparse
import json
import statistics
import sys
import time

import numpy as np
import pyarrow as pa

QUERY = ("SELECT category, COUNT(*) AS n, AVG(price) AS avg_price, SUM(stock) AS stock "
         "FROM products GROUP BY category")


def products_batch(ids, round_no):
    ids = np.asarray(ids, dtype=np.int64)
    return pa.record_batch({
        "product_id": pa.array(ids),
        "category": pa.array((ids & 15).astype(str)),
        "price": pa.array(ids * 0.01 + float(round_no)),
        "stock": pa.array(np.full(len(ids), round_no, dtype=np.int64)),
    })


def median_us(fn, calls):
    times = []
    for i in range(calls):
        t0 = time.perf_counter()
        fn(i)
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100, help="rows per pushed batch")
    parser.add_argument("--table-rows", type=int, default=1000, help="keys in the table")
    parser.add_argument("--calls", type=int, default=400, help="calls per measurement")
    parser.add_argument("--reps", type=int, default=5, help="repetitions (median)")
    args = parser.parse_args()

    import duckdb
    import rills

    schema = rills.schema([("product_id", pa.int64()), ("category", pa.string()),
                           ("price", pa.float64()), ("stock", pa.int64())],
                          primary_key="product_id")
    engine = rills.RillEngine(trigger_interval_ms=1000)
    table = engine.register_table("products", schema=schema)
    conn = rills.MemoryConnector("products")
    engine.add_connector(conn)
    n = args.table_rows
    conn.push(products_batch(np.arange(n), 0))
    engine.step()
    batches = [products_batch((r * 7919 + np.arange(args.rows)) % n, r) for r in range(1, 11)]
    live = table.to_arrow()
    duck = duckdb.connect()
    duck.register("products", live)

    def user_columns(t):
        return t.select([f.name for f in t.schema if not f.name.startswith("z_")])

    def push_step(i):
        conn.push(batches[i % 10])
        engine.step()

    # name -> (ours, baseline name, baseline)
    calls = {
        "push": (lambda i: (conn.push(batches[i % 10]), engine.step() if i % 10 == 9 else None),
                 "pa.Table.from_batches([batch]).__arrow_c_stream__()",
                 lambda i: pa.Table.from_batches([batches[i % 10]]).__arrow_c_stream__()),
        "push_step": (push_step, "pa.concat_tables([live, batch])",
                      lambda i: pa.concat_tables([user_columns(live), pa.Table.from_batches([batches[i % 10]])])),
        "step_idle": (lambda i: engine.step(), "pa.concat_tables([live, batch])",
                      lambda i: pa.concat_tables([user_columns(live), pa.Table.from_batches([batches[i % 10]])])),
        "query": (lambda i: engine.query_sql(QUERY), "duckdb: same SQL over the pyarrow table",
                  lambda i: duck.execute(QUERY).fetch_arrow_table()),
        "to_arrow": (lambda i: table.to_arrow(), "C stream import of the same pyarrow table",
                     lambda i: pa.RecordBatchReader._import_from_c_capsule(
                         live.__arrow_c_stream__()).read_all()),
    }
    results = {name: ([], []) for name in calls}
    for rep in range(args.reps):
        for name, (ours, _, base) in calls.items():
            pair = [(0, ours), (1, base)] if rep % 2 == 0 else [(1, base), (0, ours)]
            for which, fn in pair:
                if name == "query":
                    fn(0)  # warm-up
                results[name][which].append(median_us(fn, args.calls))
        live = table.to_arrow()  # the baselines follow the live table's chunking
        duck.register("products", live)
    for name, (_, base_name, _) in calls.items():
        ours = statistics.median(results[name][0])
        base = statistics.median(results[name][1])
        print(json.dumps({
            "name": f"py_call_us_{name}", "value": round(ours, 2), "unit": "us",
            "baseline": base_name, "baseline_value": round(base, 2),
            "ratio": round(base / ours, 3), "rows": args.rows, "table_rows": n,
            "chunks": table.num_chunks, "reps": args.reps}), flush=True)
    engine.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
