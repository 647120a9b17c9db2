"""Fault trials of the engine (issue 23): checkpoints on a disk that fills up,
and overload under memory_budget_policy="shed". Loaded by bench/fault_trials.

checkpoint_enospc
    A child process ingests and checkpoints every 20 ms (Arrow IPC, fsync) into
    a 2 MiB tmpfs: two tables that change together once per tick (the model of
    tests/python/checkpoint_crash.py: every complete checkpoint holds one
    generation in both). Each trial, at a random moment during the writes, the
    parent either SIGKILLs the child, or fills the tmpfs (ENOSPC), checks that
    the child keeps ticking while its checkpoints fail (and are counted), then
    SIGKILLs it while the disk is full or after freeing it and seeing the next
    checkpoint written. The next child restores and checks, against pyarrow
    reading the newest complete checkpoint, that it restored all of it, cell
    for cell, in one generation. lost = rows of the newest complete checkpoint
    that the restore lacked or changed, plus checkpoints the child had reported
    written that were gone after the kill (in rows).

overload_shed
    tests/python/overload_shed.py in a child process per trial: input at ~3x
    what the engine drains, memory_budget_policy="shed", a 128 MiB budget.
    lost = rows pushed that are neither in the table, nor buffered, nor counted
    as dropped or refused. rss_max_over_budget = max over the trials of
    (peak VmRSS - VmRSS before the input) / memory_budget_bytes (the field
    rss_max_over_budget_means says so).

Run only through bench/fault_trials (it needs build/release and the .venv);
the children are this file run with the .venv's Python (--enospc-child).
"""

from __future__ import annotations

import json
import os
import pathlib
import queue
import random
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Dict, List, Optional

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
VENV_PYTHON = ROOT / ".venv" / "bin" / "python"
TESTS = ROOT / "tests" / "python"


def _env() -> Dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "python"), str(TESTS)])
    return env


# checkpoint_enospc -------------------------------------------------------------------


def _enospc_child(ckpt_dir: str) -> None:
    """Restore and check the newest checkpoint, then ingest and checkpoint until killed.
    stdout: one JSON line for the restore, then one per change of the checkpoint stats."""
    import pyarrow as pa

    import checkpoint_crash as cc
    from rills import Checkpointer, RetentionPolicy, RillEngine, checkpoint

    newest = cc.complete_checkpoints(ckpt_dir)
    engine = RillEngine(trigger_interval_ms=5, metrics_path=None)
    # keep=2: the tmpfs must hold keep + 1 checkpoints (the new one is written
    # before the oldest is pruned), ~280 KiB each here.
    engine.checkpointer = Checkpointer(ckpt_dir, interval_seconds=0.02, format="arrow", sync=True,
                                       keep=2)
    report: Dict[str, Any] = {"checkpoint": newest[-1][0] if newest else None, "lost_rows": 0}
    oracle: Optional[Dict[str, Any]] = None
    if newest:
        oracle = cc.read_checkpoint(newest[-1][1])["tables"]
    checkpoint.on_start(engine)  # restore, then periodic checkpoints
    g = -1
    if oracle is not None:
        for name in ("state", "log"):
            mine = engine.get_table(name)
            theirs = oracle[name]
            if mine is None:
                report["lost_rows"] += theirs.num_rows
                continue
            mine = mine.to_arrow()
            if not mine.equals(theirs.select(mine.column_names)):
                got = {tuple(r.values()) for r in mine.to_pylist()}
                want = [tuple(r.values()) for r in theirs.select(mine.column_names).to_pylist()]
                report["lost_rows"] += sum(1 for r in want if r not in got)
                report.setdefault("differs", []).append(name)
        try:
            g = cc.generation_of({n: engine.get_table(n).to_arrow() for n in ("state", "log")})
        except AssertionError as error:
            report["mixed"] = str(error)
    else:
        engine.register_table("state", schema=pa.schema([("id", pa.int64()), ("g", pa.int64())]),
                              primary_key="id")
        engine.register_table("log", schema=pa.schema([("g", pa.int64())]), mode="append",
                              retention_policy=RetentionPolicy(max_rows=cc.LOG_KEEP))
    report["restored"] = g
    print(json.dumps(report), flush=True)
    state, log = engine.get_table("state"), engine.get_table("log")
    ids = pa.array(range(cc.ROWS), pa.int64())
    seen = None
    while True:
        g += 1
        state.upsert(pa.table({"id": ids, "g": pa.repeat(pa.scalar(g, pa.int64()), cc.ROWS)}))
        log.upsert(pa.table({"g": pa.array([g], pa.int64())}))
        engine.step()
        s = engine.checkpointer.stats(engine)
        m = engine.get_metrics()
        now = (s["written"], s["failed"])
        if now != seen:
            seen = now
            last = s["last"]
            print(json.dumps({"g": g, "written": s["written"], "failed": s["failed"],
                              "checkpoint_failures": m["checkpoint_failures"],
                              "last_id": last["id"] if last else None,
                              "last_rows": last["rows"] if last else 0}), flush=True)


class _Child:
    """A running --enospc-child and the JSON lines it printed."""

    def __init__(self, ckpt_dir: pathlib.Path):
        self.proc = subprocess.Popen(
            [str(VENV_PYTHON), __file__, "--enospc-child", str(ckpt_dir)],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=_env())
        self.lines: "queue.Queue[Dict[str, Any]]" = queue.Queue()
        self.last: Dict[str, Any] = {}
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            try:
                self.lines.put(json.loads(line))
            except ValueError:
                pass

    def next(self, timeout: float = 60.0) -> Dict[str, Any]:
        item = self.lines.get(timeout=timeout)
        self.last = item
        return item

    def wait_for(self, predicate, timeout: float = 30.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if predicate(self.next(timeout=max(0.01, deadline - time.monotonic()))):
                    return True
            except queue.Empty:
                return False
        return False

    def drain(self) -> None:
        while True:
            try:
                self.last = self.lines.get_nowait()
            except queue.Empty:
                return

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()
        self.proc.stdout.close()


def _fill(where: pathlib.Path) -> pathlib.Path:
    filler = where / "filler"
    with open(filler, "wb", buffering=0) as f:
        for size in (1 << 16, 1):
            try:
                while True:
                    f.write(b"x" * size)
            except OSError:
                pass
    return filler


def run_checkpoint_enospc(trials: int, workdir: pathlib.Path, args: Any) -> Dict[str, Any]:
    mnt = workdir / "tmpfs"
    mnt.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        return {"trials": 0, "lost": None, "duplicates": None,
                "error": f"mount -t tmpfs not permitted: {done.stderr.strip()}"}
    rng = random.Random(20261201)
    ckpt = mnt / "ck"
    lost = 0
    counts = {"killed": 0, "filled_then_killed_full": 0, "filled_freed_then_killed": 0,
              "failures_counted": 0, "ticks_while_full_ok": 0, "restored_checkpoints": 0}
    problems: List[str] = []
    promised_id = None  # the newest checkpoint a child reported written
    promised_rows = 0
    try:
        for trial in range(trials + 1):  # the last child only restores and checks
            child = _Child(ckpt)
            first = child.next()
            lost += first.get("lost_rows", 0)
            if first.get("differs") or first.get("mixed"):
                problems.append(f"trial {trial}: {first}")
            if first.get("checkpoint") is not None:
                counts["restored_checkpoints"] += 1
            if promised_id is not None and (first.get("checkpoint") or 0) < promised_id:
                lost += promised_rows  # a checkpoint reported written is gone
                problems.append(f"trial {trial}: checkpoint {promised_id} reported written, "
                                f"newest on disk {first.get('checkpoint')}")
            if trial == trials:
                child.kill()
                break
            child.wait_for(lambda s: s.get("written", 0) >= 1)
            time.sleep(rng.uniform(0, 0.3))
            action = ["kill", "fill_kill_full", "fill_free_kill"][trial % 3]  # moments random
            filler = None
            if action != "kill":
                filler = _fill(mnt)
                child.drain()
                failed = child.last.get("failed", 0)
                g = child.last.get("g", 0)
                if child.wait_for(lambda s: s.get("failed", 0) > failed):
                    if child.last.get("checkpoint_failures", 0) >= child.last["failed"]:
                        counts["failures_counted"] += 1
                    if child.last.get("g", 0) > g:
                        counts["ticks_while_full_ok"] += 1
                else:
                    problems.append(f"trial {trial}: no failed checkpoint on the full disk")
                time.sleep(rng.uniform(0, 0.1))
                if action == "fill_free_kill":
                    filler.unlink()
                    filler = None
                    child.drain()
                    written = child.last.get("written", 0)
                    if not child.wait_for(lambda s: s.get("written", 0) > written):
                        problems.append(f"trial {trial}: no checkpoint after freeing the disk")
                    time.sleep(rng.uniform(0, 0.05))
            child.drain()
            if child.last.get("last_id") is not None:
                promised_id, promised_rows = child.last["last_id"], child.last["last_rows"]
            child.kill()
            counts[{"kill": "killed", "fill_kill_full": "filled_then_killed_full",
                    "fill_free_kill": "filled_freed_then_killed"}[action]] += 1
            if filler is not None:
                filler.unlink()
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)
    result: Dict[str, Any] = {"trials": trials, "lost": lost, "duplicates": 0, **counts}
    if problems:
        result["problems"] = problems[:10]
        result["error"] = f"{len(problems)} trial(s) misbehaved"
    return result


# overload_shed -----------------------------------------------------------------------


def run_overload_shed(trials: int, workdir: pathlib.Path, args: Any) -> Dict[str, Any]:
    reports = []
    for _ in range(trials):
        done = subprocess.run(
            [str(VENV_PYTHON), str(TESTS / "overload_shed.py"), "--child", "--budget-mb", "128",
             "--policy", "shed", "--seconds", "10"],
            capture_output=True, text=True, env=_env(), timeout=300)
        if done.returncode != 0:
            return {"trials": len(reports), "lost": None, "duplicates": None,
                    "error": f"overload child failed: {done.stderr[-2000:]}"}
        reports.append(json.loads(done.stdout.strip().splitlines()[-1]))
    factors = [r["overload_factor"] for r in reports if r["overload_factor"]]
    return {
        "trials": trials,
        "lost": sum(r["lost"] for r in reports),
        "duplicates": 0,
        "rss_max_over_budget": round(max(r["rss_growth_over_budget"] for r in reports), 3),
        "rss_max_over_budget_means": "(peak VmRSS - VmRSS before the input) / memory_budget_bytes",
        "budget_mb": reports[0]["budget_bytes"] / 2**20,
        "rss_start_mb": round(min(r["rss_start_bytes"] for r in reports) / 2**20, 1),
        "rss_max_mb": round(max(r["rss_max_bytes"] for r in reports) / 2**20, 1),
        "pushed": sum(r["pushed"] for r in reports),
        "dropped": sum(r["dropped"] for r in reports),
        "overload_factor_min": round(min(factors), 2) if factors else None,
        "shed_episodes": sum(r["shed_started"] for r in reports),
    }


KINDS = {"checkpoint_enospc": run_checkpoint_enospc, "overload_shed": run_overload_shed}


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--enospc-child":
        _enospc_child(sys.argv[2])
    else:
        print(__doc__)
        sys.exit(2)
