"""Checkpoints store Kafka offsets: after SIGKILLs and restarts, replay from the
stored offsets of a real broker's topic gives each record exactly once in an
append table and the last value per key in a keyed table (issue 14).

The harness is tests/python/kafka_replay.py; the broker is the session fixture
`kafka_broker` (skipped without Java or the jars, failed under CI=true).
"""

from __future__ import annotations

import json
import os
import uuid

import duckdb
import pyarrow as pa
import pytest

import kafka_replay
from rills import Checkpointer, RillEngine


@pytest.mark.timeout(300)
def test_kafka_replay_from_checkpoint_offsets_after_sigkill(kafka_broker, tmp_path):
    topic, group = f"replay-{uuid.uuid4().hex[:8]}", f"g-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(topic, 3)
    ckpt, control = tmp_path / "ck", tmp_path / "control"
    control.mkdir()
    run = kafka_replay.run(kafka_broker, str(ckpt), str(control), topic, group,
                           batches=30, rows=40, kills=3, seed=20261201)
    produced = run["produced"]
    assert run["report"]["ev"] == len(produced)

    # The newest checkpoint names the end of every partition for both connectors.
    ends = kafka_broker.end_offsets(topic)
    with open(os.path.join(ckpt, "current", "manifest.json")) as f:
        manifest = json.load(f)
    positions = {c["name"]: json.loads(c["position"]) if isinstance(c["position"], str) else c["position"]
                 for c in manifest["connectors"]}
    for name in ("ev_kafka", "kv_kafka"):
        stored = {(p["topic"], p["partition"]): p["offset"] for p in positions[name]["partitions"]}
        assert stored == {(topic, p): o for p, o in ends.items() if o > 0}, name

    fresh = RillEngine(metrics_path=None)
    try:
        Checkpointer(str(ckpt)).restore_snapshots(fresh)
        ev = fresh.get_table("ev").to_arrow().select(["k", "v", "p"])
        kv = fresh.get_table("kv").to_arrow().select(["k", "v", "p"])
    finally:
        fresh.close()
    want = pa.Table.from_pylist(produced, schema=ev.schema)
    con = duckdb.connect()
    con.register("ev", ev)
    con.register("want", want)
    # Append table: every produced record exactly once (none lost, none twice).
    missing = con.execute("SELECT * FROM want EXCEPT ALL SELECT * FROM ev").fetchall()
    extra = con.execute("SELECT * FROM ev EXCEPT ALL SELECT * FROM want").fetchall()
    assert not missing and not extra, (len(missing), missing[:5], len(extra), extra[:5])
    # Keyed table: the last produced value per key (a key stays in one partition,
    # so its records are read in produce order).
    last = {}
    for r in produced:
        last[r["k"]] = (r["v"], r["p"])
    got = {k: (v, p) for k, v, p in zip(*(kv.column(c).to_pylist() for c in ("k", "v", "p")))}
    wrong = {k: (got.get(k), want_v) for k, want_v in last.items() if got.get(k) != want_v}
    assert not wrong and len(got) == len(last), f"{len(wrong)} keys differ, e.g. {list(wrong.items())[:3]}"
