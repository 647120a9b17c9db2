#!/usr/bin/env python3
"""cdc_postgres_rows_per_s and cdc_postgres_snapshot_rows_per_s (issue 25).

One PostgreSQL 15 (tests/python/pg_server.py: initdb into a temporary
directory, fsync off, 127.0.0.1) serves both sides of each measurement.

cdc_postgres_rows_per_s: changes applied per second, against the slot's own
limit. Each repetition creates two logical slots of the same kind (pgoutput)
on the same publication, then the server produces --changes changes as fast
as it can (INSERT ... SELECT generate_series in transactions of --txn rows,
then the same number of UPDATEs and a third of DELETEs, so the stream mixes
all three), so both slots hold the same WAL. Then
  - pg_recvlogical (Debian postgresql-client) reads slot A to /dev/null
    (-o proto_version=1 -o publication_names=…, --endpos = the server's LSN
    after the changes): the cost of decoding and sending the changes alone;
  - Rill: an engine with a PostgresCDCConnector (snapshot=False) on slot B
    applies them to a keyed table, timed from engine.start() until the
    connector's position passes the same end LSN and the table holds the
    final row count.
ratio = Rill's changes/s / pg_recvlogical's changes/s (target >= 0.7).

cdc_postgres_snapshot_rows_per_s: the initial snapshot of a --snapshot-rows
table (default 1M rows: id bigint key, name text, v double, n int, ts
timestamptz) into a keyed table, timed from engine.start() until the
snapshot is done and applied, against `COPY … TO STDOUT` alone (psql into
/dev/null) of the same table.

Repetitions alternate who goes first; medians are printed as bench/run's JSON
lines. Usage: bench/pg_cdc_bench.py [--changes N] [--snapshot-rows N] [--reps N]
"""

import argparse
import json
import pathlib
import shutil
import statistics
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "python"))
sys.path.insert(0, str(ROOT / "python"))

import pyarrow as pa  # noqa: E402

import pg_server  # noqa: E402

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("v", pa.float64()),
                    ("n", pa.int32())])


def lsn_int(text):
    hi, lo = text.split("/")
    return (int(hi, 16) << 32) | int(lo, 16)


def recvlogical(server, slot, pub, endpos):
    exe = shutil.which("pg_recvlogical") or f"{server.bin}/pg_recvlogical"
    t0 = time.perf_counter()
    subprocess.run([exe, "-d", server.dsn(), "--slot", slot, "--start", "--endpos", endpos,
                    "--no-loop", "-o", "proto_version=1", "-o", f"publication_names={pub}",
                    "-f", "/dev/null"], check=True, capture_output=True, timeout=600)
    return time.perf_counter() - t0


def rill_stream(server, slot, pub, endpos, final_rows):
    from rills import PostgresCDCConnector, RillEngine

    engine = RillEngine(trigger_interval_ms=10, metrics_path=None)
    engine.register_table("t", schema=SCHEMA, primary_key="id")
    cdc = PostgresCDCConnector("t", server.dsn(), "src", slot, publication=pub, snapshot=False,
                               max_buffer_records=200000)
    end = lsn_int(endpos)
    t0 = time.perf_counter()
    engine.add_connector(cdc)
    engine.start()
    try:
        while True:
            pos = json.loads(cdc.position())
            if lsn_int(pos["lsn"]) >= end and engine.get_table("t").num_rows == final_rows:
                break
            if time.perf_counter() - t0 > 600:
                raise RuntimeError(f"Rill did not reach {endpos}: {pos} {cdc.stats()}")
            time.sleep(0.002)
        elapsed = time.perf_counter() - t0
    finally:
        engine.stop()
        engine.close()
    return elapsed


def produce(conn, changes, txn):
    """INSERT `changes` rows, UPDATE as many, DELETE a third; return the change count."""
    conn.execute("TRUNCATE src")
    total = 0
    for start in range(0, changes, txn):
        conn.execute("INSERT INTO src SELECT g, 'name-' || g, g * 0.5, 0 "
                     "FROM generate_series(%s::bigint, %s::bigint) g",
                     (start, min(changes, start + txn) - 1))
        total += min(changes, start + txn) - start
    for start in range(0, changes, txn):
        conn.execute("UPDATE src SET n = n + 1, v = v + 1 WHERE id >= %s AND id < %s",
                     (start, start + txn))
        total += min(changes, start + txn) - start
    deleted = conn.execute("DELETE FROM src WHERE id % 3 = 0").rowcount
    return total + deleted + 1  # + the TRUNCATE


def bench_stream(server, changes, txn, reps):
    conn = server.connect()
    conn.execute("DROP TABLE IF EXISTS src")
    conn.execute("CREATE TABLE src (id bigint PRIMARY KEY, name text, v double precision, n int)")
    conn.execute("DROP PUBLICATION IF EXISTS bench_pub")
    conn.execute("CREATE PUBLICATION bench_pub FOR TABLE src")
    rill_rates, pg_rates = [], []
    for rep in range(reps):
        for s in ("bench_a", "bench_b"):
            conn.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                         "WHERE slot_name = %s", (s,))
            conn.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (s,))
        n = produce(conn, changes, txn)
        endpos = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()[0]
        final_rows = conn.execute("SELECT count(*) FROM src").fetchone()[0]
        order = ["pg", "rill"] if rep % 2 == 0 else ["rill", "pg"]
        for who in order:
            if who == "pg":
                pg_rates.append(n / recvlogical(server, "bench_a", "bench_pub", endpos))
            else:
                rill_rates.append(n / rill_stream(server, "bench_b", "bench_pub", endpos,
                                                  final_rows))
        print(f"[pg_cdc_bench] stream rep {rep}: {n} changes, rill {rill_rates[-1]:.0f}/s, "
              f"pg_recvlogical {pg_rates[-1]:.0f}/s", file=sys.stderr, flush=True)
    for s in ("bench_a", "bench_b"):
        conn.execute("SELECT pg_drop_replication_slot(%s)", (s,))
    conn.close()
    rill, pg = statistics.median(rill_rates), statistics.median(pg_rates)
    return {"name": "cdc_postgres_rows_per_s", "value": round(rill), "unit": "changes/s",
            "baseline": "pg_recvlogical (pgoutput, same slot kind) into /dev/null",
            "baseline_value": round(pg), "ratio": round(rill / pg, 3), "target": 0.7,
            "changes": n, "txn_rows": txn, "reps": reps}


def rill_snapshot(server, rows):
    from rills import PostgresCDCConnector, RillEngine

    engine = RillEngine(trigger_interval_ms=10, metrics_path=None)
    engine.register_table("t", schema=pa.schema(list(SCHEMA) + [("ts", pa.timestamp("us", "UTC"))]),
                          primary_key="id")
    cdc = PostgresCDCConnector("t", server.dsn(), "snap", "bench_snap",
                               max_buffer_records=400000)
    t0 = time.perf_counter()
    engine.add_connector(cdc)
    engine.start()
    try:
        while not (cdc.stats()["snapshot_done"] == 1 and engine.get_table("t").num_rows == rows):
            if time.perf_counter() - t0 > 600:
                raise RuntimeError(f"snapshot not done: {cdc.stats()}")
            time.sleep(0.002)
        elapsed = time.perf_counter() - t0
    finally:
        engine.stop()
        engine.close()
    return elapsed


def psql_copy(server):
    psql = shutil.which("psql")
    t0 = time.perf_counter()
    with open("/dev/null", "wb") as null:
        subprocess.run([psql, server.dsn(), "-X", "-q", "-c", "COPY snap TO STDOUT"],
                       stdout=null, check=True, timeout=600)
    return time.perf_counter() - t0


def bench_snapshot(server, rows, reps):
    conn = server.connect()
    conn.execute("DROP TABLE IF EXISTS snap")
    conn.execute("CREATE TABLE snap (id bigint PRIMARY KEY, name text, v double precision, "
                 "n int, ts timestamptz)")
    conn.execute("INSERT INTO snap SELECT g, 'name-' || g, g * 0.25, g %% 1000, "
                 "'2026-01-01'::timestamptz + g * interval '1 second' "
                 "FROM generate_series(1, %s) g", (rows,))
    conn.execute("VACUUM ANALYZE snap")
    rill_rates, pg_rates = [], []
    for rep in range(reps):
        order = ["pg", "rill"] if rep % 2 == 0 else ["rill", "pg"]
        for who in order:
            if who == "pg":
                pg_rates.append(rows / psql_copy(server))
            else:
                rill_rates.append(rows / rill_snapshot(server, rows))
        print(f"[pg_cdc_bench] snapshot rep {rep}: rill {rill_rates[-1]:.0f} rows/s, "
              f"COPY {pg_rates[-1]:.0f} rows/s", file=sys.stderr, flush=True)
    conn.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                 "WHERE slot_name = 'bench_snap'")
    conn.close()
    rill, pg = statistics.median(rill_rates), statistics.median(pg_rates)
    return {"name": "cdc_postgres_snapshot_rows_per_s", "value": round(rill), "unit": "rows/s",
            "baseline": "COPY ... TO STDOUT alone (psql into /dev/null)",
            "baseline_value": round(pg), "ratio": round(rill / pg, 3), "rows": rows, "reps": reps}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--changes", type=int, default=200000)
    parser.add_argument("--txn", type=int, default=1000)
    parser.add_argument("--snapshot-rows", type=int, default=1000000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--only", default="", help="stream | snapshot")
    args = parser.parse_args()
    reason = pg_server.missing_requirements()
    if reason:
        print(f"pg_cdc_bench: skipped: {reason}", file=sys.stderr)
        return 0
    server = pg_server.PostgresServer()
    server.start()
    try:
        if args.only in ("", "stream"):
            print(json.dumps(bench_stream(server, args.changes, args.txn, args.reps)), flush=True)
        if args.only in ("", "snapshot"):
            print(json.dumps(bench_snapshot(server, args.snapshot_rows, args.reps)), flush=True)
    finally:
        server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
