#!/usr/bin/env python3
"""sink_postgres_rows_per_s: Rill's PostgreSQL sink writer against psycopg's COPY
of the same rows into the same table, same server, same run (issue 24, target
>= 1.0x).

One PostgreSQL 15 (tests/python/pg_server.py: initdb into a temporary
directory, fsync off, 127.0.0.1) serves both. The rows (id bigint key, name
text, price double, qty integer, ts timestamptz) are generated once with a fixed
seed and written to an Arrow IPC file; each repetition empties the table
(TRUNCATE) and then
  - Rill: build/release/bench/postgres_sink_bench writes them through
    PostgresSinkWriter in batches of --batch rows, one Write + Commit (one
    transaction, with the rill_sink_progress row) per batch: binary COPY into
    the staging table, then INSERT ... ON CONFLICT (upsert) or INSERT (append);
  - psycopg (3, C implementation): one transaction per batch of the same rows
    (already Python tuples, converted before the clock starts), COPY ... FROM
    STDIN with cursor.copy().write_row(), both in text and in binary format
    (set_types); the faster of the two is the baseline.
Repetitions alternate who goes first; medians are printed. Modes: upsert (the
table has the PRIMARY KEY) and append (no key), both into an empty table; and,
with --modes upsert_updates, `sink_postgres_rows_per_s_upsert_updates`: every
row an update of a key the table holds (the staging path of the writer),
against psycopg doing what an upsert takes there: COPY (binary) into a
temporary table, then INSERT ... ON CONFLICT (id) DO UPDATE, per batch.

Usage: bench/postgres_sink_bench.py [--rows N] [--batch N] [--reps N] [--modes upsert,append]
Prints one JSON line per mode (bench/run's format).
"""

import argparse
import datetime
import json
import pathlib
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "python"))

import pyarrow as pa  # noqa: E402
import pyarrow.ipc  # noqa: E402,F401

import pg_server  # noqa: E402

TABLE = "bench_items"
COLUMNS = ["id", "name", "price", "qty", "ts"]


def make_rows(n, seed=24):
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    base = 1764547200_000000
    return pa.table({
        "id": pa.array(range(n), pa.int64()),
        "name": pa.array(["".join(rng.choices(letters, k=rng.randint(8, 16))) for _ in range(n)]),
        "price": pa.array([rng.random() * 1000 for _ in range(n)], pa.float64()),
        "qty": pa.array([rng.randint(0, 1000) for _ in range(n)], pa.int32()),
        "ts": pa.array([base + i * 1000 for i in range(n)], pa.timestamp("us", tz="UTC")),
    })


def create_table(conn, mode):
    key = " PRIMARY KEY" if mode.startswith("upsert") else ""
    conn.execute(f"DROP TABLE IF EXISTS {TABLE}")
    conn.execute(f"CREATE TABLE {TABLE} (id bigint{key}, name text, price double precision, "
                 f"qty integer, ts timestamptz)")


def run_rill(server, ipc, mode, batch):
    binary = ROOT / "build" / "release" / "bench" / "postgres_sink_bench"
    op = "update" if mode == "upsert_updates" else "insert"
    mode = "upsert" if mode == "upsert_updates" else mode
    out = subprocess.run([str(binary), "--dsn", server.dsn(), "--table", TABLE, "--ipc", str(ipc),
                          "--mode", mode, "--batch", str(batch), "--op", op],
                         check=True, stdout=subprocess.PIPE, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["seconds"]


TYPES = ["int8", "text", "float8", "int4", "timestamptz"]


def run_psycopg(server, rows, batch, binary, staged=False):
    with server.connect() as conn:
        conn.autocommit = False
        fmt = " (FORMAT BINARY)" if binary else ""
        into = "stage" if staged else TABLE
        updates = ", ".join(f"{c} = EXCLUDED.{c}" for c in COLUMNS[1:])
        start = time.perf_counter()
        for begin in range(0, len(rows), batch):
            with conn.cursor() as cur:
                if staged:
                    cur.execute(f"CREATE TEMP TABLE stage (LIKE {TABLE}) ON COMMIT DROP")
                with cur.copy(f"COPY {into} ({', '.join(COLUMNS)}) FROM STDIN{fmt}") as copy:
                    if binary:
                        copy.set_types(TYPES)
                    for row in rows[begin:begin + batch]:
                        copy.write_row(row)
                if staged:
                    cur.execute(f"INSERT INTO {TABLE} SELECT * FROM stage "
                                f"ON CONFLICT (id) DO UPDATE SET {updates}")
            conn.commit()
        return time.perf_counter() - start


def count(server):
    with server.connect() as conn:
        return conn.execute(f"SELECT count(*) FROM {TABLE}").fetchone()[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=500_000)
    parser.add_argument("--batch", type=int, default=100_000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--modes", default="upsert,append")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # `timeout`: stop the server
    reason = pg_server.missing_requirements()
    if reason:
        sys.exit(f"postgres_sink_bench: {reason}")
    table = make_rows(args.rows)
    columns = [table.column(c).to_pylist() for c in COLUMNS]
    rows = list(zip(*columns))
    server = pg_server.PostgresServer()
    try:
        server.start()
        with tempfile.TemporaryDirectory() as tmp:
            ipc = pathlib.Path(tmp) / "rows.arrow"
            with pa.ipc.new_file(str(ipc), table.schema) as writer:
                writer.write_table(table)
            for mode in args.modes.split(","):
                rill, text, binary = [], [], []
                with server.connect() as conn:
                    create_table(conn, mode)
                for rep in range(args.reps + 1):  # the first repetition warms up
                    order = ["rill", "text", "binary"]
                    if rep % 2:
                        order.reverse()
                    if mode == "upsert_updates":
                        order = ["rill", "binary"] if rep % 2 == 0 else ["binary", "rill"]
                    for who in order:
                        with server.connect() as conn:
                            conn.execute(f"TRUNCATE {TABLE}")
                        if mode == "upsert_updates":  # the table holds every key
                            run_psycopg(server, rows, len(rows), True)
                        with server.connect() as conn:
                            conn.execute("VACUUM ANALYZE " + TABLE)
                        if who == "rill":
                            seconds = run_rill(server, ipc, mode, args.batch)
                        else:
                            seconds = run_psycopg(server, rows, args.batch, who == "binary",
                                                  staged=mode == "upsert_updates")
                        assert count(server) == args.rows, f"{who} wrote {count(server)} rows"
                        if rep > 0:
                            {"rill": rill, "text": text, "binary": binary}[who].append(seconds)
                rill_rate = args.rows / statistics.median(rill)
                text_rate = args.rows / statistics.median(text) if text else 0
                binary_rate = args.rows / statistics.median(binary)
                baseline = max(text_rate, binary_rate)
                ratio = rill_rate / baseline
                print(json.dumps({
                    "name": f"sink_postgres_rows_per_s_{mode}",
                    "value": round(rill_rate), "unit": "rows/s",
                    "baseline": ("psycopg COPY (binary) into a temporary table + INSERT ... "
                                 "ON CONFLICT DO UPDATE" if mode == "upsert_updates"
                                 else "psycopg COPY (best of text, binary)"),
                    "baseline_value": round(baseline), "ratio": round(ratio, 3),
                    "targets": [{"of": "ratio", "op": ">=", "value": 1.0, "met": ratio >= 1.0}],
                    "reps": args.reps, "rows": args.rows, "batch_rows": args.batch,
                    "psycopg_text_rows_per_s": round(text_rate),
                    "psycopg_binary_rows_per_s": round(binary_rate),
                    "rill_seconds": [round(s, 3) for s in rill],
                    "mode": mode,
                }), flush=True)
    finally:
        server.close()


if __name__ == "__main__":
    main()
