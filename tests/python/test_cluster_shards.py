"""Partition shards (issue 28): a keyed table of a scaled-out application fed
with the input's metadata columns holds exactly the rows of the partitions its
instance owns. On the real broker, with 2 `rill serve` instances:

- after a SIGKILL and a restart, the restarted instance restores its
  partitions by replaying them up to the group's committed offsets: its table
  equals DuckDB's latest row per key over those partitions;
- after a graceful leave, the other instance restores the partitions it took
  over and drops nothing it keeps: its table is the whole reference;
- a global view over the keyed table equals the reference after each step,
  and `rill query --app` answers (it refuses a partition not held whole)
  after the restart;
- a changelog Kafka sink of the table (exactly-once) writes each input record
  at most once and ends at the reference: the restores and drops are moves,
  not changes, so they write nothing.

The input topic is not compacted, so the instances write the table's
changelog `<app>-orders-changelog` and restore from it: the input's records
are deleted (delete_records) before the restart, and the restores still
equal the reference.
"""
import json
import os
import pathlib
import subprocess
import urllib.request
import time
import uuid

import duckdb
import pyarrow as pa
import pytest
from confluent_kafka.admin import ConfigResource, ResourceType

from conftest import requires
from serve_process import METADATA_COLUMNS, http_request, start_serve, stop_all, wait_for

ROOT = pathlib.Path(__file__).resolve().parents[2]
RILL = pathlib.Path(os.environ.get("RILL_BIN", ROOT / "build" / "release" / "apps" / "rill" / "rill"))
TOKEN = "shards-token"
PARTITIONS = 6
KEYS = 3000

pytestmark = [requires(not RILL.exists(), f"{RILL} not built"), pytest.mark.timeout(300)]

VIEW = "SELECT region, count(*) AS n, sum(price) AS revenue FROM orders GROUP BY region"


def pipeline_text(app, servers, source, output):
    return f"""cluster:
  app_id: {app}
  bootstrap_servers: "{servers}"
  session_timeout_ms: 6000
  commit_interval_ms: 100
engine:
  trigger_interval_ms: 20
tables:
  - name: orders
    columns: {{id: int64, region: string, price: float64, {METADATA_COLUMNS}}}
    primary_key: id
connectors:
  - type: kafka
    name: orders_in
    table: orders
    topics: [{source}]
    metadata_columns: true
    kafka_config: {{"bootstrap.servers": "{servers}"}}
tasks:
  - name: by_region
    type: sql
    scope: global
    interval_seconds: 0.2
    sql: {VIEW}
sinks:
  - name: orders_out
    type: kafka
    table: orders
    mode: changelog
    topic: {output}
    kafka_config: {{"bootstrap.servers": "{servers}"}}
"""


class ShardsApp:
    """2 `rill serve` instances of one application (pipeline_text) on the real
    broker, the records produced to its input, and what they should hold."""

    def __init__(self, broker, tmp_path, prefix, input_config=None):
        self.broker, self.tmp_path = broker, tmp_path
        self.source = f"orders-{uuid.uuid4().hex[:8]}"
        self.output = f"changes-{uuid.uuid4().hex[:8]}"
        self.app = f"{prefix}-{uuid.uuid4().hex[:8]}"
        broker.create_topic(self.source, PARTITIONS, config=input_config)
        broker.create_topic(self.output, 1)
        self.servers = broker.bootstrap_servers
        self.text = pipeline_text(self.app, self.servers, self.source, self.output)
        self.procs = {}
        self.produced = []  # (id, region, price, partition, offset)

    def start(self, node, *options):
        # Each instance's file sink (not driven by the application) writes to
        # a directory of its own.
        pipeline = self.tmp_path / f"app-{node}.yaml"
        pipeline.write_text(self.text + f"""  - name: orders_files
    type: file
    table: orders
    mode: changelog
    format: ndjson
    interval_seconds: 0.2
    roll_seconds: 1
    path: {self.tmp_path / "files" / node}
""")
        args = [RILL, "serve", "--metrics", ":memory:", "--listen", "127.0.0.1:0", "--token", TOKEN,
                "--instance-id", node, *options, pipeline]
        self.procs[node] = start_serve(args, self.tmp_path / f"{node}.out", self.tmp_path / f"{node}.err")

    def kill(self, node):
        self.procs[node][0].kill()
        self.procs[node][0].wait(timeout=30)

    def leave(self, node):
        self.procs[node][0].terminate()
        self.procs[node][0].wait(timeout=60)

    def query(self, node, sql):
        code, body = http_request(self.procs[node][1], "/api/v1/query", TOKEN,
                                  json.dumps({"sql": sql}).encode())
        assert code == 200, body
        return body["rows"]

    def status(self, node):
        code, body = http_request(self.procs[node][1], "/api/v1/telemetry/cluster", TOKEN)
        return body if code == 200 else {"partitions": []}

    def owned(self, node):
        return {p["partition"] for p in self.status(node)["partitions"]}

    def produce(self, first, count, round_):
        rows = [(i % KEYS, ["eu", "us", "apac"][(i + round_) % 3], float((i * 7 + round_) % 101))
                for i in range(first, first + count)]
        where = self.broker.produce(self.source, [json.dumps({"id": k, "region": r, "price": p})
                                                  for k, r, p in rows],
                                    keys=[str(k).encode() for k, _, _ in rows])
        self.produced.extend((k, r, p, part, off) for (k, r, p), (part, off) in zip(rows, where))

    def ends(self):
        """The next offset of each partition after what was produced."""
        out = {}
        for *_, part, off in self.produced:
            out[part] = max(out.get(part, 0), off + 1)
        return out

    def reference(self, partitions=None):
        """The latest row per key (by partition and offset: one key, one partition)."""
        latest = {}
        for k, r, p, part, off in self.produced:
            if partitions is None or part in partitions:
                latest[k] = (k, r, p)
        return sorted(latest.values())

    def table_rows(self, node):
        return sorted((r["id"], r["region"], r["price"])
                      for r in self.query(node, "SELECT id, region, price FROM orders"))

    def shards_equal(self, node, what, partitions=None):
        wait_for(lambda: self.table_rows(node) == self.reference(
            self.owned(node) if partitions is None else partitions), 60, what)

    def files_written(self):
        """The rows every instance's file sink wrote (whole lines)."""
        rows = []
        for f in sorted((self.tmp_path / "files").rglob("*.ndjson")):
            for line in f.read_text().splitlines():
                try:
                    rows.append(json.loads(line))
                except ValueError:
                    pass  # a line being written
        return rows

    def changes_written(self):
        """What the changelog sink wrote (read_committed), once its last row per
        key equals the reference."""
        from confluent_kafka import Consumer, TopicPartition
        reader = Consumer({"bootstrap.servers": self.servers,
                           "group.id": f"check-{uuid.uuid4().hex[:6]}",
                           "isolation.level": "read_committed", "enable.auto.commit": False,
                           "auto.offset.reset": "earliest"})
        seen = []
        try:
            reader.assign([TopicPartition(self.output, 0, 0)])

            def latest_written():
                while (m := reader.poll(1.0)) is not None:
                    if not m.error():
                        seen.append(json.loads(m.value()))
                latest = {}
                for r in seen:
                    if r["_op"] == "delete":
                        latest.pop(r["id"], None)
                    else:
                        latest[r["id"]] = (r["id"], r["region"], r["price"])
                return sorted(latest.values())
            wait_for(lambda: latest_written() == self.reference(), 60, "the sink's output")
        finally:
            reader.close()
        return seen


def test_keyed_shards_are_restored_on_assign_and_their_moves_write_nothing(kafka_broker, tmp_path):
    t = ShardsApp(kafka_broker, tmp_path, "sh")
    app, servers, source = t.app, t.servers, t.source
    query, status, owned, reference = t.query, t.status, t.owned, t.reference
    produced, procs = t.produced, t.procs

    def view_ok(node):
        con = duckdb.connect()
        rows = reference()
        con.register("orders", pa.table({"id": [r[0] for r in rows], "region": [r[1] for r in rows],
                                         "price": [r[2] for r in rows]}))
        want = con.execute(VIEW + " ORDER BY region").fetchall()
        got = [(r["region"], r["n"], r["revenue"]) for r in
               query(node, "SELECT region, n, revenue FROM by_region ORDER BY region")]
        return len(got) == len(want) and all(
            g[0] == w[0] and g[1] == w[1] and abs(g[2] - w[2]) < 1e-6 for g, w in zip(got, want))

    try:
        t.start("node-1")
        t.start("node-2", "--leave-on-stop")
        wait_for(lambda: len(owned("node-1")) == 3 and len(owned("node-2")) == 3, 90, "the assignment")
        t.produce(0, 6000, 0)
        for node in ("node-1", "node-2"):
            t.shards_equal(node, f"{node}'s shards")
        wait_for(lambda: view_ok("node-1") and view_ok("node-2"), 60, "the global view")

        # SIGKILL node-2 and restart it at once (static membership: its partitions
        # come back to it, with an empty table): it restores them from the
        # changelog, since the input no longer has the records.
        mine = owned("node-2")
        from confluent_kafka import TopicPartition
        from confluent_kafka.admin import AdminClient
        changelog = f"{app}-orders-changelog"
        admin = AdminClient({"bootstrap.servers": servers})
        described = admin.describe_configs([ConfigResource(ResourceType.TOPIC, changelog)])
        config = list(described.values())[0].result(timeout=30)
        assert config["cleanup.policy"].value == "compact"
        assert len(admin.list_topics(changelog, timeout=10).topics[changelog].partitions) == PARTITIONS
        wait_for(lambda: changelog_rows(servers, changelog) == reference(), 60, "the changelog")
        ends = t.ends()
        for f in admin.delete_records([TopicPartition(source, p, ends[p]) for p in range(PARTITIONS)],
                                      operation_timeout=30).values():
            f.result(timeout=30)
        t.kill("node-2")
        t.start("node-2", "--leave-on-stop")
        wait_for(lambda: owned("node-2") == mine, 60, "node-2's partitions back")
        t.shards_equal("node-2", "node-2's restored shards", mine)
        st = status("node-2")
        assert st["partitions_restored"] == len(mine) and st["restored_records"] > 0, st
        assert st["partitions_from_changelog"] == len(mine), st
        req = urllib.request.Request(f"http://{procs['node-2'][1]}/metrics",
                                     headers={"Authorization": f"Bearer {TOKEN}"})
        with urllib.request.urlopen(req, timeout=10) as r:
            metrics = r.read().decode()
        labels = f'{{app_id="{app}",instance_id="node-2"}}'
        assert f"rill_cluster_partitions_restored_total{labels} {len(mine)}" in metrics
        assert f"rill_cluster_restored_records_total{labels} {st['restored_records']}" in metrics
        assert f"rill_cluster_partitions_from_changelog_total{labels} {len(mine)}" in metrics
        t.produce(6000, 3000, 1)
        for node in ("node-1", "node-2"):
            t.shards_equal(node, f"{node} after more input")
        wait_for(lambda: view_ok("node-1") and view_ok("node-2"), 60, "the global view after the restart")
        # rill query --app answers again: node-2 holds its restored partitions whole.
        out = subprocess.run([str(RILL), "query", "--app", app, "--bootstrap-servers", servers,
                              "--token", TOKEN, "--format", "json", VIEW],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        got = {r["region"]: r["n"] for r in json.loads(out.stdout)["rows"]}
        want = {}
        for _, region, _ in reference():
            want[region] = want.get(region, 0) + 1
        assert got == want, (got, want)

        # node-2 leaves: node-1 restores node-2's partitions and holds everything.
        t.leave("node-2")
        wait_for(lambda: len(owned("node-1")) == PARTITIONS, 60, "node-1 owning every partition")
        t.shards_equal("node-1", "node-1 holding every key")
        t.produce(9000, 2000, 2)
        t.shards_equal("node-1", "node-1 after more input")
        wait_for(lambda: view_ok("node-1"), 60, "the global view after the leave")
        assert status("node-1")["partitions_restored"] >= PARTITIONS - len(mine)
        assert status("node-1")["partitions_from_changelog"] >= PARTITIONS - len(mine)
        wait_for(lambda: changelog_rows(servers, changelog) == reference(), 60, "the changelog at the end")

        # The changelog sink: every input record exactly once (restores wrote nothing).
        seen = t.changes_written()
        # One write holds the last row per key: a change per record at most,
        # and a restore (a replay of records already applied) none.
        written = [(r["_partition"], r["_offset"]) for r in seen]
        assert len(written) == len(set(written)), "a restore wrote rows to the sink again"
        assert set(written) <= {(part, off) for _, _, _, part, off in produced}
        assert not [r for r in seen if r["_op"] == "delete"], "a dropped shard wrote deletes"
        # The file sinks are not driven by the application: they skip the moves too.
        time.sleep(2)  # their last files closed (roll_seconds)
        files = t.files_written()
        assert files, "the file sinks wrote nothing"
        in_files = [(r["_partition"], r["_offset"]) for r in files]
        assert len(in_files) == len(set(in_files)), "a restore wrote rows to a file sink again"
        assert not [r for r in files if r["_op"] == "delete"], "a dropped shard wrote deletes to a file"
        print(f"{len(produced)} records, {len(seen)} changes written, "
              f"restored on node-1: {status('node-1')['restored_records']} records")
    finally:
        stop_all(procs)


def changelog_rows(servers, topic):
    """Each key's last row in the changelog topic (read_committed), as (id, region, price)."""
    from confluent_kafka import Consumer, TopicPartition
    reader = Consumer({"bootstrap.servers": servers, "group.id": f"check-{uuid.uuid4().hex[:6]}",
                       "isolation.level": "read_committed", "enable.auto.commit": False,
                       "enable.partition.eof": True})
    try:
        parts = reader.list_topics(topic, timeout=10).topics[topic].partitions
        reader.assign([TopicPartition(topic, p, 0) for p in parts])
        latest, ended = {}, set()
        while len(ended) < len(parts):
            m = reader.poll(5.0)
            if m is None:
                break
            if m.error():
                ended.add(m.partition())
                continue
            key = json.loads(m.key())["id"]
            if m.value() is None:
                latest.pop(key, None)
            else:
                r = json.loads(m.value())
                assert r["_partition"] == m.partition(), "a row in another partition than its input's"
                latest[key] = (r["id"], r["region"], r["price"])
        return sorted(latest.values())
    finally:
        reader.close()


def checkpoint_offsets(directory, connector="orders_in"):
    """The newest complete checkpoint's offsets of `connector`: {partition: offset}."""
    current = pathlib.Path(directory) / "current"
    if not current.exists():
        return {}
    manifest = json.loads((current / "manifest.json").read_text())
    for c in manifest["connectors"]:
        if c["name"] == connector:
            return {p["partition"]: p["offset"] for p in c["position"]["partitions"]}
    return {}


def test_a_current_local_checkpoint_spares_the_replay_of_what_it_holds(kafka_broker, tmp_path):
    """An instance with a checkpoint directory: its group offsets still follow
    the ticks (not the checkpoints), and after a SIGKILL and a restart it takes
    its shards from its own checkpoint and replays only the records committed
    after it; a partition it no longer owns is dropped from the restored table."""
    # Compacted: the shards are restored by replaying the input (no changelog).
    t = ShardsApp(kafka_broker, tmp_path, "ck", input_config={"cleanup.policy": "compact"})

    def start(node):
        t.start(node, "--checkpoint-dir", str(tmp_path / f"ckpt-{node}"), "--checkpoint-interval", "2",
                "--leave-on-stop")

    from confluent_kafka import Consumer, TopicPartition
    group = Consumer({"bootstrap.servers": t.servers, "group.id": t.app, "enable.auto.commit": False})

    def committed():
        return {tp.partition: tp.offset for tp in
                group.committed([TopicPartition(t.source, p) for p in range(PARTITIONS)], timeout=10)}

    try:
        start("node-1")
        start("node-2")
        wait_for(lambda: len(t.owned("node-1")) == 3 and len(t.owned("node-2")) == 3, 90, "the assignment")
        t.produce(0, 6000, 0)
        mine = t.owned("node-2")
        t.shards_equal("node-2", "node-2's shards", mine)
        # A checkpoint of node-2 that holds the first round.
        wait_for(lambda: all(checkpoint_offsets(tmp_path / "ckpt-node-2").get(p) == t.ends()[p] for p in mine),
                 30, "node-2's checkpoint of the first round")
        t.produce(6000, 3000, 1)
        # The group's offsets follow the ticks, not the (2 s) checkpoints.
        t.shards_equal("node-2", "node-2 after the second round", mine)
        wait_for(lambda: all(committed().get(p) == t.ends()[p] for p in mine), 10,
                 "the group's offsets at the end of what node-2 applied")
        t.kill("node-2")
        held = checkpoint_offsets(tmp_path / "ckpt-node-2")
        after = sum(t.ends()[p] - held[p] for p in mine)  # committed after the checkpoint

        start("node-2")
        wait_for(lambda: t.owned("node-2") == mine, 60, "node-2's partitions back")
        t.shards_equal("node-2", "node-2's shards from its checkpoint", mine)
        st = t.status("node-2")
        assert st["partitions_from_changelog"] == 0, st
        assert st["partitions_from_checkpoint"] == len(mine), st
        assert st["partitions_restored"] == len(mine), st
        # Only what came after the checkpoint was read again.
        assert st["restored_records"] == after, (st, held, t.ends())
        assert after < sum(1 for *_, part, _ in t.produced if part in mine)

        # node-2 leaves: node-1 (its own checkpoint holds only its partitions)
        # restores the rest by replay and holds every key.
        t.leave("node-2")
        wait_for(lambda: len(t.owned("node-1")) == PARTITIONS, 60, "node-1 owning every partition")
        t.shards_equal("node-1", "node-1 holding every key")

        # node-1 restarts alone from its checkpoint, which lacks node-2's old
        # partitions' late rows: the checkpoint's shards catch up by replay.
        t.produce(9000, 1500, 2)
        t.shards_equal("node-1", "node-1 after more input")
        t.kill("node-1")
        start("node-1")
        wait_for(lambda: len(t.owned("node-1")) == PARTITIONS, 60, "node-1 back with every partition")
        t.shards_equal("node-1", "node-1 restored from its checkpoint")
        assert t.status("node-1")["partitions_restored"] == PARTITIONS

        # The changelog sink wrote every change once: nothing restored wrote again.
        written = [(r["_partition"], r["_offset"]) for r in t.changes_written()]
        assert len(written) == len(set(written)), "a restore wrote rows to the sink again"
    finally:
        group.close()
        stop_all(t.procs)
