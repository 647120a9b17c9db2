#!/usr/bin/env python3
"""Streaming benchmark: throughput and latency per stage for 1K, 10K and 1M products.

Two workloads, each at 1K, 10K and 1M products:

products  a snapshot table keyed by product_id is loaded with every product,
          then price updates touching 10% of the products per round are
          streamed in; each stage is timed:
              push   MemoryConnector.push of a pyarrow batch
              tick   engine.step(): drain + upsert through the key index
              sql    an aggregate query over the live table
              read   table.to_arrow()
streams   the pure-Python Rill's own benchmark workload: two append streams,
          impressions (product_id, account_id, impression_id, system_ts) and
          clicks (15% of the impressions, a few seconds later), with 600 s
          retention on system_ts; product popularity is Zipf-like. Batches are
          pushed and ticked, then the top 10 products by impressions and by
          clicks over the last 10 minutes are queried with SQL.

Only the public API shared by `rills` and the pure-Python Rill (RillEngine,
MemoryConnector, RetentionPolicy, schema, register_table, add_connector,
push, step, query_sql, to_arrow, num_rows) is used, so `--impl seed` runs the
same code through the pure-Python implementation (github lijose/rill,
checkout given by --seed-repo or $RILL_SEED_REPO). The data is generated
from a fixed seed, so both implementations see the same rows.

    python examples/benchmark_streams.py            # both workloads, 1K, 10K, 1M
    python examples/benchmark_streams.py --quick    # small sizes, few rounds
    python examples/benchmark_streams.py --json     # JSON lines for bench/run
    python examples/benchmark_streams.py --impl seed --seed-repo ../rill

With --json every line is {"name", "value", "unit"}. Stable names (read by
bench/py_bench.py, which compares the implementations):
    py_upsert_rows_per_s_products_<n>   products: rows/s through push + step
    py_load_rows_per_s_products_<n>     products: the initial load, push + step
    py_query_ms_products_<n>            products: the aggregate query
    py_ingest_rows_per_s_streams_<n>    streams: rows/s through push + step
    py_query_ms_top10_impressions_<n>   streams: top-10 query, impressions
    py_query_ms_top10_clicks_<n>        streams: top-10 query, clicks
    py_check_*                          result digests (must agree between implementations)
and the per-stage figures of the products workload as python_<stage>_<n>_*.
"""

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np
import pyarrow as pa


def load_impl(impl, seed_repo):
    """Return the module providing RillEngine, MemoryConnector, RetentionPolicy, schema."""
    if impl == "rills":
        import rills
        return rills
    if not seed_repo or not os.path.isdir(seed_repo):
        sys.exit("--impl seed needs --seed-repo (or $RILL_SEED_REPO): a checkout of github lijose/rill")
    sys.path.insert(0, os.path.abspath(seed_repo))
    import rill
    return rill


def label_of(products):
    return f"{products // 1000}k" if products < 1_000_000 else f"{products // 1_000_000}m"


def timed(fn):
    t0 = time.perf_counter()
    result = fn()
    return time.perf_counter() - t0, result


def close(engine):
    # rills engines own a C++ loop and close(); the pure-Python one has neither.
    if hasattr(engine, "close"):
        engine.close()


def scalar(table, column):
    return table.column(column)[0].as_py()


# ---------------------------------------------------------------------------
# products: keyed snapshot table, 10% of the products updated per round.

def products_batch(ids, round_no):
    ids = np.asarray(ids, dtype=np.int64)
    return pa.record_batch({
        "product_id": pa.array(ids),
        "category": pa.array((ids & 15).astype(str)),
        "price": pa.array(ids * 0.01 + float(round_no)),
        "stock": pa.array(np.full(len(ids), round_no, dtype=np.int64)),
    })


def bench_products(rl, products, rounds, emit):
    label = label_of(products)
    products_schema = rl.schema(
        [("product_id", pa.int64()), ("category", pa.string()), ("price", pa.float64()),
         ("stock", pa.int64())],
        primary_key="product_id")
    engine = rl.RillEngine(trigger_interval_ms=1000)
    table = engine.register_table("products", schema=products_schema)
    conn = rl.MemoryConnector("products")
    engine.add_connector(conn)

    load = products_batch(np.arange(products), 0)
    push_s, _ = timed(lambda: conn.push(load))
    tick_s, _ = timed(engine.step)
    emit(f"python_load_{label}_rows_per_s", products / (push_s + tick_s), "rows/s")
    emit(f"py_load_rows_per_s_products_{label}", products / (push_s + tick_s), "rows/s")
    if table.num_rows != products:
        raise RuntimeError(f"load: {table.num_rows} rows in products, expected {products}")

    update_rows = max(1, products // 10)
    push_lat, tick_lat, sql_lat, read_lat = [], [], [], []
    query = ("SELECT category, COUNT(*) AS n, AVG(price) AS avg_price, SUM(stock) AS stock "
             "FROM products GROUP BY category")
    for r in range(1, rounds + 1):
        start = (r * 7919) % products
        batch = products_batch((start + np.arange(update_rows)) % products, r)
        s, _ = timed(lambda: conn.push(batch))
        push_lat.append(s)
        s, _ = timed(engine.step)
        tick_lat.append(s)
        s, _ = timed(lambda: engine.query_sql(query))
        sql_lat.append(s)
        s, _ = timed(table.to_arrow)
        read_lat.append(s)
    if table.num_rows != products:
        raise RuntimeError(f"after updates: {table.num_rows} rows in products, expected {products}")

    def report(stage, lat, rows):
        med = statistics.median(lat)
        emit(f"python_{stage}_{label}_latency_ms", med * 1000.0, "ms")
        if rows:
            emit(f"python_{stage}_{label}_rows_per_s", rows / med if med > 0 else float("inf"), "rows/s")

    report("push", push_lat, update_rows)
    report("tick", tick_lat, update_rows)
    report("sql", sql_lat, products)
    report("read", read_lat, products)
    ingest = statistics.median(p + t for p, t in zip(push_lat, tick_lat))
    emit(f"py_upsert_rows_per_s_products_{label}", update_rows / ingest, "rows/s")
    emit(f"py_query_ms_products_{label}", statistics.median(sql_lat) * 1000.0, "ms")

    check = engine.query_sql("SELECT COUNT(*) AS n, SUM(stock) AS stock, "
                             "ROUND(SUM(price), 2) AS price FROM products")
    emit(f"py_check_products_{label}_rows", scalar(check, "n"), "rows")
    emit(f"py_check_products_{label}_stock_sum", scalar(check, "stock"), "checksum")
    emit(f"py_check_products_{label}_price_sum", scalar(check, "price"), "checksum")
    close(engine)


# ---------------------------------------------------------------------------
# streams: impressions and clicks, append tables with 600 s retention.

def stream_batches(products, impressions, batches, seed):
    """Return `batches` (impressions, clicks) pairs of pyarrow batches, same for every run."""
    rng = np.random.default_rng(seed)
    # Zipf-like popularity: product k (1-based) drawn with weight k^-0.5.
    weights = 1.0 / np.sqrt(np.arange(1, products + 1))
    cdf = np.cumsum(weights)
    cdf /= cdf[-1]
    per_batch = impressions // batches
    clicks_per_batch = int(per_batch * 0.15)
    base_ts = time.time() - 300.0  # all events within the last 5 minutes
    out = []
    next_id = 100_000_000
    for _ in range(batches):
        product = np.minimum(np.searchsorted(cdf, rng.random(per_batch)), products - 1) + 1
        account = rng.integers(1, 10_001, per_batch)
        imp_id = np.arange(next_id, next_id + per_batch, dtype=np.int64)
        next_id += per_batch
        ts = base_ts + rng.uniform(0.0, 300.0, per_batch)
        clicked = rng.choice(per_batch, clicks_per_batch, replace=False)
        click_ts = ts[clicked] + rng.uniform(0.1, 5.0, clicks_per_batch)
        imp = pa.record_batch({"product_id": pa.array(product.astype(np.int64)),
                               "account_id": pa.array(account.astype(np.int64)),
                               "impression_id": pa.array(imp_id),
                               "system_ts": pa.array(ts)})
        clk = pa.record_batch({"product_id": imp.column(0).take(pa.array(clicked)),
                               "account_id": imp.column(1).take(pa.array(clicked)),
                               "click_impression_id": pa.array(imp_id[clicked]),
                               "system_ts": pa.array(click_ts)})
        out.append((imp, clk))
    return out


def bench_streams(rl, products, impressions, batches, query_reps, seed, emit):
    label = label_of(products)
    imp_schema = rl.schema([("product_id", pa.int64()), ("account_id", pa.int64()),
                            ("impression_id", pa.int64()), ("system_ts", pa.float64())],
                           mode="append")
    clk_schema = rl.schema([("product_id", pa.int64()), ("account_id", pa.int64()),
                            ("click_impression_id", pa.int64()), ("system_ts", pa.float64())],
                           mode="append")
    retention = rl.RetentionPolicy(max_age_seconds=600.0, time_column="system_ts")
    engine = rl.RillEngine(trigger_interval_ms=100)
    imp_table = engine.register_table("impressions", schema=imp_schema,
                                      retention_policy=retention, mode="append")
    clk_table = engine.register_table("clicks", schema=clk_schema,
                                      retention_policy=retention, mode="append")
    imp_conn = rl.MemoryConnector("impressions", schema=imp_schema)
    clk_conn = rl.MemoryConnector("clicks", schema=clk_schema)
    engine.add_connector(imp_conn)
    engine.add_connector(clk_conn)

    data = stream_batches(products, impressions, batches, seed)
    rows = sum(i.num_rows + c.num_rows for i, c in data)
    t0 = time.perf_counter()
    for imp, clk in data:
        imp_conn.push(imp)
        clk_conn.push(clk)
        engine.step()
    ingest_s = time.perf_counter() - t0
    expected_imp = sum(i.num_rows for i, _ in data)
    if imp_table.num_rows != expected_imp or clk_table.num_rows != rows - expected_imp:
        raise RuntimeError(f"streams: {imp_table.num_rows} impressions / {clk_table.num_rows} "
                           f"clicks kept, expected {expected_imp} / {rows - expected_imp}")
    emit(f"py_ingest_rows_per_s_streams_{label}", rows / ingest_s, "rows/s")

    cutoff = time.time() - 600.0
    top = ("SELECT product_id, COUNT(*) AS n FROM {t} WHERE system_ts >= {c} "
           "GROUP BY product_id ORDER BY n DESC, product_id LIMIT 10")
    for name, table in (("impressions", "impressions"), ("clicks", "clicks")):
        sql = top.format(t=table, c=cutoff)
        result = engine.query_sql(sql)  # warm-up, and the digest
        lat = [timed(lambda: engine.query_sql(sql))[0] for _ in range(query_reps)]
        emit(f"py_query_ms_top10_{name}_{label}", statistics.median(lat) * 1000.0, "ms")
        emit(f"py_check_streams_{label}_top10_{name}_sum", sum(result.column("n").to_pylist()),
             "checksum")
    close(engine)


STREAM_IMPRESSIONS = {1_000: 100_000, 10_000: 250_000, 1_000_000: 1_000_000}


def parse_sizes(text):
    out = []
    for part in text.split(","):
        part = part.strip().lower()
        mult = 1_000_000 if part.endswith("m") else 1_000 if part.endswith("k") else 1
        out.append(int(float(part.rstrip("km")) * mult))
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1K and 10K products, 3 rounds")
    parser.add_argument("--duration", type=float, default=None,
                        help="accepted for symmetry with the other demos; implies --quick when < 5")
    parser.add_argument("--rounds", type=int, default=10, help="update rounds (products workload)")
    parser.add_argument("--batches", type=int, default=5, help="micro-batches (streams workload)")
    parser.add_argument("--sizes", default=None, help="product counts, e.g. 1k,10k,1m")
    parser.add_argument("--workload", choices=["products", "streams", "all"], default="all")
    parser.add_argument("--impl", choices=["rills", "seed"], default="rills",
                        help="rills (this project) or seed (the pure-Python Rill)")
    parser.add_argument("--seed-repo", default=os.environ.get("RILL_SEED_REPO"),
                        help="checkout of github lijose/rill for --impl seed (default $RILL_SEED_REPO)")
    parser.add_argument("--data-seed", type=int, default=7, help="random seed of the stream data")
    parser.add_argument("--json", action="store_true", help='print {"name","value","unit"} JSON lines')
    args = parser.parse_args(argv)
    quick = args.quick or (args.duration is not None and args.duration < 5)
    sizes = parse_sizes(args.sizes) if args.sizes else (
        [1_000, 10_000] if quick else [1_000, 10_000, 1_000_000])
    rounds = 3 if quick else args.rounds
    rl = load_impl(args.impl, args.seed_repo)

    def emit(name, value, unit):
        if args.json:
            print(json.dumps({"name": name, "value": round(float(value), 4), "unit": unit}), flush=True)
        elif not name.startswith("py_check_"):
            print(f"{name:<40} {value:>16,.2f} {unit}", flush=True)

    for size in sizes:
        if args.workload in ("products", "all"):
            if not args.json:
                print(f"--- products: {size:,} products ({args.impl}) ---")
            bench_products(rl, size, rounds, emit)
        if args.workload in ("streams", "all"):
            impressions = STREAM_IMPRESSIONS.get(size, max(100_000, size))
            if quick:
                impressions = min(impressions, 50_000)
            if not args.json:
                print(f"--- streams: {size:,} products, {impressions:,} impressions ({args.impl}) ---")
            bench_streams(rl, size, impressions, args.batches, 3 if quick else 5,
                          args.data_seed, emit)


if __name__ == "__main__":
    main()
