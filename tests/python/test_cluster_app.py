"""Rill instances as one application (issue 28): RillEngine(app_id=, instance_id=),
the pipeline file's `cluster:` section and `rill serve --instance-id` make every
Kafka source of an instance read as one member of the consumer group `app_id`
(range assignor: partition p of every input topic on the same instance).
Against librdkafka's mock cluster (in this process; `rill serve` processes
reach it over TCP): the partitions are split between the instances,
co-partitioned, every produced record is applied by exactly one instance, and
GET /api/v1/telemetry/cluster and /metrics say which partitions each owns.
"""
import json
import os
import pathlib
import time
import urllib.request

import duckdb
import pyarrow as pa
import pytest

import rills
from conftest import requires
from serve_process import http_request, start_serve

ROOT = pathlib.Path(__file__).resolve().parents[2]
RILL = pathlib.Path(os.environ.get("RILL_BIN", ROOT / "build" / "release" / "apps" / "rill" / "rill"))
PARTITIONS = 4
TOKEN = "cluster-token"


def wait_for(done, timeout=60, what="condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if done():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def produce(cluster, topic, ids):
    for i in ids:
        cluster.produce(topic, f'{{"id": {i}}}', partition=i % PARTITIONS)


@pytest.fixture
def kafka():
    cluster = rills.KafkaMockCluster()
    for topic in ("orders", "payments"):
        cluster.create_topic(topic, PARTITIONS)
    return cluster


def instance(kafka, app_id, instance_id):
    engine = rills.RillEngine(metrics_path=None, trigger_interval_ms=20, app_id=app_id,
                              instance_id=instance_id, session_timeout_ms=6000)
    for topic in ("orders", "payments"):
        engine.register_table(topic, pa.schema([("id", pa.int64())]), mode="append",
                              retention_policy=rills.RetentionPolicy(max_rows=10**6))
        engine.add_connector(rills.KafkaConnector(
            topic, topic, {"bootstrap.servers": kafka.bootstrap_servers,
                           "group.id": "ignored-in-an-application"}, name=topic))
    engine.start()
    return engine


def owned(status):
    by_topic = {}
    for topic, p in status["partitions"]:
        by_topic.setdefault(topic, set()).add(p)
    return by_topic


def test_two_engines_of_one_application_split_the_partitions_co_partitioned(kafka):
    a = instance(kafka, "orders-app", "node-1")
    b = instance(kafka, "orders-app", "node-2")
    try:
        wait_for(lambda: len(a.cluster_status()["partitions"]) == PARTITIONS
                 and len(b.cluster_status()["partitions"]) == PARTITIONS, what="the assignment")
        sa, sb = a.cluster_status(), b.cluster_status()
        assert (sa["app_id"], sa["instance_id"]) == ("orders-app", "node-1")
        assert (sb["app_id"], sb["instance_id"]) == ("orders-app", "node-2")
        oa, ob = owned(sa), owned(sb)
        # Partition p of both topics on one instance; the instances own disjoint halves.
        assert oa["orders"] == oa["payments"] and ob["orders"] == ob["payments"]
        assert oa["orders"].isdisjoint(ob["orders"])
        assert oa["orders"] | ob["orders"] == set(range(PARTITIONS))
        produce(kafka, "orders", range(0, 400))
        produce(kafka, "payments", range(1000, 1400))

        def ids(engine, table):
            return engine.query_sql(f"SELECT id FROM {table}").column("id").to_pylist()

        wait_for(lambda: len(ids(a, "orders")) + len(ids(b, "orders")) == 400
                 and len(ids(a, "payments")) + len(ids(b, "payments")) == 400, what="the rows")
        for engine, mine in ((a, oa["orders"]), (b, ob["orders"])):
            for table in ("orders", "payments"):
                got = ids(engine, table)
                assert {i % PARTITIONS for i in got} <= mine, (table, mine)
        # Every produced id exactly once over the two instances (DuckDB as the oracle).
        con = duckdb.connect()
        con.register("got", pa.table({"id": ids(a, "orders") + ids(b, "orders")
                                      + ids(a, "payments") + ids(b, "payments")}))
        expected = list(range(0, 400)) + list(range(1000, 1400))
        con.register("want", pa.table({"id": expected}))
        assert con.execute("SELECT count(*) FROM got").fetchone()[0] == 800
        assert con.execute("SELECT count(*) FROM (SELECT id FROM want EXCEPT SELECT id FROM got)"
                           ).fetchone()[0] == 0
        assert con.execute("SELECT count(DISTINCT id) FROM got").fetchone()[0] == 800
    finally:
        # Closed, not only stopped: the mock cluster goes with the test, and a
        # live consumer would retry its brokers for the rest of the session.
        for engine in (a, b):
            engine.stop()
            engine.close()


def test_application_options_are_checked():
    with pytest.raises(ValueError, match="app_id"):
        rills.RillEngine(metrics_path=None, app_id="orders app", instance_id="n1")
    with pytest.raises(ValueError, match="instance_id"):
        rills.RillEngine(metrics_path=None, app_id="orders-app", instance_id="")
    with pytest.raises(ValueError, match="commit_interval_ms"):
        rills.RillEngine(metrics_path=None, app_id="orders-app", instance_id="n1",
                         commit_interval_ms=0)
    with pytest.raises(ValueError, match="app_id"):
        rills.RillEngine(metrics_path=None, instance_id="n1")
    assert rills.RillEngine(metrics_path=None).cluster_status() is None
    engine = rills.RillEngine(metrics_path=None, app_id="orders-app")
    try:
        assert engine.instance_id  # the host's name: stable across restarts
        assert engine.cluster_status()["partitions"] == []
    finally:
        engine.close()


@requires(not RILL.exists(), f"{RILL} not built")
def test_rill_serve_instances_of_a_pipeline_split_the_partitions(kafka, tmp_path):
    pipeline = tmp_path / "app.yaml"
    pipeline.write_text(f"""
cluster:
  app_id: serve-app
  bootstrap_servers: "{kafka.bootstrap_servers}"
  session_timeout_ms: 6000
tables:
  - name: orders
    columns: {{id: int64}}
    mode: append
    retention: {{max_rows: 1000000}}
connectors:
  - type: kafka
    name: orders_in
    table: orders
    topics: [orders]
    kafka_config: {{"bootstrap.servers": "{kafka.bootstrap_servers}"}}
""")
    procs = []
    try:
        for node in ("node-1", "node-2"):
            out, err = tmp_path / f"{node}.out", tmp_path / f"{node}.err"
            proc, address = start_serve(
                [RILL, "serve", "--metrics", ":memory:", "--listen", "127.0.0.1:0", "--token",
                 TOKEN, "--instance-id", node, pipeline], out, err)
            procs.append((proc, address, out))
            assert f"instance '{node}' of application 'serve-app'" in out.read_text()

        def status(address):
            code, body = http_request(address, "/api/v1/telemetry/cluster", TOKEN)
            assert code == 200, body
            return body

        wait_for(lambda: all(len(status(a)["partitions"]) == PARTITIONS // 2
                             for _, a, _ in procs), what="the assignment")
        parts = [{p["partition"] for p in status(a)["partitions"]} for _, a, _ in procs]
        assert parts[0].isdisjoint(parts[1]) and parts[0] | parts[1] == set(range(PARTITIONS))
        assert [status(a)["instance_id"] for _, a, _ in procs] == ["node-1", "node-2"]
        produce(kafka, "orders", range(300))

        def count(address):
            code, body = http_request(address, "/api/v1/query", TOKEN,
                                      json.dumps({"sql": "SELECT count(*) AS n FROM orders"})
                                      .encode())
            assert code == 200, body
            row = body["rows"][0]
            return row["n"] if isinstance(row, dict) else row[0]

        wait_for(lambda: sum(count(a) for _, a, _ in procs) == 300, what="the rows")
        req = urllib.request.Request(f"http://{procs[0][1]}/metrics",
                                     headers={"Authorization": f"Bearer {TOKEN}"})
        with urllib.request.urlopen(req, timeout=10) as r:
            metrics = r.read().decode()
        assert ('rill_cluster_partitions_owned{app_id="serve-app",instance_id="node-1"} 2'
                in metrics)
        assert 'rill_cluster_fenced{app_id="serve-app",instance_id="node-1"} 0' in metrics
        assert "rill_cluster_commits_total{" in metrics
    finally:
        for proc, _, _ in procs:
            proc.terminate()
        for proc, _, _ in procs:
            proc.wait(timeout=30)


@requires(not RILL.exists(), f"{RILL} not built")
def test_rill_serve_refuses_bad_cluster_settings_naming_them(tmp_path):
    import subprocess

    def serve(*args, text=None):
        cmd = [str(RILL), "serve", "--metrics", ":memory:", "--listen", "127.0.0.1:0",
               "--token", TOKEN, "--duration", "1", *args]
        if text is not None:
            path = tmp_path / "bad.yaml"
            path.write_text(text)
            cmd.append(str(path))
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60)

    bad_id = serve(text="cluster: {app_id: 'orders app', instance_id: n1}\n")
    assert bad_id.returncode != 0 and "app_id" in bad_id.stderr and "cluster" in bad_id.stderr
    unknown = serve(text="cluster: {app_id: a, instance: n1}\n")
    assert unknown.returncode != 0 and "unknown key" in unknown.stderr, unknown.stderr
    no_app = serve("--instance-id", "n1")
    assert no_app.returncode != 0 and "--instance-id" in no_app.stderr, no_app.stderr
    bad_interval = serve("--instance-id", "n1",
                         text="cluster: {app_id: a, commit_interval_ms: 0}\n")
    assert bad_interval.returncode != 0 and "commit_interval_ms" in bad_interval.stderr
