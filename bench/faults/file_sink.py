"""Fault trial kind "file_sink_kill": SIGKILL an engine whose FileSink writes.

A child process (Python `rills`) runs an engine with a checkpoint directory (a
checkpoint every 0.05 s) and an append table `ev` (j int64, part string,
payload string) written by a FileSink (parquet, partition_by=["part"], append
mode, interval 0.05 s) into an output directory. On start the child restores
the newest checkpoint, reads the largest `j` the table holds and appends rows
j+1, j+2, ... in small random batches until TOTAL rows, so that after every
restart the table again holds each j once (what the last checkpoint held plus
the rest). The parent SIGKILLs the child at random moments, several times per
trial; after each kill it checks that every visible data file of the output
directory is a complete Parquet file (`partial`). The last child runs to the
end, waits until the sink has committed the table's last version, and stops.

Claim: exactly once. The directory read by pyarrow.dataset (hive
partitioning) and by DuckDB (read_parquet(..., hive_partitioning=true))
holds each j exactly once: `lost` counts missing ones, `duplicates` extra
copies, `partial` visible files that were not complete; all must be 0. Only
the newest generation (docs/sinks.md: files from the newest snapshot on) is
read; `generations` counts how many the trials produced.

    bench/fault_trials --kinds file_sink_kill --trials 20
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import random
import re
import signal
import subprocess
import sys
import time
from collections import Counter

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
TOTAL = 600
KILLS_PER_TRIAL = 3
NAME = re.compile(r"^(part|snapshot)-(\d+)-(\d+)-(\d+)\.parquet$")


def _python() -> str:
    venv = ROOT / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT / "python") + os.pathsep + env.get("PYTHONPATH", "")
    return env


# The child ---------------------------------------------------------------------------


def child(ckpt_dir: str, out_dir: str, seed: str) -> None:
    import pyarrow as pa

    from rills import MemoryConnector, RetentionPolicy, RillEngine
    from rills.sinks import FileSink

    rng = random.Random(int(seed))
    engine = RillEngine(trigger_interval_ms=10, metrics_path=None,
                        checkpoint_dir=ckpt_dir, checkpoint_interval_seconds=0.05)
    schema = pa.schema([("j", pa.int64()), ("part", pa.string()), ("payload", pa.string())])
    engine.register_table("ev", schema=schema, mode="append",
                          retention_policy=RetentionPolicy(max_rows=10**7))
    feed = MemoryConnector(target_table="ev", name="ev_feed")
    engine.add_connector(feed)
    engine.start()  # restores the newest checkpoint first
    table = engine.get_table("ev")
    restored = table.to_arrow()
    j = (max(restored.column("j").to_pylist()) + 1) if restored is not None and restored.num_rows else 0
    sink = FileSink("ev_files", "ev", out_dir, format="parquet", partition_by=["part"],
                    mode="append", interval_seconds=0.05)
    engine.add_sink(sink)
    print("started", flush=True)
    while j < TOTAL:
        n = min(TOTAL - j, rng.randint(1, 40))
        rows = range(j, j + n)
        feed.push({"j": list(rows), "part": [f"p{r % 4}" for r in rows],
                   "payload": [f"row {r} " + "x" * (r % 17) for r in rows]})
        j += n
        time.sleep(rng.uniform(0.0, 0.02))
    deadline = time.monotonic() + 60
    while table.num_rows < TOTAL and time.monotonic() < deadline:
        time.sleep(0.01)
    # Let a checkpoint hold the last rows, then have the sink commit them.
    time.sleep(0.3)
    sink.flush(timeout=60)
    # committed_version counts the sink's versions (they continue across restores);
    # lag_versions is what the target still lacks.
    while sink.stats()["lag_versions"] > 0 and time.monotonic() < deadline:
        time.sleep(0.05)
        sink.flush(timeout=60)
    stats = sink.stats()
    engine.stop()
    print(json.dumps({"rows": table.num_rows, "committed_version": stats["committed_version"],
                      "version": table.version, "snapshots": stats["snapshots"]}), flush=True)


# The parent --------------------------------------------------------------------------


def _spawn(ckpt: pathlib.Path, out: pathlib.Path, seed: int,
           wait_started: bool) -> subprocess.Popen:
    proc = subprocess.Popen([_python(), __file__, "--child", str(ckpt), str(out), str(seed)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=_env())
    if wait_started and proc.stdout.readline().strip() != "started":
        proc.wait()
        raise RuntimeError(f"the file_sink child failed: {proc.stderr.read()[-2000:]}")
    return proc


def _kill(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    proc.stderr.close()


def visible_files(out: pathlib.Path) -> list:
    """The committed data files (visible names) under `out`, relative."""
    found = []
    for dirpath, _, names in os.walk(out):
        for name in names:
            if NAME.match(name):
                found.append(os.path.relpath(os.path.join(dirpath, name), out))
    return sorted(found)


def newest_generation(files: list) -> list:
    """The files of the newest generation (docs/sinks.md): <n> >= the smallest
    <n> of the newest snapshot's files; every file when there is no snapshot."""
    parsed = [(f, NAME.match(os.path.basename(f))) for f in files]
    snaps = [(int(m.group(4)), m.group(3)) for f, m in parsed if m.group(1) == "snapshot"]
    if not snaps:
        return files
    newest_v = max(snaps)[1]
    start = min(n for n, v in snaps if v == newest_v)
    return [f for f, m in parsed if int(m.group(4)) >= start]


def count_partial(out: pathlib.Path) -> int:
    import pyarrow.parquet as pq

    bad = 0
    for f in visible_files(out):
        try:
            pq.read_metadata(out / f)
        except Exception:  # noqa: BLE001 - any unreadable visible file counts
            bad += 1
    return bad


def read_directory(out: pathlib.Path) -> tuple:
    """(j counts by pyarrow.dataset, j counts by DuckDB, generations) of the newest generation."""
    import duckdb
    import pyarrow.dataset as ds

    files = visible_files(out)
    current = newest_generation(files)
    generations = 1 + sum(1 for f in current[:1] if f not in files[:1])
    dataset = ds.dataset([str(out / f) for f in current], format="parquet",
                         partitioning=ds.partitioning(flavor="hive"), partition_base_dir=str(out))
    by_arrow = Counter(dataset.to_table(columns=["j"]).column("j").to_pylist())
    con = duckdb.connect()
    paths = ", ".join(f"'{out / f}'" for f in current)
    rows = con.execute(
        f"SELECT j, part FROM read_parquet([{paths}], hive_partitioning = true)").fetchall()
    con.close()
    by_duckdb = Counter(j for j, part in rows if part == f"p{j % 4}")
    return by_arrow, by_duckdb, generations


def one_trial(rng: random.Random, dir: pathlib.Path, kills: int) -> dict:
    ckpt, out = dir / "ck", dir / "out"
    partial = 0
    proc = _spawn(ckpt, out, rng.randrange(1 << 30), wait_started=True)
    for k in range(kills):
        if k % 3 == 2:  # kill a child while it starts: restoring, opening the sink
            _kill(proc)
            proc = _spawn(ckpt, out, rng.randrange(1 << 30), wait_started=False)
            time.sleep(rng.uniform(0.0, 1.5))
        else:  # while rows are written, committed, checkpointed
            time.sleep(rng.uniform(0.02, 0.5))
        _kill(proc)
        partial += count_partial(out) if out.exists() else 0
        proc = _spawn(ckpt, out, rng.randrange(1 << 30), wait_started=True)
    outcome, err = proc.communicate(timeout=180)
    if proc.returncode != 0:
        raise RuntimeError(f"the last file_sink child failed: {err[-2000:]}")
    final = json.loads(outcome.strip().splitlines()[-1])
    partial += count_partial(out)
    by_arrow, by_duckdb, generations = read_directory(out)
    lost = dups = 0
    for counts in (by_arrow, by_duckdb):
        lost = max(lost, sum(1 for j in range(TOTAL) if counts[j] == 0))
        dups = max(dups, sum(n - 1 for n in counts.values() if n > 1)
                   + sum(n for j, n in counts.items() if not 0 <= j < TOTAL))
    return {"lost": lost, "duplicates": dups, "partial": partial, "generations": generations,
            "table_rows": final["rows"], "files": len(visible_files(out)),
            "sink_snapshots_last_run": final["snapshots"]}


def run(trials: int, workdir: pathlib.Path, args=None, kills: int = KILLS_PER_TRIAL) -> dict:
    rng = random.Random(20261202)
    started = time.monotonic()
    total = {"lost": 0, "duplicates": 0, "partial": 0, "generations": 0, "files": 0}
    for t in range(trials):
        result = one_trial(rng, workdir / f"trial{t:04d}", kills)
        for k in total:
            total[k] += result[k]
        if result["table_rows"] != TOTAL:
            total["lost"] += abs(TOTAL - result["table_rows"])
        print(f"[file_sink_kill] trial {t}: {result}", file=sys.stderr, flush=True)
    out = {"trials": trials, "lost": total["lost"], "duplicates": total["duplicates"],
            "partial_files_visible": total["partial"], "rss_max_over_budget": None,
            "kills": trials * kills, "rows": trials * TOTAL,
            "generations": total["generations"], "files": total["files"],
            "delivery": "exactly-once (checkpoint + commit record + rename)",
            "seconds": round(time.monotonic() - started, 1)}
    if total["duplicates"] or total["partial"]:
        # the driver fails a kind on lost rows or an "error"; these fail it too
        out["error"] = f"{total['duplicates']} duplicated rows, {total['partial']} partial files"
    return out


KINDS = {"file_sink_kill": run}


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--child", nargs=3, metavar=("CKPT_DIR", "OUT_DIR", "SEED"))
    parser.add_argument("--trials", type=int, default=3)
    a = parser.parse_args()
    if a.child:
        child(*a.child)
    else:
        import tempfile

        with tempfile.TemporaryDirectory() as d:
            print(json.dumps(run(a.trials, pathlib.Path(d), a)))
