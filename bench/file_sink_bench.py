#!/usr/bin/env python3
"""File sink benchmark (issue 24), one JSON line, medians, competitor in the
same run on the same rows:

  sink_parquet_mb_per_s  the file sink's writer (build/release/bench/file_sink_bench:
                         FileSinkWriter Write + Commit in append mode, i.e. the
                         Parquet file, its fsync, the commit record and the
                         rename) over 1M rows, in MB of the rows' Arrow buffers
                         per second, against pyarrow.parquet.write_table of the
                         same table (same defaults: snappy, one row group per
                         1Mi rows) plus an fsync. Target ratio >= 0.9.

The writer runs in a worker process started once (warm, like the pyarrow
side; one warm-up write each); only Open + Write + Commit are timed there, as
only write_table + fsync are here; repetitions alternate which goes first.

    .venv/bin/python bench/file_sink_bench.py [--rows 1000000] [--reps 5]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BINARY = os.path.join(ROOT, "build", "release", "bench", "file_sink_bench")


def make_table(rows: int) -> pa.Table:
    rng = np.random.default_rng(1)
    return pa.table({
        "id": pa.array(np.arange(rows, dtype=np.int64)),
        "amount": pa.array(rng.random(rows) * 100),
        "tier": pa.array(np.array(["gold", "silver", "bronze", "platinum"])[rng.integers(0, 4, rows)]),
        "qty": pa.array(rng.integers(0, 1000, rows, dtype=np.int64)),
        "ts": pa.array(1_780_000_000_000_000 + np.arange(rows, dtype=np.int64) * 1000,
                       type=pa.timestamp("us")),
        "z_insert_ts": pa.array(np.full(rows, 1.78e9)),
        "z_update_ts": pa.array(np.full(rows, 1.78e9)),
    })


def pyarrow_write(table: pa.Table, path: str) -> float:
    start = time.perf_counter()
    pq.write_table(table, path)
    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    return time.perf_counter() - start


def rill_write(worker: subprocess.Popen, out: str) -> float:
    shutil.rmtree(out, ignore_errors=True)
    worker.stdin.write(out + "\n")
    worker.stdin.flush()
    line = worker.stdout.readline()
    if not line:
        sys.exit(f"file_sink_bench failed: {worker.stderr.read()}")
    return json.loads(line)["seconds"]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--reps", type=int, default=5)
    args = p.parse_args()
    if not os.access(BINARY, os.X_OK):
        sys.exit(f"{BINARY} is missing: cmake --build build/release --target file_sink_bench")
    table = make_table(args.rows)
    mb = table.nbytes / 1e6
    with tempfile.TemporaryDirectory(prefix="rill-filesink-bench-") as tmp:
        rows_path = os.path.join(tmp, "rows.arrow")
        with ipc.new_file(rows_path, table.schema) as writer:
            for batch in table.to_batches(max_chunksize=65536):  # the change feed's batch size
                writer.write_batch(batch)
        worker = subprocess.Popen([BINARY, "--input", rows_path], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        rill, arrow = [], []
        rill_write(worker, os.path.join(tmp, "sink"))  # warm-up, both sides
        pyarrow_write(table, os.path.join(tmp, "pa.parquet"))
        for rep in range(args.reps):
            for which in ([0, 1] if rep % 2 == 0 else [1, 0]):
                if which == 0:
                    rill.append(rill_write(worker, os.path.join(tmp, "sink")))
                else:
                    arrow.append(pyarrow_write(table, os.path.join(tmp, "pa.parquet")))
        worker.stdin.close()
        worker.wait()
        files = [f for f in os.listdir(os.path.join(tmp, "sink")) if f.endswith(".parquet")]
        back = pq.read_table(os.path.join(tmp, "sink", files[0]))
        assert back.num_rows == args.rows and back.schema.names == table.schema.names
    r, a = statistics.median(rill), statistics.median(arrow)
    print(json.dumps({
        "name": "sink_parquet_mb_per_s", "value": round(mb / r, 1), "unit": "MB/s",
        "baseline": "pyarrow_parquet_write_table_fsync", "baseline_value": round(mb / a, 1),
        "ratio": round(a / r, 3),
        "targets": [{"of": "ratio", "op": ">=", "value": 0.9, "met": a / r >= 0.9}],
        "rows": args.rows, "table_mb": round(mb, 1), "reps": args.reps,
        "rill_s": [round(x, 4) for x in rill], "pyarrow_s": [round(x, 4) for x in arrow]}),
        flush=True)


if __name__ == "__main__":
    main()
