"""Append-table partition shards (issue 28): an append table of a scaled-out
application fed with the input's metadata columns holds exactly the records
of the partitions its instance owns, like a keyed table. On the real broker,
with 2 `rill serve` instances:

- node-1 alone reads every partition; when node-2 joins, node-1 drops the
  records of the partitions it handed over and node-2 restores them by
  replaying the input: each holds its partitions' records exactly once;
- after a SIGKILL and a restart of node-2, it restores its partitions again
  (its table started empty) and `rill query --app` answers over the append
  table (before, it refused: the restarted instance did not hold them whole);
- after node-2's graceful leave, node-1 holds every record exactly once;
- a global view over the append table equals DuckDB over every record
  produced after each step (its partials are its partitions' owner's alone).
"""
import collections
import json
import os
import pathlib
import subprocess
import uuid

import duckdb
import pyarrow as pa
import pytest

from conftest import requires
from serve_process import METADATA_COLUMNS, Instances, application_pipeline, stop_all, wait_for

ROOT = pathlib.Path(__file__).resolve().parents[2]
RILL = pathlib.Path(os.environ.get("RILL_BIN", ROOT / "build" / "release" / "apps" / "rill" / "rill"))
TOKEN = "append-shards-token"
PARTITIONS = 6

pytestmark = [requires(not RILL.exists(), f"{RILL} not built"), pytest.mark.timeout(300)]

VIEW = "SELECT region, count(*) AS n, sum(price) AS revenue FROM orders GROUP BY region"


TASKS = f"""tasks:
  - name: by_region
    type: sql
    scope: global
    interval_seconds: 0.2
    sql: {VIEW}
"""


def test_append_shards_move_with_their_partitions(kafka_broker, tmp_path):
    source = f"events-{uuid.uuid4().hex[:8]}"
    app = f"ash-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(source, PARTITIONS)
    servers = kafka_broker.bootstrap_servers
    pipeline = tmp_path / "app.yaml"
    pipeline.write_text(application_pipeline(
        app, servers, source, "{seq: int64, region: string, price: float64, " + METADATA_COLUMNS + "}",
        commit_interval_ms=100, metadata_columns=True, tasks=TASKS))
    procs = Instances(RILL, pipeline, TOKEN, tmp_path)
    start, query, status, owned = procs.start, procs.query, procs.status, procs.owned
    produced = []  # (seq, region, price, partition, offset)

    def produce(first, count):
        rows = [(i, ["eu", "us", "apac"][i % 3], float((i * 7) % 101)) for i in range(first, first + count)]
        where = kafka_broker.produce(source, [json.dumps({"seq": s, "region": r, "price": p})
                                              for s, r, p in rows],
                                     keys=[str(s).encode() for s, _, _ in rows])
        produced.extend((s, r, p, part, off) for (s, r, p), (part, off) in zip(rows, where))

    def held(node):
        """The node's table as a multiset of (partition, offset, seq)."""
        return collections.Counter(
            (r["_partition"], r["_offset"], r["seq"])
            for r in query(node, "SELECT _partition, _offset, seq FROM orders"))

    def expected(partitions):
        return collections.Counter((part, off, s) for s, _, _, part, off in produced
                                   if part in partitions)

    def holds_its_partitions(node, what, partitions=None):
        wait_for(lambda: held(node) == expected(owned(node) if partitions is None else partitions),
                 60, what)

    def view_ok(node):
        con = duckdb.connect()
        con.register("orders", pa.table({"region": [r[1] for r in produced],
                                          "price": [r[2] for r in produced]}))
        want = con.execute(VIEW + " ORDER BY region").fetchall()
        got = [(r["region"], r["n"], r["revenue"]) for r in
               query(node, "SELECT region, n, revenue FROM by_region ORDER BY region")]
        return len(got) == len(want) and all(
            g[0] == w[0] and g[1] == w[1] and abs(g[2] - w[2]) < 1e-6 for g, w in zip(got, want))

    try:
        start("node-1")
        wait_for(lambda: len(owned("node-1")) == PARTITIONS, 90, "node-1 owning every partition")
        produce(0, 3000)
        holds_its_partitions("node-1", "node-1 holding every record")

        # node-2 joins: node-1 drops what it hands over, node-2 replays it.
        start("node-2")
        wait_for(lambda: len(owned("node-1")) == 3 and len(owned("node-2")) == 3, 90,
                 "the assignment over two instances")
        for node in ("node-1", "node-2"):
            holds_its_partitions(node, f"{node}'s shards after the join")
        assert status("node-2")["partitions_restored"] == 3, status("node-2")
        assert status("node-1")["partitions_dropped"] == 3, status("node-1")
        wait_for(lambda: view_ok("node-1") and view_ok("node-2"), 60, "the global view")

        # SIGKILL node-2 and restart it (static membership: its partitions come
        # back to it, with an empty table): it replays them.
        mine = owned("node-2")
        procs["node-2"][0].kill()
        procs["node-2"][0].wait(timeout=30)
        start("node-2")
        wait_for(lambda: owned("node-2") == mine, 60, "node-2's partitions back")
        holds_its_partitions("node-2", "node-2's restored shards", mine)
        produce(3000, 2000)
        for node in ("node-1", "node-2"):
            holds_its_partitions(node, f"{node} after more input")
        wait_for(lambda: view_ok("node-1") and view_ok("node-2"), 60,
                 "the global view after the restart")
        # rill query --app answers over the append table: node-2 holds its
        # restored partitions whole.
        out = subprocess.run([str(RILL), "query", "--app", app, "--bootstrap-servers", servers,
                              "--token", TOKEN, "--format", "json", VIEW],
                             capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        got = {r["region"]: (r["n"], r["revenue"]) for r in json.loads(out.stdout)["rows"]}
        want = {}
        for _, region, price, _, _ in produced:
            n, revenue = want.get(region, (0, 0.0))
            want[region] = (n + 1, revenue + price)
        assert got.keys() == want.keys(), (got, want)
        for region, (n, revenue) in want.items():
            assert got[region][0] == n and abs(got[region][1] - revenue) < 1e-6, (got, want)

        # node-2 leaves: node-1 replays node-2's partitions and holds every record once.
        procs["node-2"][0].terminate()
        procs["node-2"][0].wait(timeout=60)
        wait_for(lambda: len(owned("node-1")) == PARTITIONS, 60, "node-1 owning every partition")
        holds_its_partitions("node-1", "node-1 holding every record after the leave")
        produce(5000, 1000)
        holds_its_partitions("node-1", "node-1 after more input")
        wait_for(lambda: view_ok("node-1"), 60, "the global view after the leave")
    finally:
        stop_all(procs)
