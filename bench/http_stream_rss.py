#!/usr/bin/env python3
"""bench/http_stream_rss.py: peak RSS of the server while it streams a large
CSV result over POST /api/v1/query (issue 23: results are streamed from
DuckDB's chunks, never built whole).

Starts a `rills` engine serving HTTP in a child process, runs a warm-up query,
resets the child's peak-RSS mark (/proc/PID/clear_refs), downloads the result
of SQL (default: 10M rows of two BIGINT columns) as CSV, reading it as fast as
it comes, and reads the child's VmHWM. One chunk is the server's piece of
8192 rows; its size is measured as the largest chunk received.

Usage: .venv/bin/python bench/http_stream_rss.py [--rows N] [--format csv|ndjson|arrow]
Prints one JSON line: {"name": "http_stream_rss", "rows", "bytes", "seconds",
"idle_rss_bytes", "peak_rss_bytes", "peak_over_idle_bytes", "chunk_bytes",
"peak_over_idle_in_chunks"}.
"""
import argparse
import http.client
import json
import os
import pathlib
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
TOKEN = "rss-token"

CHILD = r"""
import signal, sys, time
from rills import RillEngine
eng = RillEngine(trigger_interval_ms=100, quack_address="quack:127.0.0.1:0",
                 quack_token=sys.argv[1], metrics_path=None)
eng.start()
print("ADDR", eng.quack_address, flush=True)
stop = []
signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
while not stop:
    time.sleep(0.05)
eng.close()
"""


def status_kb(pid, field):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(field)


def post_query(port, sql, fmt, on_chunk):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    conn.request("POST", "/api/v1/query", body=json.dumps({"sql": sql, "format": fmt}),
                 headers={"Authorization": f"Bearer {TOKEN}",
                          "Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        raise RuntimeError(f"{resp.status}: {resp.read()[:300]!r}")
    total = 0
    while True:
        piece = resp.read1(1 << 20)
        if not piece:
            break
        total += len(piece)
        on_chunk(piece)
    conn.close()
    return total


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--format", default="csv", choices=["csv", "ndjson", "arrow"])
    args = parser.parse_args()
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
    child = subprocess.Popen([sys.executable, "-c", CHILD, TOKEN], env=env,
                             stdout=subprocess.PIPE, text=True)
    try:
        line = ""
        while not line.startswith("ADDR "):
            line = child.stdout.readline()
            if not line:
                raise RuntimeError("the engine process exited before serving")
        port = int(line.split()[1].rpartition(":")[2])
        sql = f"SELECT range AS i, range * 2 AS j FROM range({args.rows})"
        # Warm up: DuckDB's pools, the worker threads, the allocator's arenas.
        post_query(port, f"SELECT range AS i, range * 2 AS j FROM range(200000)", args.format,
                   lambda piece: None)
        time.sleep(0.5)
        with open(f"/proc/{child.pid}/clear_refs", "w") as f:
            f.write("5")  # reset VmHWM to the current RSS
        idle = status_kb(child.pid, "VmRSS")
        # The server writes pieces of one batch each; the client's reads may
        # merge or split them, so the chunk size is computed from the first
        # batch's share of the result below.
        start = time.time()
        total = post_query(port, sql, args.format, lambda piece: None)
        seconds = time.time() - start
        peak = status_kb(child.pid, "VmHWM")
        chunk = total * 8192 / args.rows  # bytes of one 8192-row piece, on average
        print(json.dumps({
            "name": "http_stream_rss", "format": args.format, "rows": args.rows,
            "bytes": total, "seconds": round(seconds, 2), "idle_rss_bytes": idle,
            "peak_rss_bytes": peak, "peak_over_idle_bytes": peak - idle,
            "chunk_bytes": int(chunk),
            "peak_over_idle_in_chunks": round((peak - idle) / chunk, 2)}))
    finally:
        child.send_signal(15)
        child.wait(timeout=60)


if __name__ == "__main__":
    main()
