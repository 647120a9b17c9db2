"""Fault trial kind "file_ingest": SIGKILL an engine that ingests files.

A child process (Python `rills`) runs an engine with an append table `ev` fed
by a FileStreamConnector on a folder (on_overflow="error",
delete_after_process off) and a checkpoint directory (a checkpoint every
0.05 s). The parent writes NDJSON files into the folder (temporary hidden name,
then rename, as a producer should) and SIGKILLs the child at random moments:
between files, while a file is being read, and while the child is still
starting (restoring). After every kill a new child restores the newest
checkpoint: the tables and, with them, the file connector's positions (the
files whose rows the checkpointed table holds), so files read after that
checkpoint are read again. When the parent has written everything, the last
child runs until every file is applied and stops (a final checkpoint); a fresh
engine restores that checkpoint and every (file, row) is counted.

Claim: exactly once. `lost` counts rows of written files missing from the
table, `duplicates` rows present more than once; both must be 0. The
connector's state file names only files that a complete checkpoint holds
(Connector::CommitCheckpointed), so a kill before the first checkpoint reads
every file again: `trials_killed_before_first_checkpoint` counts the trials
with such a kill and `lost_in_them` the rows they lost (0).

Kind "file_ingest_delete" is the same with delete_after_process on: a file is
deleted only once a complete checkpoint holds its rows, so a kill never loses
one.

    bench/fault_trials --kinds file_ingest,file_ingest_delete --trials 20
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import random
import signal
import subprocess
import sys
import time
from collections import Counter

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
FILES_PER_TRIAL = 30
ROWS_PER_FILE = 50
KILLS_PER_TRIAL = 3


def _python() -> str:
    venv = ROOT / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT / "python") + os.pathsep + env.get("PYTHONPATH", "")
    return env


# The child ---------------------------------------------------------------------------


def child(ckpt_dir: str, input_dir: str, delete: str = "keep") -> None:
    import pyarrow as pa

    from rills import FileStreamConnector, RetentionPolicy, RillEngine

    engine = RillEngine(trigger_interval_ms=10, metrics_path=None,
                        checkpoint_dir=ckpt_dir, checkpoint_interval_seconds=0.05)
    engine.register_table("ev", schema=pa.schema([("f", pa.int64()), ("j", pa.int64())]),
                          mode="append", retention_policy=RetentionPolicy(max_rows=10**7))
    connector = FileStreamConnector("ev", input_dir, file_pattern="*.ndjson",
                                    stable_seconds=0.05, poll_interval_seconds=0.02,
                                    on_overflow="error", name="ev_files",
                                    delete_after_process=delete == "delete")
    engine.add_connector(connector)
    engine.start()  # restores the newest checkpoint (table and file positions) first
    print("started", flush=True)
    done = os.path.join(input_dir, ".done")

    def all_applied() -> bool:
        if not os.path.exists(done):
            return False
        with open(done) as f:
            total = int(f.read())
        names = {n for n in os.listdir(input_dir) if n.endswith(".ndjson")}
        return (names <= set(connector.processed_files()) and connector.buffered_records == 0
                and engine.get_table("ev").num_rows >= total)

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not all_applied():
        time.sleep(0.02)
    time.sleep(0.1)  # the tick that drained the last buffer has applied it
    engine.stop()  # the final checkpoint
    print(json.dumps({"ev": engine.get_table("ev").num_rows}), flush=True)


# The parent --------------------------------------------------------------------------


def _spawn(ckpt: pathlib.Path, inp: pathlib.Path, wait_started: bool,
           delete: bool = False) -> subprocess.Popen:
    proc = subprocess.Popen([_python(), __file__, "--child", str(ckpt), str(inp),
                             "delete" if delete else "keep"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=_env())
    if wait_started and proc.stdout.readline().strip() != "started":
        proc.wait()
        raise RuntimeError(f"the file_ingest child failed: {proc.stderr.read()[-2000:]}")
    return proc


def _has_checkpoint(ckpt: pathlib.Path) -> bool:
    return ckpt.is_dir() and any(n.startswith("ckpt-") and (ckpt / n / "manifest.json").exists()
                                 for n in os.listdir(ckpt))


def _kill(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    proc.stderr.close()


def count_restored(ckpt_dir: str) -> None:
    """Restore the newest checkpoint into a fresh engine; print [[f, j, n], ...]."""
    from rills import Checkpointer, RillEngine

    fresh = RillEngine(metrics_path=None)
    Checkpointer(ckpt_dir).restore_snapshots(fresh)
    ev = fresh.get_table("ev").to_arrow()
    rows = Counter(zip(ev.column("f").to_pylist(), ev.column("j").to_pylist()))
    print(json.dumps([[f, j, n] for (f, j), n in rows.items()]), flush=True)
    fresh.close()


def _restored_rows(ckpt: pathlib.Path) -> Counter:
    out = subprocess.run([_python(), __file__, "--count", str(ckpt)], capture_output=True,
                         text=True, env=_env(), timeout=120)
    if out.returncode != 0:
        raise RuntimeError(f"restoring the last checkpoint failed: {out.stderr[-2000:]}")
    return Counter({(f, j): n for f, j, n in json.loads(out.stdout.strip().splitlines()[-1])})


def one_trial(rng: random.Random, dir: pathlib.Path, delete: bool = False) -> dict:
    ckpt, inp = dir / "ck", dir / "in"
    inp.mkdir(parents=True)
    kill_after = set(rng.sample(range(FILES_PER_TRIAL), KILLS_PER_TRIAL))
    kills_while_starting = 0
    killed_before_first_checkpoint = False
    proc = _spawn(ckpt, inp, wait_started=True, delete=delete)
    for i in range(FILES_PER_TRIAL):
        tmp = inp / f".f{i:05d}.tmp"
        tmp.write_text("".join(json.dumps({"f": i, "j": j}) + "\n" for j in range(ROWS_PER_FILE)))
        os.rename(tmp, inp / f"f{i:05d}.ndjson")
        time.sleep(rng.uniform(0.0, 0.03))
        if i not in kill_after:
            continue
        time.sleep(rng.uniform(0.0, 0.15))  # the file may be read, buffered or applied
        killed_before_first_checkpoint |= not _has_checkpoint(ckpt)
        _kill(proc)
        if rng.random() < 0.3:  # kill the next child while it starts and restores
            proc = _spawn(ckpt, inp, wait_started=False, delete=delete)
            time.sleep(rng.uniform(0.0, 1.0))
            kills_while_starting += 1
            _kill(proc)
        proc = _spawn(ckpt, inp, wait_started=True, delete=delete)
    (inp / ".done.tmp").write_text(str(FILES_PER_TRIAL * ROWS_PER_FILE))
    os.rename(inp / ".done.tmp", inp / ".done")
    out, err = proc.communicate(timeout=180)
    if proc.returncode != 0:
        raise RuntimeError(f"the last file_ingest child failed: {err[-2000:]}")
    rows = _restored_rows(ckpt)
    expected = {(f, j) for f in range(FILES_PER_TRIAL) for j in range(ROWS_PER_FILE)}
    lost = sum(1 for key in expected if rows[key] == 0)
    duplicates = sum(n - 1 for n in rows.values() if n > 1)
    unexpected = sum(n for key, n in rows.items() if key not in expected)
    return {"lost": lost, "duplicates": duplicates, "unexpected": unexpected,
            "kills": KILLS_PER_TRIAL + kills_while_starting,
            "killed_before_first_checkpoint": killed_before_first_checkpoint}


def run(trials: int, workdir: pathlib.Path, args, delete: bool = False) -> dict:
    rng = random.Random(20261201)
    started = time.monotonic()
    total = {"lost": 0, "duplicates": 0, "unexpected": 0, "kills": 0}
    early = {"trials": 0, "lost": 0}  # trials with a kill before the first checkpoint
    for t in range(trials):
        result = one_trial(rng, workdir / f"trial{t:04d}", delete)
        for k in total:
            total[k] += result[k]
        if result["killed_before_first_checkpoint"]:
            early["trials"] += 1
            early["lost"] += result["lost"]
        print(f"[file_ingest{'_delete' if delete else ''}] trial {t}: {result}", file=sys.stderr, flush=True)
    return {"trials": trials, "lost": total["lost"] + total["unexpected"],
            "duplicates": total["duplicates"], "rss_max_over_budget": None,
            "kills": total["kills"], "records": trials * FILES_PER_TRIAL * ROWS_PER_FILE,
            "trials_killed_before_first_checkpoint": early["trials"],
            "lost_in_them": early["lost"],
            "delivery": "exactly-once (checkpointed file positions)",
            "delete_after_process": delete,
            "seconds": round(time.monotonic() - started, 1)}


def run_delete(trials: int, workdir: pathlib.Path, args) -> dict:
    return run(trials, workdir, args, delete=True)


KINDS = {"file_ingest": run, "file_ingest_delete": run_delete}


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--child", nargs=3, metavar=("CKPT_DIR", "INPUT_DIR", "keep|delete"))
    parser.add_argument("--count", metavar="CKPT_DIR")
    parser.add_argument("--trials", type=int, default=3)
    a = parser.parse_args()
    if a.child:
        child(*a.child)
    elif a.count:
        count_restored(a.count)
    else:
        import tempfile

        with tempfile.TemporaryDirectory() as d:
            print(json.dumps(run(a.trials, pathlib.Path(d), a)))
