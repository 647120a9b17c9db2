"""Kafka -> table -> KafkaSink(exactly_once=True) SIGKILL trials (issue 24).

  kafka_sink_exactly_once  A child engine (checkpoint directory, checkpoints
                           every 0.1 s) reads a real broker's input topic with a
                           KafkaConnector (start="committed", static membership)
                           into an append table `ev`, and a KafkaSink
                           (mode="append", exactly_once=True, a fixed
                           transactional.id) writes `ev` to an output topic. The
                           parent produces keys 0, 1, 2, ... continuously
                           (tests/python/kafka_kill.py's Producer) and SIGKILLs
                           the child at random moments (a quarter of them during
                           its start-up), then starts a new one, which restores
                           the newest checkpoint. After the last trial a final
                           child catches up and stops cleanly. Checked with a
                           read_committed consumer of the output topic: every
                           produced key appears exactly once (lost = duplicates
                           = unexpected = 0). Trials: --kafka-trials, at most
                           500 (the driver's default 1000 gives 500, --quick 50).

tests/python/test_kafka_sink.py runs 20 trials (run_trials below). Run directly:
    .venv/bin/python bench/faults/kafka_sink.py --trials 20
The children run this checkout's python/ (rills) and build/release.
"""

from __future__ import annotations

import json
import os
import pathlib
import random
import signal
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional

ROOT = pathlib.Path(__file__).resolve().parents[2]
PYTHON = ROOT / ".venv" / "bin" / "python"
TESTS = ROOT / "tests" / "python"
sys.path.insert(0, str(TESTS))
from zygote import Zygote  # noqa: E402

TICK_MS = 50
PARTITIONS = 3
RATE = 300  # input records per second while the trials run


# The child (forked by the zygote) -----------------------------------------------------


def child(workdir: str, bootstrap: str, in_topic: str, out_topic: str, tag: str, n: int) -> None:
    import pyarrow as pa

    from rills import KafkaConnector, RetentionPolicy, RillEngine
    from rills.sinks import KafkaSink

    work = pathlib.Path(workdir)
    engine = RillEngine(trigger_interval_ms=TICK_MS, metrics_path=None,
                        checkpoint_dir=str(work / "ckpt"), checkpoint_interval_seconds=0.1)
    engine.register_table("ev", schema=pa.schema([("k", pa.int64())]), mode="append",
                          retention_policy=RetentionPolicy(max_rows=10**8))
    group = f"g-{tag}"
    engine.add_connector(KafkaConnector(
        "ev", in_topic, {"bootstrap.servers": bootstrap, "group.id": group,
                         "group.instance.id": f"{group}-member", "session.timeout.ms": 6000,
                         "heartbeat.interval.ms": 500, "fetch.wait.max.ms": 20},
        start="committed", name="ev_kafka"))
    sink = KafkaSink("ev_out", "ev", out_topic,
                     {"bootstrap.servers": bootstrap, "transactional.id": f"t-{tag}",
                      "transaction.timeout.ms": 10000, "linger.ms": 5},
                     mode="append", exactly_once=True, interval_seconds=0.05)
    engine.add_sink(sink)
    from kafka_kill import start_and_drain_sink

    start_and_drain_sink(engine, sink, work, n, retry_on=(TimeoutError,))


def zygote(workdir: str, bootstrap: str, in_topic: str, out_topic: str, tag: str) -> None:
    """Import once, then fork one child per line ("n") of stdin and answer its
    pid (as tests/python/kafka_kill.py does)."""
    import pyarrow  # noqa: F401
    import rills  # noqa: F401
    import rills.sinks  # noqa: F401

    from kafka_kill import serve_forks

    def prepare(line: str):
        n = int(line)
        return workdir, n, lambda: child(workdir, bootstrap, in_topic, out_topic, tag, n)

    serve_forks(prepare)


# The parent ------------------------------------------------------------------------


def read_output(bootstrap: str, topic: str, want: int, timeout: float) -> List[int]:
    """The `k` of every row in `topic` a read_committed consumer sees; reads
    until it has `want` rows and every partition's end, or `timeout` passed."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{topic}",
                         "enable.auto.commit": False, "enable.partition.eof": True,
                         "isolation.level": "read_committed", "log_level": 0})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    keys: List[int] = []
    eof = set()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and (len(keys) < want or len(eof) < PARTITIONS):
            m = consumer.poll(0.2)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    eof.add(m.partition())
                continue
            eof.discard(m.partition())
            keys.append(int(json.loads(m.value())["k"]))
    finally:
        consumer.close()
    return keys


def run_trials(broker, workdir: os.PathLike, trials: int, seed: int = 0,
               python: Optional[str] = None) -> Dict[str, Any]:
    """Run `trials` SIGKILL trials against `broker` (kafka_broker.KafkaBroker);
    return {"trials", "records", "lost", "duplicates", "unexpected", ...}."""
    from kafka_kill import Producer

    rng = random.Random(seed)
    work = pathlib.Path(workdir)
    work.mkdir(parents=True, exist_ok=True)
    tag = f"sink-{seed}-{os.getpid()}-{int(time.time() * 1000) % 10**8}"
    in_topic, out_topic = f"in-{tag}", f"out-{tag}"
    broker.create_topic(in_topic, PARTITIONS)
    broker.create_topic(out_topic, PARTITIONS)
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "python"), str(TESTS),
                                                      env.get("PYTHONPATH", "")]))
    started_at = time.monotonic()
    zyg = subprocess.Popen([python or sys.executable, __file__, "zygote", str(work),
                            broker.bootstrap_servers, in_topic, out_topic, tag],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True)
    if zyg.stdout.readline().strip() != "ready":
        raise AssertionError("the zygote did not start")

    ctl = Zygote(zyg, work)
    alive, spawn, wait_for, kill = ctl.alive, ctl.spawn, ctl.wait_for, ctl.kill
    child_failed = ctl.child_failed

    producer = Producer(broker.bootstrap_servers, in_topic, RATE).start()
    during_startup = 0
    pid = None
    try:
        for n in range(trials):
            pid = spawn(n)
            if rng.random() < 0.25:
                during_startup += 1
                time.sleep(rng.uniform(0.0, 0.3))
            else:
                if not wait_for(work / f"started-{n:05d}", pid, 60):
                    raise child_failed(n, "did not start")
                time.sleep(rng.uniform(0.0, 1.2))
            if not alive(pid):
                raise child_failed(n, "exited by itself")
            kill(pid)
        total = producer.stop()
        (work / "total").write_text(str(total))
        pid = spawn(trials)
        if not wait_for(work / f"stopped-{trials:05d}", pid, 180):
            raise child_failed(trials, "did not stop cleanly")
        while alive(pid):
            time.sleep(0.01)
    finally:
        if pid is not None:
            kill(pid)
        zyg.stdin.close()
        zyg.wait(timeout=30)
        if not producer._stop.is_set():
            producer._stop.set()
    keys = read_output(broker.bootstrap_servers, out_topic, total, timeout=60)
    wanted, have = set(range(total)), set(keys)
    return {"trials": trials, "records": total, "kills_during_startup": during_startup,
            "output_rows": len(keys), "lost": len(wanted - have),
            "duplicates": len(keys) - len(have), "unexpected": len(have - wanted),
            "missing_sample": sorted(wanted - have)[:10],
            "seconds": round(time.monotonic() - started_at, 1)}


# bench/fault_trials ----------------------------------------------------------------

_broker = None


def _shared_broker():
    global _broker
    if _broker is None:
        import atexit
        import shutil
        import tempfile

        import kafka_broker

        home = tempfile.mkdtemp(prefix="rill-fault-kafka-sink-broker-")
        broker = kafka_broker.KafkaBroker(pathlib.Path(home))

        def stop():
            broker.stop(timeout=10)
            shutil.rmtree(home, ignore_errors=True)

        atexit.register(stop)
        broker.start()
        _broker = broker
    return _broker


def exactly_once(trials: int, workdir: pathlib.Path, args) -> dict:
    import kafka_broker

    reason = kafka_broker.missing_requirements()
    if reason:
        return {"trials": 0, "lost": None, "duplicates": None, "error": f"no broker: {reason}"}
    trials = min(getattr(args, "kafka_trials", 500), 500)
    result = run_trials(_shared_broker(), workdir, trials, seed=24, python=str(PYTHON))
    if result["duplicates"] or result["unexpected"]:
        result["error"] = "records duplicated (or unknown) downstream of an exactly-once sink"
    return result


KINDS = {"kafka_sink_exactly_once": exactly_once}


def main() -> None:
    import argparse
    import tempfile

    import kafka_broker

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--seed", type=int, default=24)
    args = parser.parse_args()
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "python"),
                                                             os.environ.get("PYTHONPATH")]))
    with tempfile.TemporaryDirectory(prefix="rill-kafka-sink-kill-") as tmp:
        broker = kafka_broker.KafkaBroker(pathlib.Path(tmp) / "broker").start()
        try:
            print(json.dumps(run_trials(broker, pathlib.Path(tmp) / "work", args.trials,
                                        args.seed)))
        finally:
            broker.stop(timeout=10)


if __name__ == "__main__":
    if len(sys.argv) == 7 and sys.argv[1] == "zygote":
        zygote(*sys.argv[2:7])
    else:
        main()
