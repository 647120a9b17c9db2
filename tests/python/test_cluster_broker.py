"""Instances of one application against the real Kafka broker (issue 28):
static membership (a restart within the session timeout causes no rebalance and
gets the same partitions back), a graceful leave hands the partitions over at
once (timed), and through a join, a restart and a leave every produced record
is applied by exactly one instance (DuckDB as the oracle).
The broker is the session fixture `kafka_broker` (conftest.py).
"""
from __future__ import annotations

import os
import pathlib
import subprocess
import time
import uuid

import duckdb
import pyarrow as pa
import pytest

import rills

from conftest import require

pytestmark = pytest.mark.timeout(240)
ROOT = pathlib.Path(__file__).resolve().parents[2]


def find_committer_test() -> pathlib.Path:
    """The C++ committer tests' program: the release build's, else the ASan
    build's (the test command builds the test programs only under the
    sanitizers)."""
    for preset in ("release", "debug"):
        path = ROOT / "build" / preset / "tests" / "cpp" / "instance_committer_test"
        if path.exists():
            return path
    return ROOT / "build" / "release" / "tests" / "cpp" / "instance_committer_test"


COMMITTER_TEST = find_committer_test()
PARTITIONS = 6
SESSION_MS = 10000


def wait_for(done, timeout=60, what="condition"):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if done():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def instance(make_engine, broker, app_id, instance_id, topic, **kwargs):
    engine = make_engine(metrics_path=None, trigger_interval_ms=20, app_id=app_id,
                         instance_id=instance_id, bootstrap_servers=broker.bootstrap_servers,
                         session_timeout_ms=SESSION_MS, **kwargs)
    engine.register_table("events", pa.schema([("id", pa.int64())]), mode="append",
                          retention_policy=rills.RetentionPolicy(max_rows=10**7))
    engine.add_connector(rills.KafkaConnector(
        "events", topic, {"bootstrap.servers": broker.bootstrap_servers,
                          "reconnect.backoff.max.ms": 1000}, name="events_in"))
    engine.start()
    return engine


def partitions(engine):
    return {p for _, p in engine.cluster_status()["partitions"]}


def ids(engine):
    return engine.query_sql("SELECT id FROM events").column("id").to_pylist()


def produce(broker, topic, first, n):
    values = [f'{{"id": {i}}}' for i in range(first, first + n)]
    keys = [str(i).encode() for i in range(first, first + n)]
    broker.produce(topic, values, keys=keys)


def test_static_membership_restart_and_graceful_leave(kafka_broker, make_engine):
    topic = f"cluster-{uuid.uuid4().hex[:8]}"
    app = f"app-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(topic, PARTITIONS)
    applied = []  # ids applied by instances that are gone

    a = instance(make_engine, kafka_broker, app, "node-1", topic)
    b = instance(make_engine, kafka_broker, app, "node-2", topic, leave_on_stop=True)
    wait_for(lambda: len(partitions(a)) == PARTITIONS // 2
             and len(partitions(b)) == PARTITIONS // 2, what="the first assignment")
    assert partitions(a).isdisjoint(partitions(b))
    produce(kafka_broker, topic, 0, 3000)
    wait_for(lambda: len(ids(a)) + len(ids(b)) == 3000, what="the first rows")

    # A restart of node-1 within the session timeout: no rebalance (node-2's
    # assignment count stays), and node-1 gets the same partitions back.
    assigns_b = b.cluster_status()["assigns"]
    before = partitions(a)
    applied += ids(a)
    a.stop()
    a.close()
    produce(kafka_broker, topic, 3000, 3000)  # while node-1 is away
    a = instance(make_engine, kafka_broker, app, "node-1", topic)
    wait_for(lambda: partitions(a) == before, what="node-1's partitions back")
    time.sleep(2)
    assert b.cluster_status()["assigns"] == assigns_b, "a static member's restart rebalanced"
    wait_for(lambda: len(applied) + len(ids(a)) + len(ids(b)) == 6000, what="rows after restart")

    # node-2 leaves gracefully (leave_on_stop): node-1 owns everything at once.
    produce(kafka_broker, topic, 6000, 3000)
    wait_for(lambda: len(applied) + len(ids(a)) + len(ids(b)) == 9000, what="rows before leave")
    applied_b = ids(b)
    t0 = time.monotonic()
    b.stop()
    wait_for(lambda: len(partitions(a)) == PARTITIONS, timeout=SESSION_MS / 1000 * 2,
             what="the hand-over")
    handover = time.monotonic() - t0
    applied += applied_b
    b.close()
    print(f"graceful leave: node-1 owned all {PARTITIONS} partitions {handover:.2f} s after "
          f"node-2's stop()")
    assert handover < SESSION_MS / 1000, "the leave waited for the session timeout"
    produce(kafka_broker, topic, 9000, 3000)
    wait_for(lambda: len(applied) + len(ids(a)) == 12000, what="rows after leave")
    time.sleep(1)

    con = duckdb.connect()
    con.register("got", pa.table({"id": applied + ids(a)}))
    assert con.execute("SELECT count(*), count(DISTINCT id), min(id), max(id) FROM got"
                       ).fetchone() == (12000, 12000, 0, 11999)

    # The offsets went through node-1's transactions (exactly_once, the default):
    # read_committed, the group's committed offsets are the end of every partition.
    status = a.cluster_status()
    assert status["exactly_once"] and status["commits"] > 0 and not status["fenced"], status
    from confluent_kafka import Consumer, TopicPartition
    ends = {}
    probe = Consumer({"bootstrap.servers": kafka_broker.bootstrap_servers, "group.id": app,
                      "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        for p in range(PARTITIONS):
            ends[p] = probe.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]

        def committed():
            got = probe.committed([TopicPartition(topic, p) for p in range(PARTITIONS)],
                                  timeout=10)
            return {tp.partition: tp.offset for tp in got}

        wait_for(lambda: committed() == ends, timeout=20, what="the committed offsets")
    finally:
        probe.close()
    assert sum(ends.values()) == 12000


def test_adding_and_removing_an_instance_costs_at_most_two_generations(kafka_broker, make_engine):
    """The group generation each member reports (cluster_status()["generation"]):
    a third instance joining moves the group on by at most 2 generations, its
    graceful leave by at most 2 more, and a restart within the session timeout
    (static membership) by none; the members agree on the generation."""
    topic = f"gen-{uuid.uuid4().hex[:8]}"
    app = f"app-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(topic, PARTITIONS)

    def generation(engine):
        return engine.cluster_status()["generation"]

    def settled(engines, counts):
        """Every engine owns `counts[i]` partitions and all report one generation."""
        gens = {generation(e) for e in engines}
        return (all(len(partitions(e)) == n for e, n in zip(engines, counts))
                and len(gens) == 1 and gens.pop() > 0)

    a = instance(make_engine, kafka_broker, app, "node-1", topic)
    b = instance(make_engine, kafka_broker, app, "node-2", topic)
    wait_for(lambda: settled([a, b], [3, 3]), what="two instances settled")
    time.sleep(2)  # no rebalance is still on its way
    g0 = generation(a)
    assert generation(b) == g0

    c = instance(make_engine, kafka_broker, app, "node-3", topic, leave_on_stop=True)
    wait_for(lambda: settled([a, b, c], [2, 2, 2]), what="three instances settled")
    time.sleep(2)
    g1 = generation(a)
    assert 1 <= g1 - g0 <= 2, (g0, g1)

    # A restart of node-2 within the session timeout: the generation stays.
    b.stop()
    b.close()
    b = instance(make_engine, kafka_broker, app, "node-2", topic)
    wait_for(lambda: len(partitions(b)) == 2, what="node-2 back")
    time.sleep(2)
    assert generation(a) == g1 and generation(b) == g1

    c.stop()  # leave_on_stop: a graceful leave
    c.close()
    wait_for(lambda: settled([a, b], [3, 3]), what="two instances settled again")
    time.sleep(2)
    g2 = generation(a)
    assert 1 <= g2 - g1 <= 2, (g1, g2)
    print(f"generations: +{g1 - g0} for the join, 0 for the restart, +{g2 - g1} for the leave")


def test_instance_committer_transactions_and_fencing_on_the_real_broker(kafka_broker):
    """InstanceCommitterTest.* of the C++ tests, on this session's broker."""
    if not COMMITTER_TEST.exists():
        require(f"{COMMITTER_TEST} is not built")
    topic = f"committer-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(topic, 2)
    env = dict(os.environ, RILL_TEST_KAFKA_BOOTSTRAP=kafka_broker.bootstrap_servers,
               RILL_TEST_KAFKA_TOPIC=topic, ARROW_DEFAULT_MEMORY_POOL="system",
               LSAN_OPTIONS=f"suppressions={ROOT / 'tests' / 'sanitizers' / 'lsan.supp'}"
                            ":print_suppressions=0")
    out = subprocess.run([str(COMMITTER_TEST), "--gtest_brief=1"], env=env, capture_output=True,
                         text=True, timeout=180)
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-3000:]
    assert "[  PASSED  ] 2 tests" in out.stdout, out.stdout[-3000:]
