"""Fault trial kind "postgres_sink_kill": SIGKILL an engine whose PostgresSink
writes an append table, and check the PostgreSQL table (issue 24).

A child engine (checkpoint directory, a checkpoint every 0.05 s) reads NDJSON
files that the parent drops into a folder (FileStreamConnector, checkpointed
file positions: exactly-once input) into an append table `ev` (f, j), and a
PostgresSink(mode="append", create_table=True) writes `ev` into a table of a
real PostgreSQL 15 (a target table and a sink name of its own per trial: the
sink name keys its rill_sink_progress row). The parent SIGKILLs the child at random moments (after a
random file, a random 0-0.3 s later; in a third of the trials also a child
that is still starting and restoring), then starts a new one, which restores
the newest checkpoint and resumes from the sink's progress row
(rill_sink_progress, written in the same transaction as the rows). After the
last file a final child catches up, lets the sink commit everything and stops.

Claim: exactly once. Checked in PostgreSQL with psycopg: every (f, j) written
is in the target exactly once: `lost` (missing, or rows nobody wrote) and
`duplicates` must be 0. Append mode is the strict check: a batch written twice
shows as duplicate rows (an upsert target would hide it).

Kind "postgres_writer_kill" needs no runtime: it SIGKILLs the writer alone,
tests/cpp's postgres_sink_test re-executed as its own child
(PostgresSinkWriterKillChild: resume from rill_sink_progress, then 200-row
append batches, one Write + Commit per version, until killed) at a random
moment 0.05-0.65 s after its start, and checks after every kill that the
target (a fresh one every 10 trials) holds exactly the batches of versions
1..progress, each whole (`lost`:
missing or partial batches, `duplicates`: rows beyond them). The ctest
PostgresSinkWriter.KeepsWholeBatchesAndTheirProgressWhenTheWriterIsKilled runs
10 of these.

tests/python/test_postgres_sink.py runs 10 trials (run_trials below). Run
directly (starts its own server):
    .venv/bin/python bench/fault_trials --kinds postgres_sink_kill --trials 500
    .venv/bin/python bench/fault_trials --kinds postgres_writer_kill --trials 500
The children run this checkout's python/ (rills) and build/release.
"""

from __future__ import annotations

import json
import os
import pathlib
import random
import signal
import subprocess
import sys
import time
from collections import Counter

ROOT = pathlib.Path(__file__).resolve().parents[2]
PYTHON = ROOT / ".venv" / "bin" / "python"
sys.path.insert(0, str(ROOT / "tests" / "python"))

FILES_PER_TRIAL = 12
ROWS_PER_FILE = 25


# The child (forked by the zygote) ------------------------------------------------------


def child(workdir: str, dsn: str, target: str, n: int) -> None:
    import pyarrow as pa

    from rills import FileStreamConnector, RetentionPolicy, RillEngine
    from rills.sinks import PostgresSink

    work = pathlib.Path(workdir)
    inp = work / "in"
    engine = RillEngine(trigger_interval_ms=10, metrics_path=None,
                        checkpoint_dir=str(work / "ckpt"), checkpoint_interval_seconds=0.05)
    engine.register_table("ev", schema=pa.schema([("f", pa.int64()), ("j", pa.int64())]),
                          mode="append", retention_policy=RetentionPolicy(max_rows=10**7))
    connector = FileStreamConnector("ev", str(inp), file_pattern="*.ndjson",
                                    stable_seconds=0.02, poll_interval_seconds=0.02,
                                    on_overflow="error", name="ev_files")
    engine.add_connector(connector)
    # The sink's name keys its rill_sink_progress row: one name per trial (per
    # target), or a trial resumes from the progress of the one before it.
    sink = PostgresSink(f"{target}_sink", "ev", dsn, target, mode="append", create_table=True,
                        interval_seconds=0.02, retry_initial_seconds=0.05,
                        retry_max_seconds=0.5)
    engine.add_sink(sink)
    from kafka_kill import start_and_drain_sink

    # Any flush error is retried until the deadline (the server may be restarting).
    start_and_drain_sink(engine, sink, work, n, retry_on=(Exception,))


def zygote() -> None:
    """Import once, then fork one child per stdin line "workdir dsn target n" and
    answer its pid (a child starts in milliseconds instead of a second)."""
    import pyarrow  # noqa: F401
    import rills  # noqa: F401
    import rills.sinks  # noqa: F401

    from kafka_kill import serve_forks

    def prepare(line: str):
        workdir, dsn_quoted, target, n = line.split("\t")
        dsn, n = json.loads(dsn_quoted), int(n)
        return workdir, n, lambda: child(workdir, dsn, target, n)

    serve_forks(prepare)


# The parent --------------------------------------------------------------------------


class Zygote:
    def __init__(self):
        env = dict(os.environ)
        env["PYTHONPATH"] = str(ROOT / "python") + os.pathsep + env.get("PYTHONPATH", "")
        python = str(PYTHON) if PYTHON.exists() else sys.executable
        self.proc = subprocess.Popen([python, __file__, "--zygote"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=env)
        if self.proc.stdout.readline().strip() != "ready":
            raise RuntimeError("the postgres_sink zygote did not start")
        self.count = 0

    def spawn(self, workdir: pathlib.Path, dsn: str, target: str) -> int:
        self.count += 1
        self.proc.stdin.write(f"{workdir}\t{json.dumps(dsn)}\t{target}\t{self.count}\n")
        self.proc.stdin.flush()
        return int(self.proc.stdout.readline())

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.kill()
        self.proc.wait()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.005)


def _wait_file(path: pathlib.Path, pid: int, timeout: float, work: pathlib.Path) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if not _alive(pid) or time.monotonic() > deadline:
            errors = "".join(p.read_text()[-1500:] for p in work.glob("child-*.err"))
            raise RuntimeError(f"the postgres_sink child did not reach {path.name}: {errors}")
        time.sleep(0.01)


def one_trial(rng: random.Random, zygote: Zygote, server, work: pathlib.Path,
              target: str) -> dict:
    inp = work / "in"
    inp.mkdir(parents=True)
    dsn = server.dsn()
    with server.connect() as conn:
        # A trial starts from nothing: no target and no progress row of its sink
        # (one left by an earlier trial would be resumed from: rows skipped).
        if conn.execute("SELECT to_regclass('rill_sink_progress')").fetchone()[0] and \
                conn.execute("SELECT 1 FROM rill_sink_progress WHERE sink = %s",
                             (f"{target}_sink",)).fetchone():
            raise RuntimeError(f"rill_sink_progress already holds sink '{target}_sink'")
        if conn.execute("SELECT to_regclass(%s)", (target,)).fetchone()[0]:
            raise RuntimeError(f"the target table '{target}' already exists")
    kill_after = rng.randrange(FILES_PER_TRIAL)
    pid = zygote.spawn(work, dsn, target)
    _wait_file(work / f"started-{zygote.count:05d}", pid, 60, work)
    kills = 0
    for i in range(FILES_PER_TRIAL):
        tmp = inp / f".f{i:05d}.tmp"
        tmp.write_text("".join(json.dumps({"f": i, "j": j}) + "\n" for j in range(ROWS_PER_FILE)))
        os.rename(tmp, inp / f"f{i:05d}.ndjson")
        time.sleep(rng.uniform(0.0, 0.02))
        if i != kill_after:
            continue
        time.sleep(rng.uniform(0.0, 0.3))  # the rows may be read, checkpointed or written
        _kill(pid)
        kills += 1
        if rng.random() < 0.33:  # kill the next child while it starts and restores
            pid = zygote.spawn(work, dsn, target)
            time.sleep(rng.uniform(0.0, 0.5))
            _kill(pid)
            kills += 1
        pid = zygote.spawn(work, dsn, target)
        _wait_file(work / f"started-{zygote.count:05d}", pid, 60, work)
    (work / "total.tmp").write_text(str(FILES_PER_TRIAL * ROWS_PER_FILE))
    os.rename(work / "total.tmp", work / "total")
    _wait_file(work / f"stopped-{zygote.count:05d}", pid, 180, work)
    with server.connect() as conn:
        rows = Counter({(f, j): c for f, j, c in conn.execute(
            f'SELECT f, j, count(*) FROM "{target}" GROUP BY f, j').fetchall()})
    expected = {(f, j) for f in range(FILES_PER_TRIAL) for j in range(ROWS_PER_FILE)}
    lost = sum(1 for key in expected if rows[key] == 0)
    duplicates = sum(n - 1 for n in rows.values() if n > 1)
    unexpected = sum(n for key, n in rows.items() if key not in expected)
    return {"lost": lost, "duplicates": duplicates, "unexpected": unexpected, "kills": kills}


def run_trials(server, workdir: pathlib.Path, trials: int, seed: int = 24) -> dict:
    """`trials` SIGKILL trials against `server` (tests/python/pg_server.py)."""
    rng = random.Random(seed)
    started = time.monotonic()
    total = {"lost": 0, "duplicates": 0, "unexpected": 0, "kills": 0}
    zygote = Zygote()
    try:
        for t in range(trials):
            result = one_trial(rng, zygote, server, workdir / f"trial{t:04d}", f"ev_kill_{t}")
            for k in total:
                total[k] += result[k]
            print(f"[postgres_sink_kill] trial {t}: {result}", file=sys.stderr, flush=True)
    finally:
        zygote.close()
    return {"trials": trials, "lost": total["lost"] + total["unexpected"],
            "duplicates": total["duplicates"], "rss_max_over_budget": None,
            "unexpected": total["unexpected"], "kills": total["kills"],
            "records": trials * FILES_PER_TRIAL * ROWS_PER_FILE,
            "delivery": "exactly-once (checkpoint + rill_sink_progress in the row transaction)",
            "seconds": round(time.monotonic() - started, 1)}


def run(trials: int, workdir: pathlib.Path, args) -> dict:
    import pg_server

    reason = pg_server.missing_requirements()
    if reason:
        raise RuntimeError(f"postgres_sink_kill needs a PostgreSQL server: {reason}")
    server = pg_server.PostgresServer()
    try:
        server.start()
        return run_trials(server, workdir, trials)
    finally:
        server.close()


def run_writer_kills(trials: int, workdir: pathlib.Path, args) -> dict:
    import pg_server

    reason = pg_server.missing_requirements()
    if reason:
        raise RuntimeError(f"postgres_writer_kill needs a PostgreSQL server: {reason}")
    binary = ROOT / "build" / "release" / "tests" / "cpp" / "postgres_sink_test"
    if not binary.exists():
        raise RuntimeError(f"{binary} is not built (cmake --build build/release "
                           "--target postgres_sink_test)")
    rng = random.Random(20261202)
    server = pg_server.PostgresServer()
    started = time.monotonic()
    lost = duplicates = before_first_commit = 0
    progress = versions = 0
    try:
        server.start()
        for trial in range(trials):
            # A fresh target (and sink name) every 10 trials keeps each check small.
            table = f"writer_kill_{trial // 10}"
            if trial % 10 == 0:
                versions += progress
                progress = 0
            env = dict(os.environ, RILL_PG_KILL_DSN=server.dsn(), RILL_PG_KILL_TABLE=table)
            child = subprocess.Popen([str(binary), "--gtest_also_run_disabled_tests",
                                      "--gtest_filter=PostgresSinkWriterKillChild.*"],
                                     env=env, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
            time.sleep(rng.uniform(0.05, 0.65))
            child.kill()
            child.wait()
            with server.connect() as conn:
                row = conn.execute("SELECT version FROM rill_sink_progress WHERE sink = %s",
                                   (table,)).fetchone() if conn.execute(
                    "SELECT to_regclass('rill_sink_progress')").fetchone()[0] else None
                committed = row[0] if row else 0
                if committed == 0:
                    before_first_commit += 1
                    continue
                count, batches, whole = conn.execute(
                    f"SELECT count(*), count(DISTINCT price), count(*) FILTER (WHERE c = 200) "
                    f"FROM (SELECT price, count(*) OVER (PARTITION BY price) c FROM {table}) x"
                ).fetchone()
                expected = committed * 200
                lost += max(0, expected - count) + (count - whole)
                duplicates += max(0, count - expected)
                if committed < progress:
                    lost += (progress - committed) * 200  # the progress went back
                progress = committed
            if trial % 50 == 49:
                print(f"[postgres_writer_kill] {trial + 1} trials, {versions + progress} versions, "
                      f"lost {lost}, duplicates {duplicates}", file=sys.stderr, flush=True)
    finally:
        server.close()
    versions += progress
    return {"trials": trials, "lost": lost, "duplicates": duplicates,
            "rss_max_over_budget": None, "committed_versions": versions,
            "rows": versions * 200, "kills_before_first_commit": before_first_commit,
            "seconds": round(time.monotonic() - started, 1)}


KINDS = {"postgres_sink_kill": run, "postgres_writer_kill": run_writer_kills}


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--zygote":
        zygote()
    else:
        import argparse
        import tempfile

        parser = argparse.ArgumentParser()
        parser.add_argument("--trials", type=int, default=10)
        options = parser.parse_args()
        with tempfile.TemporaryDirectory() as tmp:
            print(json.dumps(run(options.trials, pathlib.Path(tmp), options)))
