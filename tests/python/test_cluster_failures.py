"""Exactly-once outputs of a scaled-out application through SIGKILLs (issue 28),
against the real broker (the session fixture `kafka_broker`).

Three `rill serve` instances of one application read a 12-partition input topic
(a sequence per key, produced by confluent-kafka) into a table keyed by the
record's id (held per partition: partition shards, restored from the table's
changelog since the input is not compacted) and write it on to an output topic
through a Kafka sink; a global view aggregates it per key. Each instance commits its
sink's output and its input offsets in one transaction of its own producer
(`<app_id>-<instance_id>`). While the records flow, instances are SIGKILLed
at random (most restarted at once: the restart fences the killed one's open
transaction; one stays down past the session timeout, so that its partitions
move to the others, and comes back later). Then a `read_committed` reader of
the output must see every produced record exactly once: none lost, none
twice. DuckDB compares the output with what was produced, and each instance's
shards and the global view with DuckDB over what was produced.

The size is bounded here (RILL_TEST_SCALEOUT_RECORDS, default 1,000,000, and
RILL_TEST_SCALEOUT_KILLS, default 5); bench/scaleout runs the long version.
"""
from __future__ import annotations

import json
import os
import pathlib
import random
import signal
import subprocess
import threading
import time
import uuid

import duckdb
import pyarrow as pa
import pytest

from conftest import requires
from serve_process import METADATA_COLUMNS, application_pipeline, http_request, start_serve, wait_for

ROOT = pathlib.Path(__file__).resolve().parents[2]
RILL = pathlib.Path(os.environ.get("RILL_BIN", ROOT / "build" / "release" / "apps" / "rill" / "rill"))
TOKEN = "cluster-failures-token"
PARTITIONS = 12
KEYS = 1000
SESSION_MS = 6000
RECORDS = int(os.environ.get("RILL_TEST_SCALEOUT_RECORDS", "1000000"))
KILLS = int(os.environ.get("RILL_TEST_SCALEOUT_KILLS", "5"))

GLOBAL_VIEW = "SELECT k, count(*) AS n, max(seq) AS top, sum(id) AS ids FROM orders GROUP BY k"

pytestmark = pytest.mark.timeout(900)


class Instance:
    """One `rill serve` process of the application (restartable)."""

    def __init__(self, node, pipeline, workdir):
        self.node, self.pipeline, self.workdir = node, pipeline, workdir
        self.proc = None
        self.address = None
        self.starts = 0

    def start(self):
        self.starts += 1
        out = self.workdir / f"{self.node}.{self.starts}.out"
        err = self.workdir / f"{self.node}.{self.starts}.err"
        self.proc, self.address = start_serve(
            [RILL, "serve", "--metrics", ":memory:", "--listen", "127.0.0.1:0", "--token", TOKEN,
             "--instance-id", self.node, self.pipeline], out, err)

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)
        self.proc = None

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def status(self):
        code, body = http_request(self.address, "/api/v1/telemetry/cluster", TOKEN)
        assert code == 200, body
        return body

    def stop(self):
        if self.alive():
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)


def read_output(bootstrap, topic, expected, timeout):
    """Every committed message of `topic` (read_committed, from the start),
    until `expected` were read and the topic is quiet, or `timeout`."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"verify-{uuid.uuid4().hex[:6]}",
                  "isolation.level": "read_committed", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    values = []
    try:
        parts = c.list_topics(topic, timeout=10).topics[topic].partitions
        c.assign([TopicPartition(topic, p, 0) for p in parts])
        deadline = time.time() + timeout
        quiet_since = None
        while time.time() < deadline:
            batch = c.consume(10000, timeout=1.0)
            got = [m.value() for m in batch if m.error() is None]
            values += got
            if got:
                quiet_since = None
            elif len(values) >= expected:
                quiet_since = quiet_since or time.time()
                if time.time() - quiet_since > 3:  # nothing more after the last record
                    break
    finally:
        c.close()
    return values


@requires(not RILL.exists(), f"{RILL} not built")
def test_sigkilled_instances_lose_nothing_and_write_nothing_twice(kafka_broker, tmp_path):
    rng = random.Random(28)
    source = f"orders-{uuid.uuid4().hex[:8]}"
    output = f"orders-out-{uuid.uuid4().hex[:8]}"
    app = f"eos-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(source, PARTITIONS)
    kafka_broker.create_topic(output, PARTITIONS)
    servers = kafka_broker.bootstrap_servers
    pipeline = tmp_path / "app.yaml"
    pipeline.write_text(application_pipeline(
        app, servers, source, "{id: int64, k: int64, seq: int64, " + METADATA_COLUMNS + "}",
        output=output, session_timeout_ms=SESSION_MS, commit_interval_ms=100,
        transaction_timeout_ms=10000, metadata_columns=True, primary_key="id", tasks=f"""tasks:
  - name: by_key
    type: sql
    scope: global
    interval_seconds: 0.5
    sql: {GLOBAL_VIEW}
"""))
    nodes = [Instance(f"node-{i}", pipeline, tmp_path) for i in (1, 2, 3)]
    try:
        for n in nodes:
            n.start()
        wait_for(lambda: sum(len(n.status()["partitions"]) for n in nodes) == PARTITIONS,
                 timeout=90, what="the first assignment")

        # The input: a sequence per key; the key decides the partition.
        produced = {"n": 0}
        where = []  # (partition, offset) of each id
        errors = []

        def produce():
            try:
                chunk = 50000
                seqs = [0] * KEYS
                for first in range(0, RECORDS, chunk):
                    values, keys = [], []
                    for i in range(first, min(RECORDS, first + chunk)):
                        k = i % KEYS
                        values.append(f'{{"id":{i},"k":{k},"seq":{seqs[k]}}}')
                        keys.append(str(k).encode())
                        seqs[k] += 1
                    placed = kafka_broker.produce(source, values, keys=keys, timeout=120)
                    where.extend(placed)
                    produced["n"] += len(values)
                    time.sleep(0.2)  # spread the input over the kills
            except Exception as e:  # reported by the test thread
                errors.append(e)

        producer = threading.Thread(target=produce, daemon=True)
        producer.start()

        # What each instance says once a second, for a failure's report.
        monitor_log = []
        monitoring = {"on": True}
        last_line = {}

        def monitor():
            while monitoring["on"]:
                for n in list(nodes):
                    try:
                        st = n.status()
                        _, sinks = http_request(n.address, "/api/v1/telemetry/sinks", TOKEN)
                        sink = next(s for s in sinks["sinks"] if s["sink"] == "orders_out")
                        line = (
                            f"{n.node} parts="
                            f"{[p['partition'] for p in st['partitions']]} commits={st['commits']} "
                            f"aborts={st['commit_aborts']} err={st['last_commit_error'][:200]!r} "
                            f"sink_rows={sink['rows_written']} sink_v={sink['committed_version']} "
                            f"lag={sink['lag_versions']} sink_err={sink['last_error'][:200]!r}")
                        if last_line.get(n.node) != line:  # changes only
                            last_line[n.node] = line
                            monitor_log.append(f"{time.time():.1f} {line}")
                    except Exception as e:
                        monitor_log.append(f"{time.time():.1f} {n.node} down ({type(e).__name__})")
                time.sleep(1)

        threading.Thread(target=monitor, daemon=True).start()

        # The kills: at random instances, at random moments while records flow.
        # One victim stays down past the session timeout (its partitions move),
        # the others come back at once (static membership: no rebalance; the
        # restart fences the killed one's transaction).
        kills = []
        long_down = int(os.environ.get("RILL_TEST_SCALEOUT_LONG_DOWN", rng.randrange(KILLS)))
        for i in range(KILLS):
            time.sleep(rng.uniform(1.0, 3.0))
            victim = rng.choice([n for n in nodes if n.alive()])
            victim.kill()
            kills.append((victim.node, produced["n"]))
            if i == long_down:
                time.sleep(SESSION_MS / 1000 + 3)
                others = [n for n in nodes if n.alive()]
                wait_for(lambda: sum(len(n.status()["partitions"]) for n in others) == PARTITIONS,
                         timeout=60, what="the others taking over the killed one's partitions")
            else:
                time.sleep(rng.uniform(0.2, 1.5))
            victim.start()
        producer.join(timeout=600)
        assert not producer.is_alive(), "the producer did not finish"
        assert not errors, errors
        print(f"kills (instance, records produced at the kill): {kills}")

        values = read_output(servers, output, RECORDS, timeout=300)
        if len(values) < RECORDS:  # what each instance says, for the failure's report
            for n in nodes:
                code, sinks = http_request(n.address, "/api/v1/telemetry/sinks", TOKEN)
                print(n.node, json.dumps(n.status()), json.dumps(sinks)[:2000])
            print("source ends", kafka_broker.end_offsets(source))
            print("group committed", kafka_broker.committed(app, source))
            print("output ends", kafka_broker.end_offsets(output))
        rows = [json.loads(v) for v in values]
        got = pa.table({"id": [r["id"] for r in rows], "k": [r["k"] for r in rows],
                        "seq": [r["seq"] for r in rows]})
        con = duckdb.connect()
        con.register("got", got)
        total, distinct, low, high = con.execute(
            "SELECT count(*), count(DISTINCT id), min(id), max(id) FROM got").fetchone()
        duplicates = total - distinct
        lost = RECORDS - distinct
        monitoring["on"] = False
        if lost:
            print("\n".join(monitor_log[-400:]))
        if lost:  # where the lost records were in the input, for the failure's report
            got_ids = set(got.column("id").to_pylist())
            missing = {}
            for i in range(RECORDS):
                if i not in got_ids:
                    missing.setdefault(where[i][0], []).append(where[i][1])
            for partition, offsets in sorted(missing.items()):
                print(f"lost in partition {partition}: {len(offsets)} records, offsets "
                      f"{min(offsets)}..{max(offsets)}")
            sample = [i for i in range(RECORDS) if i not in got_ids][::97][:50]
            for n in nodes:
                code, body = http_request(n.address, "/api/v1/query", TOKEN, json.dumps(
                    {"sql": "SELECT count(*) AS n FROM orders WHERE id IN (" +
                            ",".join(map(str, sample)) + ")"}).encode())
                print(f"{n.node} holds {body['rows']} of {len(sample)} lost ids sampled")
        print(f"{RECORDS} records, {len(kills)} SIGKILLs: output {total} messages, "
              f"{lost} lost, {duplicates} duplicates")
        assert duplicates == 0, f"{duplicates} records were written twice"
        assert (lost, low, high) == (0, 0, RECORDS - 1), f"{lost} records were lost"
        # Every key's sequence arrived whole (the reference: what was produced).
        per_key = con.execute("SELECT k, count(*), min(seq), max(seq) FROM got GROUP BY k "
                              "ORDER BY k").fetchall()
        want = [(k, RECORDS // KEYS + (1 if k < RECORDS % KEYS else 0)) for k in range(KEYS)]
        assert [(k, n) for k, n, _, _ in per_key] == want
        assert all(lo == 0 and hi == n - 1 for _, n, lo, hi in per_key)

        # The instances committed in transactions and none is fenced for good.
        statuses = [n.status() for n in nodes]
        assert all(s["exactly_once"] and not s["fenced"] for s in statuses), statuses
        assert sum(len(s["partitions"]) for s in statuses) == PARTITIONS
        assert sum(s["partitions_from_changelog"] for s in statuses) > 0, statuses

        # Each instance's shards hold exactly the records of its partitions, and
        # the global view every record: DuckDB over what was produced.
        con.register("produced", pa.table({
            "id": list(range(RECORDS)), "k": [i % KEYS for i in range(RECORDS)],
            "seq": [i // KEYS for i in range(RECORDS)],
            "_partition": pa.array([where[i][0] for i in range(RECORDS)], pa.int32())}))
        shard_sql = ("SELECT _partition, count(*) AS n, sum(id) AS ids, max(seq) AS top "
                     "FROM {} GROUP BY _partition ORDER BY _partition")
        reference = {r[0]: tuple(r[1:]) for r in con.execute(shard_sql.format("produced")).fetchall()}

        def shards_ok(n):
            owned = {p["partition"] for p in n.status()["partitions"]}
            code, body = http_request(n.address, "/api/v1/query", TOKEN,
                                      json.dumps({"sql": shard_sql.format("orders")}).encode())
            # (sum(BIGINT) is a HUGEINT, which the JSON answer writes as a string)
            held = {r["_partition"]: (r["n"], int(r["ids"]), r["top"]) for r in body["rows"]}
            mismatch[n.node] = {p: (held.get(p), reference.get(p)) for p in owned | set(held)
                                if held.get(p) != reference.get(p) or p not in owned}
            return not mismatch[n.node]
        mismatch = {}
        for n in nodes:
            try:
                wait_for(lambda: shards_ok(n), timeout=120, what=f"{n.node}'s shards")
            except AssertionError:
                print("statuses", [json.dumps(m.status()) for m in nodes])
                raise AssertionError(f"{n.node}'s shards (held, want) by partition: {mismatch[n.node]}")
        want = con.execute(GLOBAL_VIEW.replace("orders", "produced") + " ORDER BY k").fetchall()

        def view_ok(n):
            code, body = http_request(n.address, "/api/v1/query", TOKEN, json.dumps(
                {"sql": "SELECT k, n, top, ids FROM by_key ORDER BY k"}).encode())
            return code == 200 and [(r["k"], r["n"], r["top"], int(r["ids"])) for r in body["rows"]] == want
        for n in nodes:
            wait_for(lambda: view_ok(n), timeout=120, what=f"the global view on {n.node}")
    finally:
        for n in nodes:
            n.stop()


@requires(not RILL.exists(), f"{RILL} not built")
def test_a_stopped_instance_is_fenced_when_it_wakes_and_nothing_is_written_twice(
        kafka_broker, tmp_path):
    """A zombie: SIGSTOP an instance past its session timeout (its partitions
    move to the other one) and past its transaction timeout (the broker aborts
    its open transaction), then SIGCONT. Its late commit fails (fenced by the
    group's generation or by the producer epoch); it discards that cut's
    outputs, rewinds to the committed offsets and rejoins. The read_committed
    output holds every record once. (Commits every 3 s, so that the stopped
    instance holds applied rows it has not committed.)"""
    partitions, records = 6, 300000
    source = f"zin-{uuid.uuid4().hex[:8]}"
    output = f"zout-{uuid.uuid4().hex[:8]}"
    app = f"zombie-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(source, partitions)
    kafka_broker.create_topic(output, partitions)
    servers = kafka_broker.bootstrap_servers
    pipeline = tmp_path / "app.yaml"
    pipeline.write_text(application_pipeline(
        app, servers, source, "{id: int64}", output=output, session_timeout_ms=SESSION_MS,
        commit_interval_ms=3000, transaction_timeout_ms=10000))
    nodes = [Instance(f"node-{i}", pipeline, tmp_path) for i in (1, 2)]
    try:
        for n in nodes:
            n.start()
        wait_for(lambda: [len(n.status()["partitions"]) for n in nodes] == [3, 3],
                 timeout=90, what="the first assignment")
        errors = []

        def produce():
            try:
                for first in range(0, records, 20000):
                    ids = range(first, min(records, first + 20000))
                    kafka_broker.produce(source, [f'{{"id":{i}}}' for i in ids],
                                         keys=[str(i).encode() for i in ids], timeout=120)
                    time.sleep(0.5)
            except Exception as e:
                errors.append(e)

        producer = threading.Thread(target=produce, daemon=True)
        producer.start()
        time.sleep(2)
        zombie, other = nodes
        zombie.proc.send_signal(signal.SIGSTOP)
        stopped_at = time.time()
        wait_for(lambda: len(other.status()["partitions"]) == partitions, timeout=60,
                 what="the other instance taking over the stopped one's partitions")
        # Past the transaction timeout too: the broker aborts its open transaction.
        time.sleep(max(0.0, stopped_at + 10 + 4 - time.time()))
        zombie.proc.send_signal(signal.SIGCONT)
        wait_for(lambda: [len(n.status()["partitions"]) for n in nodes] == [3, 3],
                 timeout=90, what="the woken instance rejoining")
        producer.join(timeout=300)
        assert not producer.is_alive() and not errors, errors

        values = read_output(servers, output, records, timeout=180)
        got = pa.table({"id": [json.loads(v)["id"] for v in values]})
        con = duckdb.connect()
        con.register("got", got)
        total, distinct, low, high = con.execute(
            "SELECT count(*), count(DISTINCT id), min(id), max(id) FROM got").fetchone()
        status = zombie.status()
        print(f"zombie: {records} records, output {total} messages, {records - distinct} lost, "
              f"{total - distinct} duplicates; the woken instance: "
              f"last_commit_error={status['last_commit_error']!r}, "
              f"rewinds={status['rewinds']}, producer_restarts={status['producer_restarts']}")
        assert total - distinct == 0, f"{total - distinct} records were written twice"
        assert (distinct, low, high) == (records, 0, records - 1)
        # Its late commit failed, and it recovered from it.
        assert status["last_commit_error"], status
        assert status["rewinds"] >= 1, status
        assert not status["fenced"], status
    finally:
        for n in nodes:
            if n.proc is not None and n.proc.poll() is None:
                n.proc.send_signal(signal.SIGCONT)
            n.stop()
