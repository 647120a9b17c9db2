"""SIGKILL trials of a KafkaConnector reading a real broker's topic (issue 23).

A child process (forked from a zygote process that imported pyarrow and rills
once, so a trial does not pay ~1.5 s of imports) runs an engine (RillEngine, a
tick every TICK_MS) whose append
table `ev` is fed by one KafkaConnector (start="committed", a fixed group id and
static membership, so a restarted child takes the partitions over at once).
The parent produces keyed records continuously (one producer, keys 0, 1, 2, …
in order, their (partition, offset) known from the delivery reports) and
SIGKILLs the child at random moments: during its start-up (before or while it
joins the group) or while it consumes, then starts a new one. After the last
trial the producer stops, a final child reads to the end and stops cleanly.

Mode "at_least_once" (no checkpoint directory). What counts as delivered is
what a tick APPLIED, not what a child exported before dying: each child
subscribes to `ev`; the subscriber runs on the tick thread right after the
write is published and before the tick tells the connector what it applied
(Engine::IngestConnectors: write, publish, subscribers, then CommitApplied),
and it appends the new rows' keys to that incarnation's log and fsyncs it. A
line in a log is therefore a row a tick applied, and nothing the connector
committed can be missing from the logs written up to then. Checked:
  - after every kill, the group's committed offset of every partition never
    passes a record missing from the union of the logs of the incarnations so
    far (`commit_violations`; checked at the end, once every delivery report
    is in);
  - at the end, the union of all logs holds every produced key (`lost` = 0);
    keys logged more than once are `duplicates` (at-least-once: a row applied
    but not yet committed when the child died is read again);
  - the final clean stop committed the end of every partition.
A truncated last line (the kill came during the write) is ignored: its tick
had not committed anything yet.

Mode "exactly_once" (checkpoints every 0.05 s into a checkpoint directory; each
child restores the newest checkpoint: tables and partition offsets). Checked:
the final table holds every produced key exactly once (`lost`, `duplicates`
both 0), and after every kill the committed offsets never pass what the newest
complete checkpoint holds (`commit_violations`).

Used by tests/python/test_kafka_kill.py (50 trials) and bench/faults/kafka.py
(1,000). Run directly: python tests/python/kafka_kill.py --trials 20 [--mode exactly_once]
"""

from __future__ import annotations

import ctypes
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from zygote import Zygote

TICK_MS = 50
PARTITIONS = 3
RATE = 400  # records per second produced while the trials run


# The child (forked by the zygote) -----------------------------------------------------


def child(mode: str, workdir: str, bootstrap: str, topic: str, group: str, n: int) -> None:
    import pyarrow as pa

    from rills import KafkaConnector, RetentionPolicy, RillEngine

    work = Path(workdir)
    kwargs: Dict[str, Any] = {}
    if mode == "exactly_once":
        kwargs = {"checkpoint_dir": str(work / "ckpt"), "checkpoint_interval_seconds": 0.05}
    engine = RillEngine(trigger_interval_ms=TICK_MS, metrics_path=None, **kwargs)
    engine.register_table("ev", schema=pa.schema([("k", pa.int64())]), mode="append",
                          retention_policy=RetentionPolicy(max_rows=10**8))
    if mode == "at_least_once":
        log = os.open(work / f"applied-{n:05d}.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND,
                      0o644)
        seen = [0]

        def applied(_name: str, table: pa.Table) -> None:
            # Runs on the tick thread before the tick lets the connector commit.
            rows = table.num_rows
            if rows > seen[0]:
                keys = table.column("k").slice(seen[0]).to_pylist()
                os.write(log, "".join(f"{k}\n" for k in keys).encode())
                os.fsync(log)
            seen[0] = rows

        engine.subscribe("ev", applied)
    config = {"bootstrap.servers": bootstrap, "group.id": group,
              "group.instance.id": f"{group}-member",
              "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
              "fetch.wait.max.ms": 20}
    engine.add_connector(KafkaConnector("ev", topic, config, start="committed", name="ev_kafka"))
    engine.start()  # exactly_once: restores the newest checkpoint first
    (work / f"started-{n:05d}").write_text("")
    stop, total = work / "stop", work / "total"
    while not stop.exists():
        if total.exists() and engine.get_table("ev").num_rows >= int(total.read_text()):
            break  # exactly_once: the table holds every produced record
        time.sleep(0.01)
    engine.stop()  # exactly_once: the final checkpoint
    engine.close()  # the connector commits synchronously what it may
    (work / f"stopped-{n:05d}").write_text("")


def _die_with_parent() -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def start_and_drain_sink(engine, sink, work, n: int, table: str = "ev",
                         retry_on=(TimeoutError,)) -> None:
    """A sink trial's child from `engine.start()` on (bench/faults/kafka_sink.py,
    postgres_sink.py): start (restoring the newest checkpoint), mark
    started-<n>, wait until `table` holds the count in work/total (written by
    the parent before the final child), then flush until the sink has no lag
    (60 s at most; `retry_on` exceptions of flush are retried), stop and mark
    stopped-<n>. A child killed earlier never gets past the wait."""
    engine.start()  # restores the newest checkpoint first
    (work / f"started-{n:05d}").write_text("")
    total = work / "total"
    while not total.exists() or engine.get_table(table).num_rows < int(total.read_text()):
        time.sleep(0.01)
    # The final child: everything is in the table; let a checkpoint hold it and
    # the sink commit it, then stop cleanly.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            sink.flush(30)
        except retry_on:
            pass
        if sink.stats().get("lag_versions", 1) == 0:
            break
        time.sleep(0.05)
    engine.stop()
    engine.close()
    (work / f"stopped-{n:05d}").write_text("")


def serve_forks(prepare: Callable[[str], Tuple[str, int, Callable[[], None]]]) -> None:
    """The zygote's loop (shared by the kill trials of bench/faults/): for each
    stdin line, `prepare(line)` gives (workdir, n, run); fork a child that runs
    `run()` with stdin/stdout on /dev/null and stderr in
    workdir/child-<n % 4>.err, dies with its parent and exits 1 on an
    exception; answer its pid. Call after the imports the children need."""
    _die_with_parent()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    print("ready", flush=True)
    for line in sys.stdin:
        workdir, n, run = prepare(line)
        pid = os.fork()
        if pid == 0:
            _die_with_parent()
            null = os.open(os.devnull, os.O_RDWR)
            os.dup2(null, 0)
            os.dup2(null, 1)
            err = os.open(os.path.join(workdir, f"child-{n % 4}.err"),
                          os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(err, 2)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            code = 0
            try:
                run()
            except BaseException:
                traceback.print_exc()
                code = 1
            finally:
                sys.stderr.flush()
                os._exit(code)
        print(pid, flush=True)


def zygote(mode: str, workdir: str, bootstrap: str, topic: str, group: str) -> None:
    """Import once, then fork one child per line ("n") read from stdin and
    answer its pid. A fresh interpreter would spend ~1.5 s importing pyarrow
    and rills per trial; the zygote runs no thread of its own (no engine, no
    Kafka client) when it forks. Children are reaped by the kernel."""
    import pyarrow  # noqa: F401
    import rills  # noqa: F401

    def prepare(line: str):
        n = int(line)
        return workdir, n, lambda: child(mode, workdir, bootstrap, topic, group, n)

    serve_forks(prepare)


# The parent ------------------------------------------------------------------------


class Producer:
    """Produces keys 0, 1, 2, … at `rate` per second on its own thread; keeps
    the (partition, offset) of each from the delivery reports."""

    def __init__(self, bootstrap: str, topic: str, rate: int):
        from confluent_kafka import Producer as KafkaProducer

        self.topic, self.rate = topic, rate
        self.producer = KafkaProducer({"bootstrap.servers": bootstrap, "enable.idempotence": True,
                                       "linger.ms": 5, "log_level": 0})
        self.sent = 0
        self.placed: Dict[int, Tuple[int, int]] = {}
        self.errors: List[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, err, msg) -> None:
        if err is not None:
            self.errors.append(str(err))
        else:
            self.placed[int(msg.key())] = (msg.partition(), msg.offset())

    def _run(self) -> None:
        t0 = time.monotonic()
        while not self._stop.is_set():
            due = int((time.monotonic() - t0) * self.rate)
            while self.sent < due:
                k = self.sent
                try:
                    self.producer.produce(self.topic, key=str(k), value=json.dumps({"k": k}),
                                          on_delivery=self._delivered)
                except BufferError:
                    break
                self.sent += 1
            self.producer.poll(0.005)

    def start(self) -> "Producer":
        self._thread.start()
        return self

    def stop(self) -> int:
        """Stop producing, wait for every delivery report; return the count sent."""
        self._stop.set()
        self._thread.join()
        left = self.producer.flush(60)
        if left or self.errors or len(self.placed) != self.sent:
            raise RuntimeError(f"producer: {left} undelivered, errors {self.errors[:3]}")
        return self.sent


def _complete_lines(path: Path) -> List[int]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    end = data.rfind(b"\n")
    return [int(x) for x in data[:end + 1].split()] if end >= 0 else []


def _newest_checkpoint_offsets(ckpt: Path, topic: str) -> Optional[Dict[int, int]]:
    ids = sorted(int(p.name[5:]) for p in ckpt.glob("ckpt-*") if (p / "manifest.json").exists())
    if not ids:
        return None
    manifest = json.loads((ckpt / f"ckpt-{ids[-1]:08d}" / "manifest.json").read_text())
    for c in manifest["connectors"]:
        pos = json.loads(c["position"]) if isinstance(c["position"], str) else c["position"]
        return {p["partition"]: p["offset"] for p in pos["partitions"] if p["topic"] == topic}
    return {}


def run_trials(broker, workdir: os.PathLike, trials: int, mode: str = "at_least_once",
               seed: int = 0, topic: Optional[str] = None,
               python: Optional[str] = None) -> Dict[str, Any]:
    """Run `trials` SIGKILL trials against `broker` (a kafka_broker.KafkaBroker);
    return {"trials", "lost", "duplicates", "commit_violations", "records", …}.
    The children run under `python` (default: this interpreter) with this
    process's PYTHONPATH (which must find rills)."""
    from confluent_kafka import Consumer, TopicPartition

    assert mode in ("at_least_once", "exactly_once"), mode
    rng = random.Random(seed)
    work = Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    tag = f"{mode}-{seed}-{os.getpid()}-{int(time.time() * 1000) % 10**8}"
    topic = topic or f"kill-{tag}"
    group = f"g-{tag}"
    broker.create_topic(topic, PARTITIONS)
    watcher = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                        "log_level": 0})  # never subscribes: only reads the committed offsets
    parts = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")  # the zygote forks: no BLAS threads
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).parent),
                                                      env.get("PYTHONPATH", "")]))
    started_at = time.monotonic()
    zyg = subprocess.Popen([python or sys.executable, __file__, "zygote", mode, str(work),
                            broker.bootstrap_servers, topic, group],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True)
    if zyg.stdout.readline().strip() != "ready":
        raise AssertionError("the zygote did not start")

    ctl = Zygote(zyg, work)
    alive, spawn, wait_for, kill = ctl.alive, ctl.spawn, ctl.wait_for, ctl.kill
    child_failed = ctl.child_failed

    producer = Producer(broker.bootstrap_servers, topic, RATE).start()
    kills: List[Tuple[int, Dict[int, int], Optional[Dict[int, int]]]] = []
    during_startup = 0
    pid = None
    try:
        for n in range(trials):
            pid = spawn(n)
            if rng.random() < 0.25:  # while it makes its engine, joins the group, fetches offsets
                during_startup += 1
                time.sleep(rng.uniform(0.0, 0.3))
            else:
                if not wait_for(work / f"started-{n:05d}", pid, 60):
                    raise child_failed(n, "did not start")
                time.sleep(rng.uniform(0.0, 0.8))
            if not alive(pid):
                raise child_failed(n, "exited by itself")
            kill(pid)
            committed = {tp.partition: tp.offset for tp in watcher.committed(parts, timeout=30)}
            ckpt = (_newest_checkpoint_offsets(work / "ckpt", topic)
                    if mode == "exactly_once" else None)
            kills.append((n, committed, ckpt))
        total = producer.stop()
        if mode == "exactly_once":  # the final child stops once its table holds them all
            (work / "total").write_text(str(total))
        # The final child reads to the end and stops cleanly.
        pid = spawn(trials)
        wanted = set(range(total))
        deadline = time.monotonic() + 120
        if mode == "at_least_once":
            final_log = work / f"applied-{trials:05d}.log"
            earlier = set()
            for n in range(trials):
                earlier.update(_complete_lines(work / f"applied-{n:05d}.log"))
            while time.monotonic() < deadline and alive(pid):
                if wanted <= earlier.union(_complete_lines(final_log)):
                    break
                time.sleep(0.05)
            (work / "stop").write_text("")
        if not wait_for(work / f"stopped-{trials:05d}", pid, max(5.0, deadline - time.monotonic())):
            raise child_failed(trials, "did not stop cleanly")
        while alive(pid):
            time.sleep(0.01)
        final_committed = {tp.partition: tp.offset for tp in watcher.committed(parts, timeout=30)}
    finally:
        if pid is not None:
            kill(pid)
        zyg.stdin.close()
        zyg.wait(timeout=30)
        if not producer._stop.is_set():
            producer._stop.set()
        watcher.close()

    placed = producer.placed  # key -> (partition, offset), every report in
    by_offset = {p: {} for p in range(PARTITIONS)}
    for k, (p, o) in placed.items():
        by_offset[p][o] = k
    ends = broker.end_offsets(topic)
    result: Dict[str, Any] = {"trials": trials, "records": total, "mode": mode,
                              "kills_during_startup": during_startup}
    violations = []
    if mode == "at_least_once":
        logs = [_complete_lines(work / f"applied-{n:05d}.log") for n in range(trials + 1)]
        union: set = set()
        covered = {p: 0 for p in range(PARTITIONS)}  # offsets below are all in the union
        for n, committed, _ in kills:
            union.update(logs[n])
            for p in range(PARTITIONS):
                while covered[p] in by_offset[p] and by_offset[p][covered[p]] in union:
                    covered[p] += 1
                c = committed.get(p, -1001)
                if c >= 0 and c > covered[p]:
                    violations.append({"kill": n, "partition": p, "committed": c,
                                       "first_unapplied": covered[p]})
        union.update(logs[-1])
        logged = sum(len(log) for log in logs)
        result.update(lost=len(wanted - union), duplicates=logged - len(union & wanted),
                      unexpected=len(union - wanted), applied_rows=logged)
        result["missing_sample"] = sorted(wanted - union)[:10]
    else:
        import pyarrow.feather as feather
        import pyarrow.parquet as pq

        current = work / "ckpt" / "current"
        manifest = json.loads((current / "manifest.json").read_text())
        entry = next(t for t in manifest["tables"] if t["name"] == "ev")
        path = current / entry["file"]
        table = pq.read_table(path) if entry["format"] == "parquet" else feather.read_table(path)
        keys = table.column("k").to_pylist()
        have = set(keys)
        result.update(lost=len(wanted - have), duplicates=len(keys) - len(have),
                      unexpected=len(have - wanted), table_rows=len(keys))
        result["missing_sample"] = sorted(wanted - have)[:10]
        for n, committed, ckpt in kills:
            for p in range(PARTITIONS):
                c = committed.get(p, -1001)
                held = (ckpt or {}).get(p, 0)
                if c >= 0 and c > held:
                    violations.append({"kill": n, "partition": p, "committed": c,
                                       "checkpoint": held})
    result["commit_violations"] = len(violations)
    result["violation_sample"] = violations[:5]
    result["final_commit_at_end"] = all(final_committed.get(p) == o for p, o in ends.items())
    result["seconds"] = round(time.monotonic() - started_at, 1)
    return result


def main() -> None:
    import argparse
    import tempfile

    sys.path.insert(0, str(Path(__file__).parent))
    from kafka_broker import KafkaBroker

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--mode", default="at_least_once")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    root = Path(__file__).resolve().parents[2]
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root / "python"),
                                                             os.environ.get("PYTHONPATH")]))
    with tempfile.TemporaryDirectory(prefix="rill-kafka-kill-") as tmp:
        broker = KafkaBroker(Path(tmp) / "broker").start()
        try:
            print(json.dumps(run_trials(broker, Path(tmp) / "work", args.trials, args.mode,
                                        args.seed)))
        finally:
            broker.stop(timeout=10)


if __name__ == "__main__":
    if len(sys.argv) == 7 and sys.argv[1] == "zygote":
        zygote(*sys.argv[2:7])
    else:
        main()
