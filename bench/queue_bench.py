"""queue_msgs_per_s: rills.queue.MessageQueue against Python's queue.Queue (in
memory) and against a plain SQLite table used as a queue (persisted), same
process, same messages, alternating repetitions. One JSON line per measurement
(the format of bench/run); ratio = Rill / baseline.

    .venv/bin/python bench/queue_bench.py [--messages 100000] [--batch 100] [--reps 3]
"""

import argparse
import json
import os
import queue as pyqueue
import sqlite3
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))

from rills.queue.message_queue import MessageQueue  # noqa: E402
from rills.queue.queue_store import QueueStore  # noqa: E402


def rill_memory(msgs, batch):
    q = MessageQueue("bench", max_size=len(msgs) + 1)
    t0 = time.perf_counter()
    for m in msgs:
        q.enqueue(m)
    while q.dequeue() is not None:
        pass
    return time.perf_counter() - t0


def py_memory(msgs, batch):
    q = pyqueue.Queue(maxsize=len(msgs) + 1)
    t0 = time.perf_counter()
    for m in msgs:
        q.put(m)
    while not q.empty():
        q.get()
    return time.perf_counter() - t0


def rill_sqlite(msgs, batch, path):
    q = MessageQueue("bench", max_size=len(msgs) + 1, store=QueueStore(path))
    t0 = time.perf_counter()
    for i in range(0, len(msgs), batch):
        q.enqueue_batch(msgs[i:i + batch])
    while q.dequeue_batch(batch):
        pass
    return time.perf_counter() - t0


def plain_sqlite(msgs, batch, path):
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("CREATE TABLE q (id INTEGER PRIMARY KEY AUTOINCREMENT, body TEXT NOT NULL)")
    t0 = time.perf_counter()
    for i in range(0, len(msgs), batch):
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany("INSERT INTO q (body) VALUES (?)", [(json.dumps(m),) for m in msgs[i:i + batch]])
        conn.execute("COMMIT")
    while True:
        conn.execute("BEGIN IMMEDIATE")
        rows = conn.execute("SELECT id, body FROM q ORDER BY id LIMIT ?", (batch,)).fetchall()
        if not rows:
            conn.execute("COMMIT")
            break
        [json.loads(b) for _, b in rows]
        conn.execute("DELETE FROM q WHERE id <= ?", (rows[-1][0],))
        conn.execute("COMMIT")
    conn.close()
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    msgs = [{"event": "page_view", "user_id": i, "value": i * 0.5} for i in range(a.messages)]
    tmp = tempfile.mkdtemp(prefix="rills_queue_bench_")
    runs = {"rill_mem": [], "py_mem": [], "rill_db": [], "sqlite_db": []}
    for rep in range(a.reps):
        runs["rill_mem"].append(rill_memory(msgs, a.batch))
        runs["py_mem"].append(py_memory(msgs, a.batch))
        runs["rill_db"].append(rill_sqlite(msgs, a.batch, f"{tmp}/r{rep}.db"))
        runs["sqlite_db"].append(plain_sqlite(msgs, a.batch, f"{tmp}/s{rep}.db"))
    n = a.messages
    for name, ours, theirs, baseline in (
            ("queue_msgs_per_s_memory", "rill_mem", "py_mem", "python queue.Queue"),
            ("queue_msgs_per_s_sqlite", "rill_db", "sqlite_db", "plain SQLite table as a queue")):
        value = n / statistics.median(runs[ours])
        base = n / statistics.median(runs[theirs])
        print(json.dumps({"name": name, "value": round(value), "unit": "msgs/s", "baseline": baseline,
                          "baseline_value": round(base), "ratio": round(value / base, 3), "reps": a.reps,
                          "messages": n, "batch": a.batch}), flush=True)


if __name__ == "__main__":
    main()
