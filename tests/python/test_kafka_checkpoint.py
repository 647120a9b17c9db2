"""KafkaConnector positions in checkpoints, through librdkafka's mock cluster
(in every test run; the real-broker replay across SIGKILLs is
test_kafka_broker_replay.py)."""

from __future__ import annotations

import gc
import json
import time

import pyarrow as pa

from rills import Checkpointer, KafkaConnector, KafkaMockCluster, RetentionPolicy, RillEngine
from waiting import wait_rows


def ids(engine, table="t"):
    return sorted(engine.get_table(table).to_arrow().column("id").to_pylist())


def engine_with_connector(cluster, group):
    engine = RillEngine(trigger_interval_ms=20, metrics_path=None)
    engine.register_table("t", schema=pa.schema([("id", pa.int64())]), mode="append",
                          retention_policy=RetentionPolicy(max_rows=10**6))
    conn = KafkaConnector("t", "topic", {"bootstrap.servers": cluster.bootstrap_servers,
                                         "group.id": group, "session.timeout.ms": 3000,
                                         "heartbeat.interval.ms": 500}, name="src")
    engine.add_connector(conn)
    return engine, conn


def test_partition_missing_from_checkpoint_replays_from_earliest_not_the_committed_offset(tmp_path):
    # The checkpoint is taken while only partition 0 has data; partition 1's
    # rows arrive after it and their offsets are committed to the group. After
    # a crash, the restored tables lack those rows, so partition 1 must be read
    # again from its start, not from the group's committed offset (the default
    # start "committed" would lose them).
    cluster = KafkaMockCluster()
    cluster.create_topic("topic", 2)
    for i in range(5):
        cluster.produce("topic", json.dumps({"id": i}), partition=0)

    def first_life():  # its engine and connector are freed on return (the consumer leaves the group)
        first, conn = engine_with_connector(cluster, "g-missing")
        first.start()
        try:
            wait_rows(first, "t", 5, timeout=30.0)
            Checkpointer(tmp_path).save_snapshots(first)
            for i in range(5, 8):
                cluster.produce("topic", json.dumps({"id": i}), partition=1)
            wait_rows(first, "t", 8, timeout=30.0)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and conn.positions().get(("topic", 1)) != 3:
                time.sleep(0.02)
        finally:
            first.close()  # no final checkpoint (a hand-made Checkpointer): like a crash after it

    first_life()
    gc.collect()
    second, _ = engine_with_connector(cluster, "g-missing")
    try:
        assert Checkpointer(tmp_path).restore_snapshots(second) == ["t"]
        assert ids(second) == list(range(5))
        second.start()
        wait_rows(second, "t", 8, timeout=30.0)
        time.sleep(0.5)  # a duplicate would show up now
        assert ids(second) == list(range(8))
    finally:
        second.close()


def test_restore_while_running_seeks_assigned_partitions(tmp_path):
    # A connector that already reads (assigned, fetching, rows buffered or
    # written) goes back to the checkpoint's offsets when restored.
    cluster = KafkaMockCluster()
    cluster.create_topic("topic", 2)
    for i in range(6):
        cluster.produce("topic", json.dumps({"id": i}), partition=i % 2)
    engine, conn = engine_with_connector(cluster, "g-seek")
    engine.start()
    try:
        wait_rows(engine, "t", 6, timeout=30.0)
        Checkpointer(tmp_path).save_snapshots(engine)
        for i in range(6, 10):
            cluster.produce("topic", json.dumps({"id": i}), partition=i % 2)
        wait_rows(engine, "t", 10, timeout=30.0)
        engine.stop()
        Checkpointer(tmp_path).restore_snapshots(engine)  # the connector is still assigned
        assert ids(engine) == list(range(6))
        engine.start()
        wait_rows(engine, "t", 10, timeout=30.0)
        time.sleep(0.5)
        assert ids(engine) == list(range(10))
        assert conn.positions() == {("topic", 0): 5, ("topic", 1): 5}
    finally:
        engine.close()
