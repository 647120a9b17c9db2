#!/usr/bin/env python3
"""bench/scaleout: a scaled-out Rill application on one machine (issue 28).

One real Kafka broker (tests/python/kafka_broker.py), N `rill serve` instances
of one application, each optionally in its own cgroup v1 CPU group with the
same quota (cpu.cfs_quota_us; cpu.max where cgroup v2 is mounted), so that the
scaling is visible on a 2-core machine. Prints one JSON line per figure:

  throughput   records/s with 1, 2 and 3 instances (quota'd and unthrottled), and
               the efficiency of each added instance: thr(k) / (k * thr(1)).
               The work: a 12-partition JSON input topic into an append table and
               on through an exactly-once Kafka sink; done when the group's
               committed offsets reach the end of every partition.
  eos          the same with 1 unthrottled instance, exactly_once on (commit
               interval 100 ms and 1 s) against off (at-least-once): the ratio.
  takeover     SIGKILL one of 2 instances (not restarted): time until every one
               of its partitions has a committed offset past the kill, p50/p95/max
               over --trials, split into detection (kill -> the survivor's revoke:
               the session timeout), rebalance (revoke -> assign), restore (0:
               partition shards are not restored yet) and catch-up (assign -> the
               last orphaned partition's first commit). takeover_keyed: the same
               with a keyed table, whose orphaned shards the survivor restores.
  global_view_latency
               2 instances with a global view (scope = 'global') over an append
               table; batches produced every 50 ms: time from a batch's produce
               to node-1's view counting it, p50/p99/max.

  restore_rate a keyed table of --restore-mb (1024) MB of input on one instance:
               SIGKILL, restart, the partition shards' restore, one line for each
               source: the input topic (compacted: replay to the committed
               offsets), the changelog topic (the input not compacted), and the
               instance's local checkpoint (current): MB/s, records/s.
  soak         3 instances under 5,000 records/s for --soak-minutes (30): the
               rebalances the members saw (none expected) and the generations.
  failures     tests/python/test_cluster_failures.py's SIGKILL test at length:
               --failure-records (10,000,000) and --kills (20): lost, duplicates.

Usage: bench/scaleout.py [--records N] [--quota CPUS] [--trials N] [--quick]
                         [--only throughput,eos,takeover,takeover_keyed,latency,restore,
                                 soak,failures]
                         [--soak-minutes M] [--restore-mb MB] [--failure-records N] [--kills K]
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "python"))
from kafka_broker import KafkaBroker  # noqa: E402
from serve_process import METADATA_COLUMNS, application_pipeline, http_request, start_serve  # noqa: E402

RILL = pathlib.Path(os.environ.get("RILL_BIN", ROOT / "build" / "release" / "apps" / "rill" / "rill"))
TOKEN = "scaleout-bench"
PARTITIONS = 12
SESSION_MS = 6000


def emit(figure: dict) -> None:
    print(json.dumps(figure), flush=True)


class CpuGroup:
    """A cgroup with `cpus` CPUs of quota (v1 cpu.cfs_quota_us, else v2 cpu.max)."""

    def __init__(self, name: str, cpus: float):
        self.path = None
        v1 = pathlib.Path("/sys/fs/cgroup/cpu")
        v2 = pathlib.Path("/sys/fs/cgroup/cgroup.controllers")
        try:
            if v1.is_dir():
                self.path = v1 / name
                self.path.mkdir(exist_ok=True)
                (self.path / "cpu.cfs_period_us").write_text("100000")
                (self.path / "cpu.cfs_quota_us").write_text(str(int(cpus * 100000)))
            elif v2.exists():
                self.path = pathlib.Path("/sys/fs/cgroup") / name
                self.path.mkdir(exist_ok=True)
                (self.path / "cpu.max").write_text(f"{int(cpus * 100000)} 100000")
        except OSError as e:
            raise SystemExit(f"bench/scaleout: cannot make cgroup {name}: {e} (run as root)")

    def add(self, pid: int) -> None:
        (self.path / "cgroup.procs").write_text(str(pid))

    def remove(self) -> None:
        try:
            self.path.rmdir()
        except OSError:
            pass


class Application:
    """N `rill serve` instances of one application (a fresh app_id)."""

    def __init__(self, broker, workdir, source, output, exactly_once=True, commit_ms=100,
                 quota=None, metadata_columns=False, extra="", columns=None, keyed=False):
        self.broker, self.workdir = broker, workdir
        self.app = f"bench-{uuid.uuid4().hex[:8]}"
        self.quota = quota
        self.pipeline = workdir / f"{self.app}.yaml"
        columns = columns or "id: int64, k: int64, ts: float64"
        if metadata_columns:
            columns += ", " + METADATA_COLUMNS
        text = application_pipeline(
            self.app, broker.bootstrap_servers, source, "{" + columns + "}",
            output=output, session_timeout_ms=SESSION_MS, commit_interval_ms=commit_ms,
            exactly_once=exactly_once, transaction_timeout_ms=10000, max_rows=200000,
            metadata_columns=metadata_columns) + extra
        if keyed:  # a keyed table (partition shards) instead of the append one
            text = text.replace("    mode: append\n    retention: {max_rows: 200000}\n",
                                "    primary_key: id\n")
        self.pipeline.write_text(text)
        self.procs = {}
        self.groups = []
        self.extra_args = []

    def start(self, node):
        args = [RILL, "serve", "--metrics", ":memory:", "--listen", "127.0.0.1:0", "--token",
                TOKEN, "--instance-id", node, *self.extra_args, self.pipeline]
        proc, address = start_serve(args, self.workdir / f"{self.app}.{node}.out",
                                    self.workdir / f"{self.app}.{node}.err")
        if self.quota:
            group = CpuGroup(f"{self.app}-{node}", self.quota)
            group.add(proc.pid)
            self.groups.append(group)
        self.procs[node] = (proc, address)

    def status(self, node):
        code, body = http_request(self.procs[node][1], "/api/v1/telemetry/cluster", TOKEN)
        return body if code == 200 else {}

    def stop(self):
        for proc, _ in self.procs.values():
            if proc.poll() is None:
                proc.terminate()
        for proc, _ in self.procs.values():
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        for g in self.groups:
            g.remove()


def produce(broker, topic, first, n, chunk=100000):
    for start in range(first, first + n, chunk):
        ids = range(start, min(first + n, start + chunk))
        now = time.time()
        broker.produce(topic, [f'{{"id":{i},"k":{i % 1000},"ts":{now}}}' for i in ids],
                       keys=[str(i % 1000).encode() for i in ids], timeout=300)


def steady_feed(broker, topic, per_batch, every_s, stop, sent):
    """Produce `per_batch` records every `every_s` seconds (one producer, acks
    awaited per batch) until `stop` is set; append (records so far, monotonic
    start of the batch, seconds until its last ack) to `sent`."""
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0,
                         "acks": "all"})
    n = 0
    while not stop.is_set():
        t = time.monotonic()
        for i in range(n, n + per_batch):
            producer.produce(topic, key=str(i % 1000).encode(),
                             value=f'{{"id":{i},"k":{i % 1000},"ts":{time.time()}}}')
        producer.flush(30)
        n += per_batch
        sent.append((n, t, time.monotonic() - t))
        time.sleep(max(0.0, every_s - (time.monotonic() - t)))


def committed_total(broker, app, topic):
    return sum(max(0, o) for o in broker.committed(app, topic).values())


def run_until_committed(broker, app_obj, source, records, timeout=900):
    """Seconds from the instances' start until the group committed every record."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if committed_total(broker, app_obj.app, source) >= records:
            return time.monotonic() - t0
        time.sleep(0.2)
    raise RuntimeError(f"{app_obj.app}: not done within {timeout} s")


def throughput(broker, workdir, source, records, instances, quota, exactly_once=True,
               commit_ms=100):
    output = f"out-{uuid.uuid4().hex[:8]}"
    broker.create_topic(output, PARTITIONS)
    app = Application(broker, workdir, source, output, exactly_once, commit_ms, quota)
    try:
        for i in range(instances):
            app.start(f"node-{i + 1}")
        # Throughput counts from the moment every partition is owned.
        deadline = time.time() + 60
        while time.time() < deadline:
            owned = sum(len(app.status(n).get("partitions", [])) for n in app.procs)
            if owned == PARTITIONS:
                break
            time.sleep(0.1)
        seconds = run_until_committed(broker, app, source, records)
        return records / seconds
    finally:
        app.stop()


def takeover_trials(broker, workdir, trials, rate_per_s=20000, keyed=False):
    """Kill node-2 of 2 (not restarted); time until each of its partitions has a
    committed offset past what was committed at the kill. `keyed`: the table is
    keyed with the metadata columns (partition shards: the survivor restores the
    orphaned partitions, a fresh topic per trial so each restore replays ~3 s
    of input)."""
    source = f"to-{uuid.uuid4().hex[:8]}"
    output = f"too-{uuid.uuid4().hex[:8]}"
    broker.create_topic(source, PARTITIONS)
    broker.create_topic(output, PARTITIONS)
    times = []
    parts = []
    name = "takeover_keyed" if keyed else "takeover"
    for trial in range(trials):
        if keyed:
            source = f"tok-{uuid.uuid4().hex[:8]}"
            broker.create_topic(source, PARTITIONS)
        app = Application(broker, workdir, source, output, metadata_columns=keyed, keyed=keyed)
        stop = threading.Event()

        def feed():
            n = 0
            while not stop.is_set():
                produce(broker, source, n, rate_per_s // 5, chunk=rate_per_s // 5)
                n += rate_per_s // 5
                time.sleep(0.2)

        feeder = threading.Thread(target=feed, daemon=True)
        try:
            app.start("node-1")
            app.start("node-2")
            deadline = time.time() + 60
            while time.time() < deadline and len(app.status("node-2").get("partitions", [])) == 0:
                time.sleep(0.1)
            feeder.start()
            time.sleep(3)
            orphans = [p["partition"] for p in app.status("node-2")["partitions"]]
            at_kill = broker.committed(app.app, source)
            killed_wall = time.time()
            killed = time.monotonic()
            app.procs["node-2"][0].send_signal(signal.SIGKILL)
            app.procs["node-2"][0].wait()
            first = {}
            owned_at = None
            while len(first) < len(orphans) and time.monotonic() - killed < 120:
                if owned_at is None and len(app.status("node-1").get("partitions", [])) == PARTITIONS:
                    owned_at = time.monotonic() - killed
                now = broker.committed(app.app, source)
                for p in orphans:
                    if p not in first and now.get(p, -1) > at_kill.get(p, -1):
                        first[p] = time.monotonic() - killed
                time.sleep(0.05)
            worst = max(first.values()) if first else float("nan")
            times.append(worst)
            # The survivor's last rebalance: revoke (detection) -> assign, which
            # ends after the shards' restore.
            st = app.status("node-1")
            assigned = st.get("last_rebalance_at", 0) - killed_wall
            rebalance = st.get("last_rebalance_seconds", 0)
            restore = st.get("last_restore_seconds", 0) if keyed else 0.0
            split = {"detection_s": round(assigned - rebalance, 3),
                     "rebalance_s": round(rebalance - restore, 3), "restore_s": round(restore, 3),
                     "catch_up_s": round(worst - assigned, 3)}
            if keyed:
                split["restored_records"] = st.get("restored_records", 0)
            parts.append(split)
            emit({"figure": f"{name}_trial", "trial": trial, "orphaned_partitions": len(orphans),
                  "rebalanced_s": owned_at, "first_commit_s_max": worst,
                  "first_commit_s_min": min(first.values()) if first else None,
                  "session_timeout_s": SESSION_MS / 1000, **split})
        finally:
            stop.set()
            if feeder.is_alive():
                feeder.join(timeout=30)
            app.stop()
    times.sort()
    emit({"figure": name, "trials": len(times), "p50_s": statistics.median(times),
          "p95_s": times[min(len(times) - 1, int(round(0.95 * (len(times) - 1))))],
          "max_s": times[-1], "session_timeout_s": SESSION_MS / 1000,
          **{f"median_{k}": round(statistics.median(p[k] for p in parts), 3) for k in parts[0]},
          "note": "kill -> every orphaned partition's first committed offset past the kill; "
                  "detection is the session timeout; " +
                  ("restore: the survivor restores the orphaned partitions (from their changelog: the input is not compacted)" if keyed
                   else "restore 0: an append table is not sharded")})


def global_view_latency(broker, workdir, seconds=30, batch=200, every_s=0.05):
    """Input -> global view: 2 instances, a global view counting an append
    table's rows; a batch every `every_s`; each batch's latency is the time from
    the start of its produce to node-1's view counting every row up to it."""
    source = f"lat-{uuid.uuid4().hex[:8]}"
    broker.create_topic(source, PARTITIONS)
    app = Application(broker, workdir, source, None, metadata_columns=True,
                      extra="""engine:
  trigger_interval_ms: 10
tasks:
  - name: totals
    type: sql
    scope: global
    interval_seconds: 0.05
    sql: SELECT count(*) AS n, max(id) AS hi FROM orders
""")
    sent = []  # (rows so far, monotonic start of the batch's produce, seconds to its ack)
    seen = {}
    stop = threading.Event()
    try:
        app.start("node-1")
        app.start("node-2")
        deadline = time.time() + 60
        while time.time() < deadline and not all(app.status(n).get("partitions") for n in app.procs):
            time.sleep(0.1)

        feeder = threading.Thread(target=steady_feed,
                                  args=(broker, source, batch, every_s, stop, sent), daemon=True)
        feeder.start()
        end = time.monotonic() + seconds
        address = app.procs["node-1"][1]
        while time.monotonic() < end + 10:
            if time.monotonic() > end:
                stop.set()
            code, body = http_request(address, "/api/v1/query", TOKEN,
                                      b'{"sql": "SELECT n FROM totals"}')
            now = time.monotonic()
            count = int(body["rows"][0]["n"] or 0) if code == 200 and body.get("rows") else 0
            for rows, t, _ in list(sent):
                if rows <= count and rows not in seen:
                    seen[rows] = now - t
            if stop.is_set() and sent and sent[-1][0] in seen:
                break
            time.sleep(0.01)
        feeder.join(timeout=30)
    finally:
        stop.set()
        app.stop()
    lat = sorted(seen.values())
    if not lat:
        raise RuntimeError("global_view_latency: the view never counted a batch")
    emit({"figure": "global_view_latency", "batches": len(lat), "batches_sent": len(sent),
          "rows_per_batch": batch, "batch_every_s": every_s,
          "p50_ms": round(1000 * statistics.median(lat), 1),
          "p99_ms": round(1000 * lat[min(len(lat) - 1, int(0.99 * len(lat)))], 1),
          "max_ms": round(1000 * lat[-1], 1),
          "produce_ack_p50_ms": round(1000 * statistics.median(a for _, _, a in sent), 1),
          "note": "produce start -> node-1's global view counts the batch (10 ms ticks, commit "
                  "interval 100 ms, view interval 50 ms, polled every 10 ms)"})


def soak(broker, workdir, minutes, per_batch=1000, every_s=0.2):
    """3 instances under steady input (5,000 records/s) for `minutes`: the
    group's generation and the members' rebalance counts must not move (no
    spurious rebalance), and every record is committed at the end."""
    source = f"soak-{uuid.uuid4().hex[:8]}"
    broker.create_topic(source, PARTITIONS)
    app = Application(broker, workdir, source, None)
    stop = threading.Event()
    sent = []
    nodes = ("node-1", "node-2", "node-3")
    try:
        for node in nodes:
            app.start(node)
        deadline = time.time() + 90
        while time.time() < deadline:
            st = [app.status(n) for n in nodes]
            if all(x.get("partitions") for x in st) and len({x.get("generation") for x in st}) == 1:
                break
            time.sleep(0.2)
        time.sleep(3)
        start = {n: app.status(n) for n in nodes}
        feeder = threading.Thread(target=steady_feed,
                                  args=(broker, source, per_batch, every_s, stop, sent), daemon=True)
        feeder.start()
        end = time.monotonic() + minutes * 60
        generations = set()
        while time.monotonic() < end:
            for n in nodes:
                generations.add(app.status(n).get("generation"))
            time.sleep(5)
        stop.set()
        feeder.join(timeout=60)
        produced = sent[-1][0] if sent else 0
        done = run_until_committed(broker, app, source, produced, timeout=300)
        last = {n: app.status(n) for n in nodes}
    finally:
        stop.set()
        app.stop()
    rebalances = sum(last[n]["assigns"] - start[n]["assigns"] for n in nodes)
    emit({"figure": "soak", "minutes": minutes, "instances": len(nodes), "records": produced,
          "records_per_s": round(produced / (minutes * 60)),
          "generation_start": start["node-1"]["generation"],
          "generations_seen": sorted(g for g in generations if g is not None),
          "rebalances": rebalances, "spurious_rebalances": rebalances,
          "all_committed_after_s": round(done, 1), "session_timeout_s": SESSION_MS / 1000})


RESTORE_SOURCES = {
    "input": "the input topic (compacted: replay to the committed offsets)",
    "changelog": "the changelog topic <app>-orders-changelog (the input is not compacted)",
    "checkpoint": "the instance's local checkpoint (current: nothing replayed)",
}


def restore_rate(broker, workdir, megabytes, source_kind, record_bytes=256):
    """A keyed table of `megabytes` of input (12 partitions, one instance):
    SIGKILL, restart, and the time its partition shards take to restore from
    `source_kind` (RESTORE_SOURCES): MB/s and records/s."""
    source = f"rs-{uuid.uuid4().hex[:8]}"
    compacted = source_kind != "changelog"
    broker.create_topic(source, PARTITIONS,
                        config={"cleanup.policy": "compact"} if compacted else None)
    records = int(megabytes * 1e6 / record_bytes)
    pad = "x" * (record_bytes - 60)
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 20,
                         "batch.size": 1000000, "compression.type": "none"})
    for i in range(records):
        while True:
            try:
                producer.produce(source, key=str(i).encode(),
                                 value=f'{{"id":{i},"k":{i % 1000},"ts":0.5,"pad":"{pad}"}}')
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(600)
    app = Application(broker, workdir, source, None, metadata_columns=True, keyed=True,
                      columns="id: int64, k: int64, ts: float64, pad: string")
    checkpoints = workdir / f"{app.app}-ckpt"
    if source_kind == "checkpoint":
        # A checkpoint every 10 s; the instance is killed once one holds every record.
        app.extra_args = ["--checkpoint-dir", str(checkpoints), "--checkpoint-interval", "10"]
    try:
        app.start("node-1")
        run_until_committed(broker, app, source, records, timeout=1800)
        if source_kind == "checkpoint":
            deadline = time.monotonic() + 600
            while time.monotonic() < deadline and sum(checkpointed(checkpoints).values()) < records:
                time.sleep(0.5)
        time.sleep(1)
        app.procs["node-1"][0].send_signal(signal.SIGKILL)
        app.procs["node-1"][0].wait()
        t0 = time.monotonic()
        app.start("node-1")
        deadline = time.monotonic() + 1800
        st = {}
        while time.monotonic() < deadline:
            st = app.status("node-1")
            if st.get("partitions_restored", 0) >= PARTITIONS:
                break
            time.sleep(0.1)
        to_serving = time.monotonic() - t0
        code, body = http_request(app.procs["node-1"][1], "/api/v1/query", TOKEN,
                                  b'{"sql": "SELECT count(*) AS n FROM orders"}')
        rows = body["rows"][0]["n"] if code == 200 else None
    finally:
        app.stop()
    line = {"figure": "restore_rate", "source": RESTORE_SOURCES[source_kind],
            "records": st.get("restored_records"), "rows_in_table": rows,
            "partitions_from_changelog": st.get("partitions_from_changelog"),
            "partitions_from_checkpoint": st.get("partitions_from_checkpoint"),
            "restart_to_restored_s": round(to_serving, 2)}
    if source_kind == "checkpoint":
        # The rows came from the checkpoint's files before the group was joined:
        # the rate is the table's input over the time from the restart.
        files = sum(f.stat().st_size for f in (checkpoints / "current").resolve().glob("*") if f.is_file())
        line.update({"input_megabytes": round(records * record_bytes / 1e6, 1),
                     "checkpoint_megabytes": round(files / 1e6, 1),
                     "mb_per_s": round(records * record_bytes / 1e6 / to_serving, 1),
                     "records_per_s": round(records / to_serving)})
    else:
        seconds = st.get("last_restore_seconds") or float("nan")
        line.update({"megabytes": round(st.get("restored_bytes", 0) / 1e6, 1),
                     "restore_s": round(seconds, 2),
                     "mb_per_s": round(st.get("restored_bytes", 0) / 1e6 / seconds, 1),
                     "records_per_s": round(st.get("restored_records", 0) / seconds)})
    emit(line)


def checkpointed(directory):
    """The newest complete checkpoint's offsets of the source: {partition: offset}."""
    current = directory / "current"
    if not current.exists():
        return {}
    manifest = json.loads((current / "manifest.json").read_text())
    for c in manifest["connectors"]:
        return {p["partition"]: p["offset"] for p in c["position"]["partitions"]}
    return {}


def failures(records, kills):
    """The SIGKILL test of the test command at length (tests/python/test_cluster_failures.py):
    3 instances, `records` records, `kills` SIGKILLs; 0 lost, 0 duplicates."""
    env = dict(os.environ, RILL_TEST_SCALEOUT_RECORDS=str(records),
               RILL_TEST_SCALEOUT_KILLS=str(kills))
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "-p", "no:cacheprovider",
                          "tests/python/test_cluster_failures.py::"
                          "test_sigkilled_instances_lose_nothing_and_write_nothing_twice"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=7200)
    summary = [l for l in out.stdout.splitlines() if "SIGKILLs: output" in l]
    emit({"figure": "failures", "records": records, "kills": kills,
          "passed": out.returncode == 0, "seconds": round(time.monotonic() - t0),
          "summary": summary[-1] if summary else out.stdout[-500:]})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--quota", type=float, default=0.5, help="CPUs per instance")
    ap.add_argument("--trials", type=int, default=10)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only",
                    default="throughput,eos,takeover,takeover_keyed,latency,restore,soak,failures",
                    help="comma-separated: throughput, eos, takeover, takeover_keyed, latency, "
                         "restore, soak, failures")
    ap.add_argument("--soak-minutes", type=float, default=30)
    ap.add_argument("--restore-mb", type=float, default=1024)
    ap.add_argument("--failure-records", type=int, default=10_000_000)
    ap.add_argument("--kills", type=int, default=20)
    args = ap.parse_args()
    only = set(args.only.split(","))
    if args.quick:
        args.records, args.trials = 300_000, 3
        args.soak_minutes, args.failure_records, args.kills = 2, 1_000_000, 5
        args.restore_mb = 64
    workdir = pathlib.Path(tempfile.mkdtemp(prefix="rill-scaleout-"))
    broker = KafkaBroker(workdir / "kafka").start()
    try:
        source = f"in-{uuid.uuid4().hex[:8]}"
        broker.create_topic(source, PARTITIONS)
        if only & {"throughput", "eos"}:
            print(f"bench/scaleout: producing {args.records} records", file=sys.stderr)
            produce(broker, source, 0, args.records)

        for quota in (args.quota, None) if "throughput" in only else ():
            base = None
            for k in (1, 2, 3):
                thr = throughput(broker, workdir, source, args.records, k, quota)
                base = base or thr
                emit({"figure": "throughput", "instances": k,
                      "cpu_quota_per_instance": quota or "unthrottled",
                      "records_per_s": round(thr), "efficiency": round(thr / (k * base), 3),
                      "records": args.records})

        at_least_once = throughput(broker, workdir, source, args.records, 1, None,
                                   exactly_once=False) if "eos" in only else None
        for commit_ms in (100, 1000) if "eos" in only else ():
            eos = throughput(broker, workdir, source, args.records, 1, None, True, commit_ms)
            emit({"figure": "eos_overhead", "commit_interval_ms": commit_ms,
                  "exactly_once_records_per_s": round(eos),
                  "at_least_once_records_per_s": round(at_least_once),
                  "ratio": round(eos / at_least_once, 3)})
        if "latency" in only:
            global_view_latency(broker, workdir)
        if "takeover" in only:
            takeover_trials(broker, workdir, args.trials)
        if "takeover_keyed" in only:
            takeover_trials(broker, workdir, args.trials, keyed=True)
        if "restore" in only:
            for kind in RESTORE_SOURCES:
                restore_rate(broker, workdir, args.restore_mb, kind)
        if "soak" in only:
            soak(broker, workdir, args.soak_minutes)
    finally:
        broker.stop()
    if "failures" in only:  # its own broker (the test's fixture)
        failures(args.failure_records, args.kills)


if __name__ == "__main__":
    main()
