"""Crash harness for checkpoints: SIGKILL a process at random moments while it
ingests and checkpoints, restart it, and check the restored state.

Used by tests/python/test_checkpoint.py (a bounded number of trials) and by
bench/checkpoint_crash (1,000 trials and more). Run directly:

    python tests/python/checkpoint_crash.py --trials 50 [--seed N] [--dir D]

The child process keeps two tables that change together, once per tick:
`state` (keyed: ROWS rows, every row's `g` set to the generation number) and
`log` (append, max_rows LOG_KEEP: one row per generation). A checkpoint is
taken at a tick end, so every complete checkpoint holds one generation g in
both tables. Each child first restores (RillEngine start path) and checks
that what it restored (a) equals, cell for cell, what pyarrow reads from the
newest complete checkpoint directory and (b) is one generation in both
tables: never a mix of two checkpoints, never a corrupt file. The parent also
reads every complete checkpoint with pyarrow after each kill and checks each
is consistent and that the child restored the newest.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional, Tuple

ROWS = 5000
LOG_KEEP = 5000


# Reading checkpoints with pyarrow alone (the independent oracle) ----------------


def complete_checkpoints(ckpt_dir: str) -> List[Tuple[int, str]]:
    out = []
    if not os.path.isdir(ckpt_dir):
        return out
    for name in os.listdir(ckpt_dir):
        if name.startswith("ckpt-") and os.path.exists(os.path.join(ckpt_dir, name, "manifest.json")):
            out.append((int(name[5:]), os.path.join(ckpt_dir, name)))
    return sorted(out)


def read_checkpoint(path: str) -> Dict[str, Any]:
    import pyarrow.feather as feather
    import pyarrow.parquet as pq

    with open(os.path.join(path, "manifest.json")) as f:
        manifest = json.load(f)
    tables = {}
    for t in manifest["tables"]:
        file = os.path.join(path, t["file"])
        data = pq.read_table(file) if t["format"] == "parquet" else feather.read_table(file)
        assert data.num_rows == t["rows"], (path, t)
        tables[t["name"]] = data
    return {"manifest": manifest, "tables": tables}


def generation_of(tables: Dict[str, Any]) -> int:
    """The one generation the tables hold; AssertionError if they hold a mix."""
    state, log = tables["state"], tables["log"]
    gs = set(state.column("g").to_pylist())
    assert len(gs) == 1 and state.num_rows == ROWS, f"state mixes generations {sorted(gs)[:5]}"
    g = gs.pop()
    logged = log.column("g").to_pylist()
    want = list(range(max(0, g - LOG_KEEP + 1), g + 1))
    assert logged == want, f"log holds {logged[:3]}..{logged[-3:]}, state holds generation {g}"
    return g


# The child -------------------------------------------------------------------------


def child(ckpt_dir: str, fmt: str) -> None:
    import pyarrow as pa

    from rills import Checkpointer, RetentionPolicy, RillEngine, checkpoint

    newest = complete_checkpoints(ckpt_dir)
    engine = RillEngine(trigger_interval_ms=5, metrics_path=None)
    # fsync with Arrow IPC, not with Parquet: a SIGKILL keeps the page cache,
    # so atomicity rests on the rename order either way; the disk's flush only
    # slows the trials down.
    engine.checkpointer = Checkpointer(ckpt_dir, interval_seconds=0.02, format=fmt,
                                       sync=fmt == "arrow")
    checkpoint.on_start(engine)  # what start() does: restore, then periodic checkpoints
    g = -1
    if newest:
        oracle = read_checkpoint(newest[-1][1])["tables"]
        mine = {n: engine.get_table(n).to_arrow() for n in ("state", "log")}
        for n in ("state", "log"):
            assert mine[n].equals(oracle[n].select(mine[n].column_names)), f"{n} differs from pyarrow"
        g = generation_of(mine)
    else:
        engine.register_table("state", schema=pa.schema([("id", pa.int64()), ("g", pa.int64())]),
                              primary_key="id")
        engine.register_table("log", schema=pa.schema([("g", pa.int64())]), mode="append",
                              retention_policy=RetentionPolicy(max_rows=LOG_KEEP))
    print(json.dumps({"restored": g, "checkpoint": newest[-1][0] if newest else None}), flush=True)
    state, log = engine.get_table("state"), engine.get_table("log")
    ids = pa.array(range(ROWS), pa.int64())
    announced = False
    while True:
        g += 1
        state.upsert(pa.table({"id": ids, "g": pa.repeat(pa.scalar(g, pa.int64()), ROWS)}))
        log.upsert(pa.table({"g": pa.array([g], pa.int64())}))
        engine.step()  # the tick end captures a checkpoint when due
        if not announced and g % 8 == 0 and engine.checkpointer.stats(engine)["written"] > 0:
            print("checkpointing", flush=True)  # the parent's kill timer starts now
            announced = True


# Replay with the file connector ------------------------------------------------------

REPLAY_SCHEMA_FIELDS = [("k", "int64"), ("v", "int64"), ("f", "int64")]


def replay_engine(ckpt_dir: str, fields: List[tuple]) -> Any:
    """The engine of a replay child: tables kv (keyed by k) and ev (append) of
    int64 `fields`, checkpointing every 0.05 s into ckpt_dir."""
    import pyarrow as pa

    from rills import RetentionPolicy, RillEngine

    schema = pa.schema([(n, getattr(pa, t)()) for n, t in fields])
    engine = RillEngine(trigger_interval_ms=10, metrics_path=None,
                        checkpoint_dir=ckpt_dir, checkpoint_interval_seconds=0.05)
    engine.register_table("kv", schema=schema, primary_key="k")
    engine.register_table("ev", schema=schema, mode="append",
                          retention_policy=RetentionPolicy(max_rows=10**7))
    return engine


def replay_child(ckpt_dir: str, input_dir: str) -> None:
    """Tables kv (keyed by k) and ev (append) fed by two file connectors over
    input_dir; checkpoints every 0.05 s; stops (final checkpoint) once
    input_dir/.done names a row count that ev has reached."""
    from rills import FileStreamConnector

    engine = replay_engine(ckpt_dir, REPLAY_SCHEMA_FIELDS)
    connectors = [FileStreamConnector(
        table, input_dir, file_pattern="*.ndjson", stable_seconds=0.05,
        poll_interval_seconds=0.02, on_overflow="error", name=f"{table}_files")
        for table in ("kv", "ev")]
    for connector in connectors:
        engine.add_connector(connector)
    engine.start()  # restores the newest checkpoint (tables and file positions) first
    print("started", flush=True)
    done = os.path.join(input_dir, ".done")

    def all_applied() -> bool:
        # Both tables have every file: each connector read all of them and its
        # buffer is drained (kv's connector may lag ev's under load), and ev
        # holds every row the parent wrote.
        if not os.path.exists(done):
            return False
        with open(done) as f:
            total = int(f.read())
        names = {n for n in os.listdir(input_dir) if n.endswith(".ndjson")}
        return (engine.get_table("ev").num_rows >= total
                and all(names <= set(c.processed_files()) and c.buffered_records == 0
                        for c in connectors))

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not all_applied():
        time.sleep(0.02)
    time.sleep(0.1)  # the tick that drained the last buffer has applied it
    engine.stop()  # the final checkpoint
    print(json.dumps({"ev": engine.get_table("ev").num_rows}), flush=True)


def run_replay(ckpt_dir: str, input_dir: str, files: int, rows: int, kills: int,
               seed: int) -> Dict[str, Any]:
    """Write `files` NDJSON files while killing the child `kills` times; return
    the final child's report and the rows written (list of dicts, in order)."""
    rng = random.Random(seed)
    kill_at = set(rng.sample(range(1, files), kills))
    written: List[Dict[str, int]] = []

    def spawn() -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, __file__, "--replay-child", ckpt_dir, input_dir],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if proc.stdout.readline().strip() != "started":
            raise AssertionError(f"the replay child failed: {proc.stderr.read()}")
        return proc

    proc = spawn()
    for i in range(files):
        batch = [{"k": rng.randrange(rows * 4), "v": i * 1000 + j, "f": i} for j in range(rows)]
        tmp = os.path.join(input_dir, f".f{i:05d}.tmp")
        with open(tmp, "w") as f:
            f.write("".join(json.dumps(r) + "\n" for r in batch))
        os.rename(tmp, os.path.join(input_dir, f"f{i:05d}.ndjson"))
        written.extend(batch)
        time.sleep(rng.uniform(0.0, 0.03))
        if i in kill_at:
            time.sleep(rng.uniform(0.0, 0.15))
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            proc = spawn()
    with open(os.path.join(input_dir, ".done.tmp"), "w") as f:
        f.write(str(len(written)))
    os.rename(os.path.join(input_dir, ".done.tmp"), os.path.join(input_dir, ".done"))
    out, err = proc.communicate(timeout=150)
    if proc.returncode != 0:
        raise AssertionError(f"the replay child failed: {err}")
    return {"report": json.loads(out.strip().splitlines()[-1]), "written": written}


# The parent ------------------------------------------------------------------------


def run_trials(trials: int, seed: int, ckpt_dir: Optional[str] = None,
               max_seconds: Optional[float] = None, quiet: bool = False) -> Dict[str, Any]:
    rng = random.Random(seed)
    own = ckpt_dir is None
    ckpt_dir = ckpt_dir or tempfile.mkdtemp(prefix="rill-crash-")
    started = time.monotonic()
    restored_from = []
    killed_while_writing = 0
    done = 0
    for trial in range(trials + 1):  # the last child only restores and checks
        newest = complete_checkpoints(ckpt_dir)
        for _, path in newest:  # every complete checkpoint reads back and is one generation
            generation_of(read_checkpoint(path)["tables"])
        fmt = "arrow" if trial % 2 else "parquet"
        proc = subprocess.Popen([sys.executable, __file__, "--child", ckpt_dir, "--format", fmt],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = proc.stdout.readline()
        if not line:
            err = proc.stderr.read()
            proc.wait()
            raise AssertionError(f"trial {trial}: the child failed after the kill:\n{err}")
        report = json.loads(line)
        want = newest[-1][0] if newest else None
        assert report["checkpoint"] == want, (trial, report, want)
        restored_from.append(report["restored"])
        if trial == trials:
            proc.kill()
            proc.wait()
            break
        if proc.stdout.readline().strip() != "checkpointing":
            raise AssertionError(f"trial {trial}: the child died: {proc.stderr.read()}")
        time.sleep(rng.uniform(0.0, 0.5))
        if any(n.startswith(".tmp-") for n in os.listdir(ckpt_dir)):
            killed_while_writing += 1
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        done += 1
        if max_seconds is not None and time.monotonic() - started > max_seconds:
            trials = trial + 1  # one more child to check the last kill
    result = {"trials": done, "seconds": round(time.monotonic() - started, 2),
              "killed_while_writing": killed_while_writing,
              "generations_restored": restored_from[-1], "dir": ckpt_dir}
    if own:
        import shutil

        shutil.rmtree(ckpt_dir, ignore_errors=True)
    if not quiet:
        print(json.dumps(result), flush=True)
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--trials", type=int, default=50)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--dir", default=None)
    p.add_argument("--max-seconds", type=float, default=None,
                   help="stop after this long (the JSON line says how many trials ran)")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--format", default="parquet", help=argparse.SUPPRESS)
    p.add_argument("--replay-child", nargs=2, default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.replay_child:
        replay_child(*args.replay_child)
        return
    if args.child:
        child(args.child, args.format)
        return
    run_trials(args.trials, args.seed, args.dir, max_seconds=args.max_seconds)


if __name__ == "__main__":
    main()
