"""Overload harness for memory_budget_policy="shed": input at about 3x what the
engine drains, with a memory budget; RSS and every pushed row accounted for.

Used by tests/python/test_memory_budget.py and bench/faults/engine.py
("overload_shed"). Run directly (prints one JSON line):

    python tests/python/overload_shed.py --budget-mb 128 --seconds 6 [--policy warn]

The run happens in a child process, so the RSS it reports is its own. The child:
  - an engine (10 ms ticks, metrics_path None) with memory_budget_mb and the
    policy, max_records_per_tick=TICK_ROWS, and a subscriber on the table that
    sleeps 10 ms per new version: a tick takes at most TICK_ROWS rows per
    ~10 ms, which bounds what the engine drains;
  - a keyed table `t` of unique ids (it grows with every row it gets: nothing
    but the budget bounds it) fed by a MemoryConnector (max_buffer_records
    BUFFER_ROWS, on_overflow drop_oldest);
  - a pusher thread that pushes PUSH_ROWS fresh rows every 10 ms (each
    ~WIDTH bytes, freshly allocated in the Arrow pool);
  - a sampler thread that reads VmRSS from /proc/self/status every 20 ms.
It reports the RSS before the input started and the peak, the rows pushed,
in the table, buffered and dropped (lost = pushed - table - buffered -
dropped - refused), the drain rate measured while not shedding, and the
shedding alerts.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from typing import Any, Dict

TICK_ROWS = 1500
# Per 10 ms. A tick takes TICK_ROWS rows but lasts ~13-14 ms here (the 10 ms
# subscriber, the upsert), so the engine drains ~110k rows/s: 3300 rows per
# 10 ms is ~3x that. The report gives the measured overload_factor.
PUSH_ROWS = 3300
BUFFER_ROWS = 4 * PUSH_ROWS
WIDTH = 200
PERIOD = 0.010


def vm_rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def child(budget_mb: float, policy: str, seconds: float) -> Dict[str, Any]:
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from rills import MemoryConnector, RillEngine

    engine = RillEngine(trigger_interval_ms=10, metrics_path=None, memory_budget_mb=budget_mb,
                        memory_budget_policy=policy, max_records_per_tick=TICK_ROWS)
    engine.register_table("t", schema=pa.schema([("id", pa.int64()), ("v", pa.string())]),
                          primary_key="id")
    conn = MemoryConnector("t", max_buffer_records=BUFFER_ROWS, on_overflow="drop_oldest")
    engine.add_connector(conn)
    engine.subscribe("t", lambda name, table: time.sleep(PERIOD))  # the slow consumer
    base = pa.array(np.arange(PUSH_ROWS, dtype=np.int64))
    value = pa.scalar("x" * WIDTH)
    stop = threading.Event()
    pushed = [0]
    refused = [0]
    rss_max = [0]
    # (wall time, rows in the table, shedding) while not shedding: the drain rate.
    drain = {"rows": 0, "seconds": 0.0}

    def pusher() -> None:
        next_at = time.monotonic()
        while not stop.is_set():
            ids = pc.add(base, pa.scalar(pushed[0], pa.int64()))  # fresh buffers every push
            batch = pa.record_batch([ids, pa.repeat(value, PUSH_ROWS)], names=["id", "v"])
            try:
                conn.push(batch)
            except BufferError:
                refused[0] += PUSH_ROWS
            pushed[0] += PUSH_ROWS
            next_at += PERIOD
            time.sleep(max(0.0, next_at - time.monotonic()))

    def sampler() -> None:
        last_t, last_rows = time.monotonic(), 0
        while not stop.is_set():
            rss_max[0] = max(rss_max[0], vm_rss_bytes())
            time.sleep(0.02)
            now, rows = time.monotonic(), engine.get_table("t").num_rows
            if not engine.get_metrics().get("shedding") and rows > last_rows:
                drain["rows"] += rows - last_rows
                drain["seconds"] += now - last_t
            last_t, last_rows = now, rows

    rss_start = vm_rss_bytes()
    engine.start()
    threads = [threading.Thread(target=pusher), threading.Thread(target=sampler)]
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    engine.stop()
    rss_max[0] = max(rss_max[0], vm_rss_bytes())
    stats = conn.stats()
    in_table = engine.get_table("t").num_rows
    events = [e["message"] for e in engine.recent_events() if e["component"] == "memory_budget"]
    budget = int(budget_mb * 1024 * 1024)
    accounted = in_table + stats["buffered_records"] + stats["dropped_records"] + refused[0]
    drain_rate = drain["rows"] / drain["seconds"] if drain["seconds"] else None
    push_rate = PUSH_ROWS / PERIOD
    report = {
        "policy": policy, "seconds": seconds, "budget_bytes": budget,
        "rss_start_bytes": rss_start, "rss_max_bytes": rss_max[0],
        "rss_growth_over_budget": (rss_max[0] - rss_start) / budget,
        "allocated_bytes_end": engine.check_memory_budget()[0],
        "pushed": pushed[0], "in_table": in_table, "buffered": stats["buffered_records"],
        "dropped": stats["dropped_records"], "refused": refused[0],
        "lost": pushed[0] - accounted,
        "drain_rows_per_second": drain_rate,
        "push_rows_per_second": push_rate,
        "overload_factor": push_rate / drain_rate if drain_rate else None,
        "shed_started": sum("shedding input" in m for m in events),
        "shed_ended": sum("taking input again" in m for m in events),
        "buffer_bytes_max": BUFFER_ROWS * (WIDTH + 16),
    }
    engine.close()
    return report


def run(budget_mb: float = 128, policy: str = "shed", seconds: float = 6.0) -> Dict[str, Any]:
    """Run the overload in a child process; return its report."""
    env = dict(os.environ)
    here = os.path.dirname(os.path.abspath(__file__))
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.join(here, "..", "..", "python")] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    done = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--child", "--budget-mb", str(budget_mb),
         "--policy", policy, "--seconds", str(seconds)],
        capture_output=True, text=True, env=env, timeout=seconds + 120)
    if done.returncode != 0:
        raise AssertionError(f"overload child failed ({done.returncode}): {done.stderr[-4000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--budget-mb", type=float, default=128)
    p.add_argument("--policy", default="shed")
    p.add_argument("--seconds", type=float, default=6.0)
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(child(args.budget_mb, args.policy, args.seconds)), flush=True)
    else:
        print(json.dumps(run(args.budget_mb, args.policy, args.seconds)), flush=True)


if __name__ == "__main__":
    main()
