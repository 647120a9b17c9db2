#!/usr/bin/env python3
"""Checkpoint benchmarks (issue 14), one JSON line each, medians, competitor
in the same process on the same data:

  checkpoint_mb_per_s        writing a checkpoint of a 1M-row table (MB of the
                             table's Arrow buffers per second, fsync included)
                             against pyarrow writing the same table to one
                             file of the same format and fsyncing it.
  checkpoint_tick_p99_ratio  tick latency p99 while checkpoints are written
                             back to back, against without (target <= 1.2).
  restore_s_1m               restoring the 1M-row table (read + rebuilding the
                             key index) against pyarrow reading the same file.

    .venv/bin/python bench/checkpoint_bench.py [--rows 1000000] [--reps 3] [--format parquet|arrow]
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq

from rills import Checkpointer, RillEngine


def make_table(rows: int) -> pa.Table:
    import numpy as np

    rng = np.random.default_rng(1)
    return pa.table({
        "id": pa.array(np.arange(rows, dtype=np.int64)),
        "amount": pa.array(rng.random(rows) * 100),
        "tier": pa.array(np.array(["gold", "silver", "bronze", "platinum"])[rng.integers(0, 4, rows)]),
        "qty": pa.array(rng.integers(0, 1000, rows, dtype=np.int64)),
    })


def engine_with(data: pa.Table) -> RillEngine:
    engine = RillEngine(trigger_interval_ms=10, metrics_path=None)
    engine.register_table("orders", schema=data.schema, primary_key="id").upsert(data)
    return engine


def pyarrow_write(table: pa.Table, path: str, fmt: str) -> None:
    if fmt == "parquet":
        pq.write_table(table, path, compression="none")
    else:
        feather.write_feather(table, path, compression="uncompressed")
    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)


def bench_write_restore(rows: int, reps: int, fmt: str, tmp: str) -> None:
    data = make_table(rows)
    engine = engine_with(data)
    stored = engine.get_table("orders").to_arrow()  # with z_insert_ts / z_update_ts
    mb = stored.nbytes / 1e6
    rill_w, arrow_w, rill_r, arrow_r = [], [], [], []
    for rep in range(reps):
        ck = Checkpointer(os.path.join(tmp, f"ck{rep}"), format=fmt, keep=1)
        path = os.path.join(tmp, f"pa{rep}.{fmt}")
        order = [0, 1] if rep % 2 == 0 else [1, 0]
        for which in order:
            t = time.perf_counter()
            if which == 0:
                ck.save_snapshots(engine)
                rill_w.append(time.perf_counter() - t)
            else:
                pyarrow_write(stored, path, fmt)
                arrow_w.append(time.perf_counter() - t)
        file = os.path.join(tmp, f"ck{rep}", "current", "orders." + ("parquet" if fmt == "parquet" else "arrow"))
        for which in order:
            t = time.perf_counter()
            if which == 0:
                fresh = RillEngine(metrics_path=None)
                Checkpointer(os.path.join(tmp, f"ck{rep}")).restore_snapshots(fresh)
                rill_r.append(time.perf_counter() - t)
                assert fresh.get_table("orders").num_rows == rows
                fresh.close()
            else:
                (pq.read_table if fmt == "parquet" else feather.read_table)(file)
                arrow_r.append(time.perf_counter() - t)
    w_r, w_a = statistics.median(rill_w), statistics.median(arrow_w)
    print(json.dumps({
        "name": "checkpoint_mb_per_s", "value": round(mb / w_r, 1), "unit": "MB/s",
        "baseline": f"pyarrow_write_{fmt}_fsync", "baseline_value": round(mb / w_a, 1),
        "ratio": round(w_a / w_r, 3), "rows": rows, "table_mb": round(mb, 1), "format": fmt,
        "reps": reps}), flush=True)
    r_r, r_a = statistics.median(rill_r), statistics.median(arrow_r)
    print(json.dumps({
        "name": "restore_s_1m", "value": round(r_r, 4), "unit": "s",
        "baseline": f"pyarrow_read_{fmt}", "baseline_value": round(r_a, 4),
        "ratio": round(r_a / r_r, 3), "rows": rows, "format": fmt, "reps": reps,
        "note": "restore includes rebuilding the primary-key index"}), flush=True)
    engine.close()


def tick_latencies(engine: RillEngine, batch: pa.Table, ticks: int) -> list:
    table = engine.get_table("orders")
    out = []
    for i in range(ticks):
        table.upsert(batch)
        t = time.perf_counter()
        engine.step()
        out.append(time.perf_counter() - t)
        time.sleep(0.002)
    return out


def p99(values: list) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(0.99 * len(values)))]


def bench_tick_ratio(rows: int, reps: int, fmt: str, tmp: str, ticks: int) -> None:
    data = make_table(rows)
    engine = engine_with(data)
    batch = data.slice(0, 1000)
    base, during, written = [], [], 0
    for rep in range(reps):
        base.append(p99(tick_latencies(engine, batch, ticks)))
        engine.checkpointer = Checkpointer(os.path.join(tmp, f"tick{rep}"), interval_seconds=1e-6,
                                           format=fmt, keep=1)
        from rills import _core, checkpoint

        checkpoint.on_start(engine)  # periodic: a new capture whenever the writer is idle
        during.append(p99(tick_latencies(engine, batch, ticks)))
        core = engine.checkpointer._bind(engine)
        _core.checkpoint_stop(core)
        written += engine.checkpointer.stats(engine)["written"]
        _core.checkpoint_close(core)
        engine.checkpointer = None
    b, d = statistics.median(base), statistics.median(during)
    print(json.dumps({
        "name": "checkpoint_tick_p99_ratio", "value": round(d / b, 3), "unit": "ratio",
        "target": "<= 1.2", "tick_p99_ms_without": round(b * 1e3, 3),
        "tick_p99_ms_during": round(d * 1e3, 3), "checkpoints_written": written,
        "rows": rows, "ticks": ticks, "format": fmt, "reps": reps}), flush=True)
    engine.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--ticks", type=int, default=400)
    p.add_argument("--format", default="parquet", choices=["parquet", "arrow"])
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="rill-ckbench-") as tmp:
        print(f"[checkpoint_bench] {args.rows} rows, {args.format}", file=sys.stderr)
        bench_write_restore(args.rows, args.reps, args.format, tmp)
        bench_tick_ratio(args.rows, args.reps, args.format, tmp, args.ticks)


if __name__ == "__main__":
    main()
