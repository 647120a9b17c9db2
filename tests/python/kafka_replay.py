"""Replay from Kafka offsets stored in checkpoints, across SIGKILLs (issue 14).

A child process runs an engine with checkpoints every 0.05 s and two
KafkaConnectors over one multi-partition topic: `ev` (append table: every
record once) and `kv` (keyed by k: the last value per key). The parent
produces keyed records (a key always lands in the same partition, so "last
per key" is the produce order) while killing the child with SIGKILL at random
moments; each new child restores the newest checkpoint (tables and partition
offsets) and reads on from the stored offsets. The parent then compares the
final checkpoint with what it produced.

The connectors start from the group's committed offsets (the default): with a
checkpoint directory they are committed only once a checkpoint holding them is
complete, so they can lag the checkpoint but never pass it; the checkpoint's
offsets must win where they differ. Used by tests/python/test_kafka_broker_replay.py.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from typing import Any, Dict, List

SCHEMA_FIELDS = [("k", "int64"), ("v", "int64"), ("p", "int64")]


def child(ckpt_dir: str, bootstrap: str, topic: str, group: str, control_dir: str) -> None:
    from checkpoint_crash import replay_engine
    from rills import KafkaConnector

    engine = replay_engine(ckpt_dir, SCHEMA_FIELDS)
    for table in ("kv", "ev"):
        config = {"bootstrap.servers": bootstrap, "group.id": f"{group}-{table}",
                  # Static membership: a restarted child takes over its partitions
                  # at once instead of waiting for the killed member's session to end.
                  "group.instance.id": f"{group}-{table}-member",
                  "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
                  "fetch.wait.max.ms": 50}
        engine.add_connector(KafkaConnector(table, topic, config, on_overflow="error",
                                            name=f"{table}_kafka"))
    engine.start()  # restores the newest checkpoint (tables and Kafka offsets) first
    print("started", flush=True)
    done = os.path.join(control_dir, "done")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if os.path.exists(done):
            with open(done) as f:
                total = int(f.read())
            if engine.get_table("ev").num_rows >= total:
                break
        time.sleep(0.02)
    engine.stop()  # the final checkpoint
    print(json.dumps({"ev": engine.get_table("ev").num_rows,
                      "kv": engine.get_table("kv").num_rows}), flush=True)


def run(broker, ckpt_dir: str, control_dir: str, topic: str, group: str, batches: int,
        rows: int, kills: int, seed: int) -> Dict[str, Any]:
    """Produce `batches` batches of `rows` records, SIGKILLing the child `kills`
    times; return the final child's report, the records produced (in order)
    and the number of kills."""
    rng = random.Random(seed)
    kill_after = set(rng.sample(range(1, batches), kills))
    produced: List[Dict[str, int]] = []
    logs = []

    def spawn() -> subprocess.Popen:
        proc = subprocess.Popen(
            [sys.executable, __file__, ckpt_dir, broker.bootstrap_servers, topic, group, control_dir],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if proc.stdout.readline().strip() != "started":
            proc.kill()
            raise AssertionError(f"the replay child failed: {proc.stderr.read()[-4000:]}")
        return proc

    proc = spawn()
    try:
        for b in range(batches):
            batch = [{"k": rng.randrange(rows * 2), "v": b * 10_000 + j, "p": b} for j in range(rows)]
            broker.produce(topic, [json.dumps(r) for r in batch], keys=[str(r["k"]) for r in batch])
            produced.extend(batch)
            time.sleep(rng.uniform(0.0, 0.1))
            if b in kill_after:
                time.sleep(rng.uniform(0.0, 0.3))
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                logs.append(proc.stderr.read()[-2000:])
                proc = spawn()
        with open(os.path.join(control_dir, "done.tmp"), "w") as f:
            f.write(str(len(produced)))
        os.rename(os.path.join(control_dir, "done.tmp"), os.path.join(control_dir, "done"))
        out, err = proc.communicate(timeout=150)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if proc.returncode != 0:
        raise AssertionError(f"the replay child failed ({proc.returncode}): {err[-4000:]}")
    return {"report": json.loads(out.strip().splitlines()[-1]), "produced": produced,
            "kills": len(kill_after)}


if __name__ == "__main__":
    child(*sys.argv[1:6])
