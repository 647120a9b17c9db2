"""SIGKILL trials of PostgresCDCConnector with a checkpoint directory (issue 25).

A child process (forked by a zygote that imported pyarrow and rills once:
kafka_kill.serve_forks) runs an engine (a tick every TICK_MS, a checkpoint
every 0.05 s into work/ckpt) with two PostgresCDCConnectors on two slots:

  - `ev` (k bigint primary key) -> an APPEND table `ev`: the parent inserts
    k = 0, 1, 2, … in transactions of 1-8 rows; a transaction applied twice
    shows as duplicate k, a lost one as missing k;
  - `mir` (id bigint primary key, name text, n int) -> a keyed table `mir`:
    random inserts, updates (also of the key), deletes and truncates.

The parent produces continuously and SIGKILLs the child at random moments (in
a quarter of the trials while it starts and restores), then starts a new one,
which restores the newest checkpoint (tables and slot positions). After every
kill, each slot's confirmed_flush_lsn must not pass the LSN of the newest
complete checkpoint (`confirm_violations`): the server still holds every
change the checkpoint does not. At the end the producer stops, writes a
sentinel row into each table, and a final child runs until both sentinels are
in, saves both tables (Parquet) and stops cleanly. Checked: every k exactly
once (`lost`, `duplicates`) and `mir` equal to SELECT * FROM mir
(`mirror_equal`).

Used by tests/python/test_postgres_cdc.py (20 trials) and
bench/faults/postgres_cdc.py (500). Run directly (starts its own server):
    python tests/python/pg_cdc_kill.py --trials 20
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

from zygote import Zygote

TICK_MS = 20


def child(workdir: str, dsn: str, n: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from rills import PostgresCDCConnector, RetentionPolicy, RillEngine

    work = Path(workdir)
    engine = RillEngine(trigger_interval_ms=TICK_MS, metrics_path=None,
                        checkpoint_dir=str(work / "ckpt"), checkpoint_interval_seconds=0.05)
    engine.register_table("ev", schema=pa.schema([("k", pa.int64())]), mode="append",
                          retention_policy=RetentionPolicy(max_rows=10**8))
    engine.register_table("mir", schema=pa.schema([("id", pa.int64()), ("name", pa.string()),
                                                   ("n", pa.int32())]), primary_key="id")
    ev = PostgresCDCConnector("ev", dsn, "ev", "kill_ev", status_interval_ms=50, name="cdc_ev")
    mir = PostgresCDCConnector("mir", dsn, "mir", "kill_mir", status_interval_ms=50,
                               name="cdc_mir")
    engine.add_connector(ev)
    engine.add_connector(mir)
    engine.start()  # restores the newest checkpoint first
    (work / f"started-{n:05d}").write_text("")
    final = work / "final"
    while True:
        if ev.stats()["snapshot_done"] == 1 and mir.stats()["snapshot_done"] == 1:
            (work / f"snapshot-{n:05d}").write_text("")
        if final.exists():
            has_ev = engine.query_sql("SELECT count(*) AS c FROM ev WHERE k = -1").column(0)[0]
            has_mir = engine.query_sql("SELECT count(*) AS c FROM mir WHERE id = -1").column(0)[0]
            if has_ev.as_py() and has_mir.as_py():
                break
        time.sleep(0.01)
    pq.write_table(engine.query_sql("SELECT k FROM ev"), work / "final-ev.parquet")
    pq.write_table(engine.query_sql("SELECT id, name, n FROM mir"), work / "final-mir.parquet")
    engine.stop()
    engine.close()
    (work / f"stopped-{n:05d}").write_text("")


def zygote(workdir: str, dsn: str) -> None:
    import pyarrow  # noqa: F401
    import rills  # noqa: F401

    import kafka_kill

    def prepare(line: str):
        n = int(line)
        return workdir, n, lambda: child(workdir, dsn, n)

    kafka_kill.serve_forks(prepare)


class Producer:
    """Transactions on `ev` (consecutive keys) and `mir` (random changes)."""

    def __init__(self, dsn: str, seed: int):
        import psycopg

        self.conn = psycopg.connect(dsn, autocommit=True)
        self.rng = random.Random(seed)
        self.next_k = 0
        self.next_id = 1
        self.errors: List[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        rng, c = self.rng, self.conn
        try:
            while not self._stop.is_set():
                with c.transaction():
                    rows = rng.randint(1, 8)
                    c.execute("INSERT INTO ev SELECT generate_series(%s::bigint, %s::bigint)",
                              (self.next_k, self.next_k + rows - 1))
                    self.next_k += rows
                with c.transaction():
                    for _ in range(rng.randint(1, 4)):
                        r = rng.random()
                        if r < 0.5:
                            c.execute("INSERT INTO mir VALUES (%s, %s, 0)",
                                      (self.next_id, f"v{rng.randint(0, 99)}"))
                            self.next_id += 1
                        elif r < 0.75:
                            c.execute("UPDATE mir SET n = n + 1, name = %s WHERE id = (SELECT id "
                                      "FROM mir ORDER BY random() LIMIT 1)", (f"u{rng.randint(0, 99)}",))
                        elif r < 0.85:
                            c.execute("UPDATE mir SET id = %s WHERE id = (SELECT id FROM mir "
                                      "ORDER BY random() LIMIT 1)", (self.next_id,))
                            self.next_id += 1
                        elif r < 0.995:
                            c.execute("DELETE FROM mir WHERE id = (SELECT id FROM mir "
                                      "ORDER BY random() LIMIT 1)")
                        else:
                            c.execute("TRUNCATE mir")
                time.sleep(0.004)
        except Exception as error:  # reported by stop()
            self.errors.append(repr(error))

    def start(self) -> "Producer":
        self._thread.start()
        return self

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        if self.errors:
            raise RuntimeError(f"producer: {self.errors}")
        return self.next_k


def _lsn(text: Optional[str]) -> Optional[int]:
    if text is None:
        return None
    hi, lo = text.split("/")
    return (int(hi, 16) << 32) | int(lo, 16)


def _newest_checkpoint_lsns(ckpt: Path) -> Dict[str, int]:
    """{slot: lsn} of the newest complete checkpoint (positions past their snapshot)."""
    ids = sorted(int(p.name[5:]) for p in ckpt.glob("ckpt-*") if (p / "manifest.json").exists())
    if not ids:
        return {}
    manifest = json.loads((ckpt / f"ckpt-{ids[-1]:08d}" / "manifest.json").read_text())
    out = {}
    for c in manifest["connectors"]:
        pos = json.loads(c["position"]) if isinstance(c["position"], str) else c["position"]
        if pos and pos.get("snapshot_done"):
            out[pos["slot"]] = _lsn(pos["lsn"])
    return out


def run_trials(server, workdir: os.PathLike, trials: int, seed: int = 0,
               python: Optional[str] = None) -> Dict[str, Any]:
    """`trials` SIGKILL trials against `server` (a pg_server.PostgresServer);
    return {"trials", "records", "lost", "duplicates", "confirm_violations",
    "mirror_equal", …}."""
    import pyarrow.parquet as pq

    rng = random.Random(seed)
    work = Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    dsn = server.create_database(f"kill_{seed % 100000}_{os.getpid() % 10000}")
    admin = server.connect()
    for slot in ("kill_ev", "kill_mir"):
        admin.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                      "WHERE slot_name = %s", (slot,))
    import psycopg

    setup = psycopg.connect(dsn, autocommit=True)
    setup.execute("CREATE TABLE ev (k bigint PRIMARY KEY)")
    setup.execute("CREATE TABLE mir (id bigint PRIMARY KEY, name text, n int)")
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).parent),
                                                      env.get("PYTHONPATH", "")]))
    zyg = subprocess.Popen([python or sys.executable, __file__, "zygote", str(work), dsn],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True)
    if zyg.stdout.readline().strip() != "ready":
        raise AssertionError("the zygote did not start")

    ctl = Zygote(zyg, work)
    alive, spawn, wait_for, kill = ctl.alive, ctl.spawn, ctl.wait_for, ctl.kill
    child_failed = lambda n, what: ctl.child_failed(n, what, server.log_tail(20))  # noqa: E731

    def confirmed() -> Dict[str, Optional[int]]:
        rows = admin.execute("SELECT slot_name, confirmed_flush_lsn::text FROM pg_replication_slots "
                             "WHERE slot_name IN ('kill_ev', 'kill_mir')").fetchall()
        return {name: _lsn(lsn) for name, lsn in rows}

    producer = None
    violations: List[Any] = []
    seen_confirmed: set = set()  # (slot, confirmed lsn) after the kills: the slots advance
    during_startup = 0
    pid = None
    try:
        for n in range(trials):
            pid = spawn(n)
            if n == 0:  # the first snapshot (of empty tables), then the changes begin
                if not wait_for(work / "snapshot-00000", pid, 60):
                    raise child_failed(n, "took no snapshot")
                producer = Producer(dsn, seed).start()
                time.sleep(rng.uniform(0.1, 0.8))
            elif rng.random() < 0.25:
                during_startup += 1
                time.sleep(rng.uniform(0.0, 0.4))
            else:
                if not wait_for(work / f"started-{n:05d}", pid, 60):
                    raise child_failed(n, "did not start")
                time.sleep(rng.uniform(0.0, 0.8))
            if not alive(pid):
                raise child_failed(n, "exited by itself")
            kill(pid)
            ckpt = _newest_checkpoint_lsns(work / "ckpt")
            for slot, lsn in confirmed().items():
                seen_confirmed.add((slot, lsn))
                if slot in ckpt and lsn is not None and lsn > ckpt[slot]:
                    violations.append((n, slot, lsn, ckpt[slot]))
        total = producer.stop()
        setup.execute("INSERT INTO ev VALUES (-1)")
        setup.execute("INSERT INTO mir VALUES (-1, 'sentinel', 0)")
        (work / "final").write_text("")
        pid = spawn(trials)
        if not wait_for(work / f"stopped-{trials:05d}", pid, 180):
            raise child_failed(trials, "did not stop cleanly")
    finally:
        if pid is not None:
            kill(pid)
        zyg.stdin.close()
        zyg.wait(timeout=30)
        if producer is not None and not producer._stop.is_set():
            producer._stop.set()

    keys = pq.read_table(work / "final-ev.parquet").column("k").to_pylist()
    from collections import Counter

    counts = Counter(k for k in keys if k >= 0)
    lost = sum(1 for k in range(total) if counts.get(k, 0) == 0)
    duplicates = sum(c - 1 for c in counts.values() if c > 1)
    unexpected = sum(1 for k in counts if k >= total)
    got = sorted(tuple(r.values()) for r in pq.read_table(work / "final-mir.parquet").to_pylist())
    want = sorted(tuple(r) for r in setup.execute("SELECT id, name, n FROM mir").fetchall())
    setup.close()
    admin.close()
    return {"trials": trials, "records": total, "lost": lost, "duplicates": duplicates,
            "unexpected": unexpected, "confirm_violations": len(violations),
            "violations": violations[:5], "mirror_equal": got == want,
            "confirmed_positions_seen": len(seen_confirmed),
            "mirror_rows": len(want), "kills_during_startup": during_startup}


def main(argv: List[str]) -> None:
    import argparse

    if len(argv) > 1 and argv[1] == "zygote":
        zygote(argv[2], argv[3])
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv[1:])
    import tempfile

    import pg_server

    server = pg_server.PostgresServer()
    server.start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            print(json.dumps(run_trials(server, tmp, args.trials, args.seed)))
    finally:
        server.close()


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    main(sys.argv)
