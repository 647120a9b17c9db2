#!/usr/bin/env python3
"""pgwire benchmarks: psycopg against Rill's pgwire and against a real PostgreSQL.

Both servers run on 127.0.0.1 in the same run with the same rows; repetitions
alternate between them. Prints one JSON line per measurement (bench/run's
format): the Rill value, PostgreSQL's value as the baseline and the ratio,
oriented so that bigger is better for Rill.

  pgwire_fetch_rows_per_s_1m   fetch a 1M-row, 6-column table (target >= 1.0x)
  pgwire_small_query_p50_ms_c1 / _p99_ms_c1 / _p50_ms_c16 / _p99_ms_c16
                               a one-row query from 1 and 16 concurrent
                               connections (target: latency <= 1.5x PostgreSQL's)
  pgwire_small_query_p50_ms_c16_procs / _p99_ms_c16_procs
                               the same 16 connections, each in a client
                               process of its own (the threads above share a GIL)
  pgwire_point_query_*         the same for a primary-key point lookup

Usage: bench/pgwire_bench.py [--rows N] [--reps N] [--server PATH]
Rill is the server users run (a RillEngine with quack_address, in a child
process of this script) unless --server names tests/cpp/server's
pgwire_test_server (the protocol without the network server around it).
PostgreSQL comes from Debian's `postgresql` (initdb/pg_ctl on PATH or in
/usr/lib/postgresql/*/bin), started with a temporary data directory.
"""

import argparse
import glob
import json
import os
import pathlib
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import psycopg

ROOT = pathlib.Path(__file__).resolve().parents[1]
SMALL_QUERY = "SELECT 42 AS answer, 'forty-two' AS label"
# A small query that reads the table: a point lookup (PostgreSQL gets an index
# on the column, as its users would make). SMALL_QUERY reads no table, so Rill
# answers it from a cached constant plan (issue 29); this one runs the query.
POINT_QUERY = "SELECT customer, amount FROM orders WHERE order_id = 4242"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pg_bin(name):
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    if not candidates:
        sys.exit(f"pgwire_bench: {name} not found (install Debian postgresql)")
    return candidates[-1]


class Postgres:
    """A throw-away PostgreSQL server (run as user postgres when we are root)."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="rill-pgbench-")
        self.port = free_port()
        self.prefix = []
        if os.geteuid() == 0:
            shutil.chown(self.dir, "postgres", "postgres")
            self.prefix = ["runuser", "-u", "postgres", "--"]
        data = os.path.join(self.dir, "data")
        subprocess.run(self.prefix + [pg_bin("initdb"), "-D", data, "-A", "trust", "-U", "bench",
                                      "-E", "UTF8"], check=True, stdout=subprocess.DEVNULL)
        subprocess.run(self.prefix + [pg_bin("pg_ctl"), "-D", data, "-w", "-l",
                                      os.path.join(self.dir, "log"), "-o",
                                      f"-p {self.port} -c listen_addresses=127.0.0.1 "
                                      f"-k {self.dir}", "start"],
                       check=True, stdout=subprocess.DEVNULL)
        self.data = data
        self.dsn = f"host=127.0.0.1 port={self.port} user=bench dbname=postgres"

    def close(self):
        subprocess.run(self.prefix + [pg_bin("pg_ctl"), "-D", self.data, "-m", "fast", "stop"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(self.dir, ignore_errors=True)


class Rill:
    """A server with `rows` orders: `path` (pgwire_test_server), or None for
    the real one (this script with --serve in a child process)."""

    def __init__(self, path, rows):
        cmd = ([path, "--rows", str(rows)] if path else
               [sys.executable, __file__, "--serve", "--rows", str(rows)])
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)
        port = int(self.proc.stdout.readline().split()[1])
        token = self.proc.stdout.readline().split()[1]
        self.dsn = f"host=127.0.0.1 port={port} user=bench dbname=rill password={token}"

    def close(self):
        self.proc.stdin.write("quit\n")
        self.proc.stdin.flush()
        self.proc.wait(timeout=30)


def serve(rows):
    """--serve: a RillEngine serving `rows` orders on 127.0.0.1 (PORT/TOKEN lines,
    then waits for "quit" on stdin)."""
    import contextlib
    import io

    import pyarrow as pa
    from rills import MemoryConnector, RillEngine, schema

    with tempfile.TemporaryDirectory(prefix="rill-pgbench-") as tmp:
        with contextlib.redirect_stdout(io.StringIO()):
            engine = RillEngine(trigger_interval_ms=3_600_000, quack_address="quack:127.0.0.1:0",
                                quack_token="bench-token", metrics_path=f"{tmp}/m.db")
        orders = schema([("order_id", pa.int64()), ("customer", pa.string()),
                         ("amount", pa.float64()), ("quantity", pa.int32()),
                         ("paid", pa.bool_()), ("created_at", pa.timestamp("us"))],
                        primary_key="order_id")
        engine.register_table("orders", schema=orders)
        conn = MemoryConnector(target_table="orders")
        engine.add_connector(conn)
        import numpy as np
        i = np.arange(rows, dtype=np.int64)
        names = np.array([f"customer_{k}" for k in range(7)], dtype=object)
        conn.push({
            "order_id": i,
            "customer": pa.array(names[i % 7], pa.string()),
            "amount": i * 1.25,
            "quantity": (i % 5 + 1).astype(np.int32),
            "paid": i % 2 == 0,
            "created_at": pa.array(1_700_000_000_000_000 + i * 1_000_000, pa.timestamp("us")),
        })
        engine.step()
        with contextlib.redirect_stdout(io.StringIO()):
            engine.start()
        port = engine.quack_address.rpartition(":")[2]
        print(f"PORT {port}\nTOKEN {engine.quack_token}", flush=True)
        for line in sys.stdin:
            if line.strip() == "quit":
                break
        engine.close()


FETCH = "SELECT order_id, customer, amount, quantity, paid, created_at FROM orders"


def load_postgres(pg, rows):
    with psycopg.connect(pg.dsn, autocommit=True) as conn:
        conn.execute(f"""
            CREATE TABLE orders AS SELECT i::bigint AS order_id,
              'customer_' || (i % 7) AS customer, i * 1.25::float8 AS amount,
              (i % 5 + 1)::int AS quantity, i % 2 = 0 AS paid,
              timestamp '2023-11-14 22:13:20' + i * interval '1 second' AS created_at
            FROM generate_series(0, {rows - 1}) i""")
        conn.execute("CREATE INDEX orders_order_id ON orders (order_id)")
        conn.execute("VACUUM ANALYZE orders")


def fetch_rate(dsn):
    with psycopg.connect(dsn, autocommit=True) as conn:
        start = time.perf_counter()
        rows = conn.execute(FETCH).fetchall()
        elapsed = time.perf_counter() - start
    return len(rows) / elapsed, len(rows)


def latencies(dsn, clients, per_client, query=SMALL_QUERY):
    results = []
    lock = threading.Lock()

    def worker():
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(query).fetchall()  # warm up
            mine = []
            for _ in range(per_client):
                start = time.perf_counter()
                conn.execute(query).fetchall()
                mine.append((time.perf_counter() - start) * 1000)
        with lock:
            results.extend(mine)

    threads = [threading.Thread(target=worker) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    results.sort()
    return results[len(results) // 2], results[min(len(results) - 1, int(len(results) * 0.99))]


def _client_process(dsn, per_client, query, start, out):
    """One client of latencies_procs: its own process, connection and GIL."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(query).fetchall()  # warm up
        start.wait()
        mine = []
        for _ in range(per_client):
            t = time.perf_counter()
            conn.execute(query).fetchall()
            mine.append((time.perf_counter() - t) * 1000)
    out.put(mine)


def latencies_procs(dsn, clients, per_client, query=SMALL_QUERY):
    """As latencies, with each client in a process of its own: the 16 threads of
    latencies share one GIL, so their timings include waiting for it."""
    import multiprocessing as mp
    ctx = mp.get_context("fork")
    start = ctx.Barrier(clients)
    out = ctx.Queue()
    procs = [ctx.Process(target=_client_process, args=(dsn, per_client, query, start, out))
             for _ in range(clients)]
    for p in procs:
        p.start()
    results = []
    for _ in procs:
        results.extend(out.get(timeout=300))
    for p in procs:
        p.join()
    results.sort()
    return results[len(results) // 2], results[min(len(results) - 1, int(len(results) * 0.99))]


def record(name, value, unit, base, reps, target):
    ratio = value / base if unit.endswith("/s") else base / value
    rec = {"name": name, "value": round(value, 4), "unit": unit, "baseline": "postgresql",
           "baseline_value": round(base, 4), "ratio": round(ratio, 4),
           "targets": [{"value": target, "met": ratio >= target}], "reps": reps}
    print(json.dumps(rec), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--server", default=None,
                    help="pgwire_test_server instead of the real server (RillEngine)")
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        return serve(args.rows)
    pg = Postgres()
    rill = None
    try:
        load_postgres(pg, args.rows)
        rill = Rill(args.server, args.rows)
        rates = {"rill": [], "pg": []}
        for _ in range(args.reps):
            for key, dsn in (("rill", rill.dsn), ("pg", pg.dsn)):
                rate, n = fetch_rate(dsn)
                assert n == args.rows, (key, n)
                rates[key].append(rate)
        record(f"pgwire_fetch_rows_per_s_{args.rows // 1_000_000}m"
               if args.rows >= 1_000_000 else f"pgwire_fetch_rows_per_s_{args.rows}",
               statistics.median(rates["rill"]), "rows/s", statistics.median(rates["pg"]),
               args.reps, 1.0)
        for kind, query in (("small_query", SMALL_QUERY), ("point_query", POINT_QUERY)):
            for clients in (1, 16):
                lat = {"rill": [], "pg": []}
                for _ in range(args.reps):
                    for key, dsn in (("rill", rill.dsn), ("pg", pg.dsn)):
                        lat[key].append(latencies(dsn, clients, 200 if clients == 1 else 50, query))
                for i, pct in ((0, "p50"), (1, "p99")):
                    # Target: Rill's latency <= 1.5x PostgreSQL's, i.e. ratio >= 1/1.5.
                    record(f"pgwire_{kind}_{pct}_ms_c{clients}",
                           statistics.median(x[i] for x in lat["rill"]), "ms",
                           statistics.median(x[i] for x in lat["pg"]), args.reps, round(1 / 1.5, 4))
            # 16 clients in 16 processes (no shared GIL on the client side).
            lat = {"rill": [], "pg": []}
            for _ in range(args.reps):
                for key, dsn in (("rill", rill.dsn), ("pg", pg.dsn)):
                    lat[key].append(latencies_procs(dsn, 16, 50, query))
            for i, pct in ((0, "p50"), (1, "p99")):
                record(f"pgwire_{kind}_{pct}_ms_c16_procs",
                       statistics.median(x[i] for x in lat["rill"]), "ms",
                       statistics.median(x[i] for x in lat["pg"]), args.reps, round(1 / 1.5, 4))
    finally:
        if rill is not None:
            rill.close()
        pg.close()


if __name__ == "__main__":
    main()
