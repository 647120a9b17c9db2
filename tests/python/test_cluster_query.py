"""`rill query --app` (issue 28): an aggregate over a scaled-out application's
table, answered by fan-out to its `rill serve` instances on the real broker.
The members announce their servers on "<app>-members"; the answer merges the
partials of every partition exactly once and equals DuckDB over everything
produced. After an instance restarts, its append table's partition shards
are restored by replaying the input, and the query answers the same again.
(A partition not held whole is refused, naming it: test_cluster_append_shards
and test_cluster_shards.)
"""
import os
import pathlib
import subprocess
import uuid

import duckdb
import pyarrow as pa
import pytest

from conftest import requires
from serve_process import METADATA_COLUMNS, application_pipeline, http_request, start_serve, stop_all, wait_for

ROOT = pathlib.Path(__file__).resolve().parents[2]
RILL = pathlib.Path(os.environ.get("RILL_BIN", ROOT / "build" / "release" / "apps" / "rill" / "rill"))
TOKEN = "cluster-query-token"
PARTITIONS = 6

pytestmark = [requires(not RILL.exists(), f"{RILL} not built"), pytest.mark.timeout(300)]


def check(out, want):
    """`rill query`'s table output equals DuckDB's rows `want`."""
    assert out.returncode == 0, out.stderr
    lines = [l.split("|") for l in out.stdout.splitlines() if l.count("|") >= 5]
    got = sorted((c[0].strip(), int(c[1]), float(c[2]), float(c[3]), float(c[4]), float(c[5]))
                 for c in lines[1:])
    assert len(got) == 3, out.stdout
    for g, w in zip(got, want):
        assert g[0] == w[0] and g[1] == w[1]
        assert g[2:] == pytest.approx(w[2:], rel=1e-9), (g, w)


def test_rill_query_app_fans_out_and_merges_every_partition_once(kafka_broker, tmp_path):
    topic = f"orders-{uuid.uuid4().hex[:8]}"
    app = f"q-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(topic, PARTITIONS)
    servers = kafka_broker.bootstrap_servers
    # The source's metadata_columns give _topic, _partition, _offset, _key, _timestamp.
    pipeline = tmp_path / "app.yaml"
    pipeline.write_text(application_pipeline(
        app, servers, topic,
        "{id: int64, region: string, price: float64, " + METADATA_COLUMNS + "}",
        metadata_columns=True))
    procs = {}

    def start(node):
        procs[node] = start_serve([RILL, "serve", "--metrics", ":memory:", "--listen", "127.0.0.1:0",
                                   "--token", TOKEN, "--instance-id", node, pipeline],
                                  tmp_path / f"{node}.out", tmp_path / f"{node}.err")

    def count(node):
        code, body = http_request(procs[node][1], "/api/v1/query", TOKEN,
                                  b'{"sql": "SELECT count(*) AS n FROM orders"}')
        assert code == 200, body
        return body["rows"][0]["n"]

    sql = ("SELECT region, count(*) AS n, sum(price) AS revenue, avg(price) AS mean, "
           "min(price) AS lo, max(price) AS hi FROM orders GROUP BY region")

    def rill_query():
        return subprocess.run([str(RILL), "query", "--app", app, "--bootstrap-servers", servers,
                               "--token", TOKEN, "--format", "table", sql],
                              capture_output=True, text=True, timeout=120)

    try:
        for node in ("node-1", "node-2"):
            start(node)

        def owned(node):
            code, body = http_request(procs[node][1], "/api/v1/telemetry/cluster", TOKEN)
            return len(body["partitions"]) if code == 200 else 0

        wait_for(lambda: owned("node-1") + owned("node-2") == PARTITIONS, 60, "the assignment")
        regions = ["eu", "us", "apac"]
        rows = [(i, regions[i % 3], float(i % 97) + 0.25) for i in range(20000)]
        kafka_broker.produce(topic, [f'{{"id":{i},"region":"{r}","price":{p}}}' for i, r, p in rows],
                             keys=[str(i).encode() for i, _, _ in rows])
        wait_for(lambda: count("node-1") + count("node-2") == len(rows), 60, "the rows")
        assert count("node-1") > 0 and count("node-2") > 0

        out = rill_query()
        assert out.returncode == 0, out.stderr
        con = duckdb.connect()
        con.register("produced", pa.table({"id": [r[0] for r in rows], "region": [r[1] for r in rows],
                                           "price": [r[2] for r in rows]}))
        want = con.execute(sql.replace("FROM orders", "FROM produced") + " ORDER BY region").fetchall()
        check(out, want)

        # A query that does not decompose is refused, naming the part.
        bad = subprocess.run([str(RILL), "query", "--app", app, "--bootstrap-servers", servers,
                              "--token", TOKEN, "SELECT region, median(price) FROM orders GROUP BY region"],
                             capture_output=True, text=True, timeout=60)
        assert bad.returncode == 1 and "median" in bad.stderr, bad.stderr

        # node-2 restarts (static membership: same partitions, no rebalance) with
        # an empty table, and restores its partitions' records from the input:
        # the same answer again (refused, never wrong, while it restores).
        procs["node-2"][0].kill()
        procs["node-2"][0].wait(timeout=30)
        start("node-2")
        wait_for(lambda: owned("node-2") > 0, 60, "node-2 back")
        wait_for(lambda: rill_query().returncode == 0, 60, "an answer after the restart")
        check(rill_query(), want)
    finally:
        stop_all(procs)
