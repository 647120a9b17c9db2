"""Window state moves with its partitions (issue 28): a window task over a
partition shard of a scaled-out application keeps its open windows per input
partition and mirrors them in the state table `<task>__state`, which the
instance writes to the compacted changelog `<app>-<task>__state-changelog` in
its transactions. On the real broker, with 2 `rill serve` instances and a
tumbling window of 100 s of event time:

- a window closed on an instance before its partitions move is not emitted
  again by their new owner;
- a window open when node-2 is SIGKILLed and restarted (its partitions come
  back to it, its windows empty) is emitted with every record of the window,
  those before the kill included;
- a window open when node-2 leaves (node-1 takes its partitions over) is
  emitted by node-1 with every record of node-2's partitions too;
- each (window, key) is emitted once over both instances, and its count and
  sum equal DuckDB over every record produced;
- a window declared over SQL after the partitions' first assignment (its
  changelog is made by the commit loop, not at an assignment) moves with its
  partitions too.
"""
import json
import os
import pathlib
import time
import uuid

import duckdb
import pyarrow as pa
import pytest

from conftest import requires
from serve_process import METADATA_COLUMNS, Instances, application_pipeline, stop_all, wait_for

ROOT = pathlib.Path(__file__).resolve().parents[2]
RILL = pathlib.Path(os.environ.get("RILL_BIN", ROOT / "build" / "release" / "apps" / "rill" / "rill"))
TOKEN = "window-state-token"
PARTITIONS = 4
KEYS = 24

pytestmark = [requires(not RILL.exists(), f"{RILL} not built"), pytest.mark.timeout(300)]

WINDOWS = """windows:
  - name: per_key
    source: orders
    time_column: ts
    window: tumbling
    size_seconds: 100
    group_by: k
    aggregations: 'n=count(*), total=sum(v)'
"""


def test_open_windows_move_with_their_partitions(kafka_broker, tmp_path):
    source = f"wevents-{uuid.uuid4().hex[:8]}"
    app = f"wst-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(source, PARTITIONS)
    servers = kafka_broker.bootstrap_servers
    pipeline = tmp_path / "app.yaml"
    pipeline.write_text(application_pipeline(
        app, servers, source, "{k: int64, ts: float64, v: float64, " + METADATA_COLUMNS + "}",
        commit_interval_ms=100, metadata_columns=True, tasks=WINDOWS))
    procs = Instances(RILL, pipeline, TOKEN, tmp_path, admin_token="window-state-admin")
    produced = []  # (k, ts, v, partition)
    emitted = {}   # (node, its start) -> rows of per_key seen (kept across restarts)
    starts = {}

    def start(node):
        starts[node] = starts.get(node, 0) + 1
        procs.start(node)

    query, owned = procs.query, procs.owned

    def produce(times, seed):
        rows = [(k, t, float((k * 13 + seed + i) % 17)) for i, t in enumerate(times) for k in range(KEYS)]
        where = kafka_broker.produce(source, [json.dumps({"k": k, "ts": t, "v": v}) for k, t, v in rows],
                                     keys=[str(k).encode() for k, _, _ in rows])
        produced.extend((k, t, v, part) for (k, t, v), (part, _) in zip(rows, where))

    def applied(node):
        """The node's table holds every record of the partitions it owns."""
        mine = owned(node)
        want = sum(1 for r in produced if r[3] in mine)
        return bool(mine) and query(node, "SELECT count(*) AS n FROM orders")[0]["n"] == want

    def collect(node, window="per_key"):
        try:
            rows = query(node, f"SELECT window_start, k, _partition, n, total FROM {window}")
        except Exception:
            return
        seen = emitted.setdefault((window, node, starts[node]), {})
        for r in rows:
            seen[(r["window_start"], r["k"], r["_partition"])] = (r["n"], r["total"])

    def reference(window_start):
        con = duckdb.connect()
        con.register("rows", pa.table({"k": [r[0] for r in produced], "ts": [r[1] for r in produced],
                                       "v": [r[2] for r in produced]}))
        return {k: (n, total) for k, n, total in con.execute(
            "SELECT k, count(*), sum(v) FROM rows WHERE ts >= ? AND ts < ? GROUP BY k",
            [window_start, window_start + 100]).fetchall()}

    def emitted_once(window_start, window="per_key"):
        """Every key's window emitted exactly once over both instances, as the reference."""
        for node in list(procs):
            collect(node, window)
        got = {}
        for (name, _, _), seen in emitted.items():
            if name != window:
                continue
            for (start, k, _), value in seen.items():
                if start == window_start:
                    got.setdefault(k, []).append(value)
        want = reference(window_start)
        if set(got) != set(want):
            return False
        for k, values in got.items():
            assert len(values) == 1, f"window {window_start} of key {k} emitted {len(values)} times"
            n, total = values[0]
            assert n == want[k][0] and abs(total - want[k][1]) < 1e-6, (window_start, k, values, want[k])
        return True

    def step(t, seed):
        """Records at event time `t` for every key, applied where they belong
        before the next step (so no record is behind its instance's watermark)."""
        produce([t], seed)
        wait_for(lambda: all(applied(node) for node in procs), 60, f"the records at {t} applied")

    try:
        start("node-1")
        start("node-2")
        wait_for(lambda: len(owned("node-1")) == 2 and len(owned("node-2")) == 2, 90,
                 "the assignment over two instances")
        # Window [0, 100), closed on both instances by the records at 100.
        for i, t in enumerate([10.0, 20.0, 55.5, 100.0]):
            step(t, i)
        wait_for(lambda: emitted_once(0.0), 60, "window 0 emitted by both instances")

        # Window [100, 200) is open when node-2 is killed and restarted: its
        # partitions come back to it with empty windows, restored from the
        # changelog (the input is replayed into its table, not its windows).
        step(110.0, 4)
        step(120.5, 5)
        time.sleep(1)  # committed: the state changelog has them
        mine = owned("node-2")
        procs["node-2"][0].kill()
        procs["node-2"][0].wait(timeout=30)
        start("node-2")
        wait_for(lambda: owned("node-2") == mine, 60, "node-2's partitions back")
        step(130.0, 6)
        step(199.0, 7)
        step(200.0, 8)  # closes [100, 200)
        wait_for(lambda: emitted_once(100.0), 60, "window 100 after node-2's restart")
        # Window 0 is not emitted again by the restarted node-2.
        assert emitted_once(0.0)

        # A second window, declared over SQL on both instances now: its state
        # changelog is made by the commit loop. It reads the rows the tables
        # hold, so it emits windows 0 and 100 of each instance's partitions.
        for node in ("node-1", "node-2"):
            procs.ddl(node, "CREATE WINDOW late_key WITH (source = 'orders', time_column = 'ts', "
                            "window = 'tumbling', size_seconds = 100, group_by = 'k', "
                            "aggregations = 'n=count(*),total=sum(v)')")
        wait_for(lambda: emitted_once(100.0, "late_key"), 60, "the SQL window's window 100")
        time.sleep(1)

        # Window [200, 300) is open when node-2 leaves: node-1 takes over its
        # partitions and their open windows.
        step(210.0, 9)
        step(260.0, 10)
        time.sleep(1)
        collect("node-2")
        collect("node-2", "late_key")
        procs["node-2"][0].terminate()
        procs["node-2"][0].wait(timeout=60)
        del procs["node-2"]
        wait_for(lambda: len(owned("node-1")) == PARTITIONS, 90, "node-1 owning every partition")
        step(280.0, 11)
        step(300.0, 12)  # closes [200, 300)
        wait_for(lambda: emitted_once(200.0), 60, "window 200 after node-2 left")
        wait_for(lambda: emitted_once(200.0, "late_key"), 60, "the SQL window's window 200")
        assert emitted_once(0.0, "late_key") and emitted_once(100.0, "late_key")
        # Neither earlier window is emitted again by the new owner.
        assert emitted_once(0.0) and emitted_once(100.0)
        # The state keeps only what the open windows need: the rows at 300 and
        # the markers of the four partitions.
        state = query("node-1", "SELECT count(*) AS n, count(*) FILTER (WHERE _offset = -1) AS markers "
                                "FROM per_key__state")[0]
        assert state["markers"] == PARTITIONS and state["n"] == PARTITIONS + KEYS, state
    finally:
        stop_all(procs)
