"""A real Apache Kafka broker for integration tests: Kafka 4.4.0 in KRaft mode,
one combined broker + controller on 127.0.0.1, run with the machine's JDK 17
from the jars that scripts/fetch-kafka puts into build/kafka/libs.

    broker = KafkaBroker(workdir)
    broker.start()              # format a fresh log dir, start, wait until it answers
    broker.bootstrap_servers    # "127.0.0.1:PORT"
    broker.restart()            # stop the process, start it again (same ports and log dir)
    broker.stop()

Producing and topic creation use confluent-kafka (PyPI; its wheel bundles its
own librdkafka, so the test data does not pass through the librdkafka build
the connector under test links).

The broker's output goes to workdir/broker.log (log_tail() for failure
reports). The process runs in its own process group, killed as a whole on
stop. Start-up retries with fresh ports when a port was taken meanwhile and
gives up after `start_timeout` seconds with the log's tail in the error.
"""

from __future__ import annotations

import ctypes
import glob
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_LIBS = ROOT / "build" / "kafka" / "libs"
MIN_JAVA = 17


try:  # resolved here: the child of fork() only calls it
    _prctl = ctypes.CDLL(None, use_errno=True).prctl
except (OSError, AttributeError):
    _prctl = None


def _die_with_parent() -> None:
    """In the broker's process: SIGKILL when the test process dies (PR_SET_PDEATHSIG),
    so a killed pytest never leaves a JVM behind."""
    if _prctl is not None:
        _prctl(1, signal.SIGKILL)


class BrokerUnavailable(RuntimeError):
    """Java, the jars or confluent-kafka are missing: the broker cannot run here."""


class _PortClash(RuntimeError):
    pass


def find_java() -> Optional[str]:
    """The java binary (JAVA_HOME first, then PATH) if it is version 17 or newer."""
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not java or not os.access(java, os.X_OK):
        return None
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r'version "(\d+)', out.stderr + out.stdout)
    return java if m and int(m.group(1)) >= MIN_JAVA else None


def libs_dir() -> Path:
    return Path(os.environ.get("RILL_KAFKA_LIBS", str(DEFAULT_LIBS)))


def missing_requirements() -> Optional[str]:
    """Why the broker cannot run here (None when it can)."""
    if find_java() is None:
        return f"no Java {MIN_JAVA}+ (set JAVA_HOME or put java on PATH; Debian: openjdk-17-jdk-headless)"
    libs = libs_dir()
    if not glob.glob(str(libs / "kafka_2.13-*.jar")):
        return f"the Kafka jars are missing in {libs} (run scripts/fetch-kafka)"
    try:
        import confluent_kafka  # noqa: F401
    except ImportError:
        return "confluent-kafka is not installed (pip install -r requirements-dev.txt)"
    return None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.apache.name = org.apache
logger.apache.level = WARN
logger.raft.name = org.apache.kafka.raft
logger.raft.level = WARN
"""


class KafkaBroker:
    """One Kafka 4.4 KRaft node (broker + controller) on 127.0.0.1."""

    def __init__(self, workdir: os.PathLike, start_timeout: float = 60.0, heap: str = "512m",
                 attempts: int = 3):
        reason = missing_requirements()
        if reason:
            raise BrokerUnavailable(reason)
        self.java = find_java()
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.data_dir = self.workdir / "data"
        self.log_path = self.workdir / "broker.log"      # log4j (the broker's log)
        self.out_path = self.workdir / "broker.out"      # stdout / stderr of the JVM
        self.props_path = self.workdir / "server.properties"
        self.start_timeout = start_timeout
        self.heap = heap
        self.attempts = attempts
        self.port = 0
        self.controller_port = 0
        self.proc: Optional[subprocess.Popen] = None
        self.starts = 0

    # -- process ---------------------------------------------------------------------

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _classpath(self) -> str:
        return str(libs_dir() / "*")

    def _java(self, main: str, *args: str, timeout: float = 30.0) -> str:
        cmd = [self.java, "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
               f"-Dlog4j2.configurationFile={self.workdir / 'log4j2.properties'}",
               "-cp", self._classpath(), main, *args]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        if out.returncode != 0:
            raise RuntimeError(f"{main} {' '.join(args)} failed ({out.returncode}):\n"
                               f"{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
        return out.stdout

    def _write_config(self) -> None:
        (self.workdir / "log4j2.properties").write_text(LOG4J2.format(log=self.log_path))
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "controller.quorum.voters": f"1@127.0.0.1:{self.controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.data_dir),
            "num.partitions": "1",
            "auto.create.topics.enable": "false",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "4",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "group.min.session.timeout.ms": "1000",
            # A killed producer's open transaction is aborted soon after its
            # transaction.timeout.ms (read_committed readers wait for it).
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
            "num.network.threads": "2",
            "num.io.threads": "2",
            "log.flush.interval.messages": "1",  # what was acknowledged survives a kill
        }
        self.props_path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))

    def _format(self) -> None:
        shutil.rmtree(self.data_dir, ignore_errors=True)
        out = self._java("kafka.tools.StorageTool", "random-uuid")
        cluster_id = out.strip().splitlines()[-1].strip()
        self._java("kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(self.props_path))

    def _launch(self) -> None:
        self.starts += 1
        with open(self.out_path, "ab") as out:
            out.write(f"\n==== start {self.starts} on port {self.port} ====\n".encode())
            out.flush()
            self.proc = subprocess.Popen(
                [self.java, "-Xms128m", f"-Xmx{self.heap}", "-XX:+UseSerialGC",
                 "-Djava.awt.headless=true",
                 f"-Dlog4j2.configurationFile={self.workdir / 'log4j2.properties'}",
                 f"-Dkafka.logs.dir={self.workdir}",
                 "-cp", self._classpath(), "kafka.Kafka", str(self.props_path)],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True, preexec_fn=_die_with_parent)

    def _wait_ready(self, deadline: float) -> None:
        from confluent_kafka.admin import AdminClient

        admin = None
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                text = self.log_tail()
                if "Address already in use" in text or "BindException" in text:
                    raise _PortClash(text)
                raise RuntimeError(f"the Kafka broker exited ({self.proc.returncode}):\n{text}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    pass
            except OSError:
                time.sleep(0.2)
                continue
            if admin is None:
                admin = AdminClient({"bootstrap.servers": self.bootstrap_servers, "log_level": 0})
            try:
                md = admin.list_topics(timeout=2)
                if md.brokers:
                    return
            except Exception:  # KafkaException while the broker is still coming up
                pass
            time.sleep(0.2)
        raise RuntimeError(f"the Kafka broker did not answer within {self.start_timeout:.0f} s:\n"
                           f"{self.log_tail()}")

    def start(self) -> "KafkaBroker":
        """Format a fresh log dir and start on free ports (new ports on a clash)."""
        deadline = time.monotonic() + self.start_timeout
        last: Optional[Exception] = None
        for _ in range(self.attempts):
            self.port, self.controller_port = free_port(), free_port()
            if self.port == self.controller_port:
                continue
            self._write_config()
            self._format()
            self._launch()
            try:
                self._wait_ready(deadline)
                return self
            except _PortClash as e:
                last = e
                self._kill()
        raise RuntimeError(f"the Kafka broker could not bind its ports: {last}")

    def restart(self, down_seconds: float = 0.0) -> None:
        """Stop the broker (SIGTERM, then SIGKILL), wait `down_seconds`, and start it
        again on the same ports and log dir."""
        self.stop()
        time.sleep(down_seconds)
        deadline = time.monotonic() + self.start_timeout
        while True:  # the old listener's port may take a moment to be free
            self._launch()
            try:
                self._wait_ready(deadline)
                return
            except _PortClash:
                self._kill()
                if time.monotonic() > deadline:
                    raise
                time.sleep(1.0)

    def stop(self, timeout: float = 30.0) -> None:
        """Stop gracefully (SIGTERM to the process group), SIGKILL after `timeout` s."""
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self._kill()
        except ProcessLookupError:
            pass

    def _kill(self) -> None:
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()

    def log_tail(self, chars: int = 6000) -> str:
        parts = []
        for path in (self.out_path, self.log_path):
            try:
                text = path.read_text(errors="replace")
            except OSError:
                continue
            parts.append(f"--- {path} ---\n{text[-chars:]}")
        return "\n".join(parts)

    # -- clients (confluent-kafka) ------------------------------------------------------

    def create_topic(self, topic: str, partitions: int, timeout: float = 30.0, config=None) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers})
        futures = admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1,
                                                config=config or {})],
                                      operation_timeout=timeout, request_timeout=timeout)
        futures[topic].result(timeout=timeout)
        deadline = time.monotonic() + timeout  # wait until the metadata shows every leader
        while time.monotonic() < deadline:
            md = admin.list_topics(topic, timeout=5).topics.get(topic)
            if md and md.error is None and len(md.partitions) == partitions and all(
                    p.leader >= 0 for p in md.partitions.values()):
                return
            time.sleep(0.1)
        raise RuntimeError(f"topic {topic} has no leaders after {timeout} s")

    def produce(self, topic: str, values: Sequence[bytes | str],
                keys: Optional[Sequence[Optional[bytes | str]]] = None,
                partition: Optional[int] = None, timeout: float = 30.0) -> List[Tuple[int, int]]:
        """Produce `values` (with `keys`) and wait for every delivery; return the
        (partition, offset) of each message, in order. Idempotent producer, so a
        retry never writes a message twice."""
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": self.bootstrap_servers, "enable.idempotence": True,
                             "linger.ms": 5, "message.timeout.ms": int(timeout * 1000)})
        placed: List[Optional[Tuple[int, int]]] = [None] * len(values)
        errors: List[str] = []

        def on_delivery(i):
            def cb(err, msg):
                if err is not None:
                    errors.append(str(err))
                else:
                    placed[i] = (msg.partition(), msg.offset())
            return cb

        for i, v in enumerate(values):
            kwargs: Dict = {"value": v, "on_delivery": on_delivery(i)}
            if keys is not None and keys[i] is not None:
                kwargs["key"] = keys[i]
            if partition is not None:
                kwargs["partition"] = partition
            while True:
                try:
                    producer.produce(topic, **kwargs)
                    break
                except BufferError:  # local queue full: serve callbacks, retry
                    producer.poll(0.1)
        left = producer.flush(timeout)
        if left or errors or any(p is None for p in placed):
            raise RuntimeError(f"produce to {topic}: {left} undelivered, errors {errors[:3]}")
        return placed  # type: ignore[return-value]

    def end_offsets(self, topic: str, timeout: float = 10.0) -> Dict[int, int]:
        """{partition: high watermark} of `topic`."""
        from confluent_kafka import Consumer, TopicPartition

        c = Consumer({"bootstrap.servers": self.bootstrap_servers, "group.id": "rill-test-watermarks"})
        try:
            md = c.list_topics(topic, timeout=timeout).topics[topic]
            return {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)[1]
                    for p in md.partitions}
        finally:
            c.close()

    def committed(self, group: str, topic: str, timeout: float = 10.0) -> Dict[int, int]:
        """{partition: committed offset} of consumer group `group` (-1001: none)."""
        from confluent_kafka import Consumer, TopicPartition

        c = Consumer({"bootstrap.servers": self.bootstrap_servers, "group.id": group})
        try:
            md = c.list_topics(topic, timeout=timeout).topics[topic]
            parts = c.committed([TopicPartition(topic, p) for p in md.partitions], timeout=timeout)
            return {tp.partition: tp.offset for tp in parts}
        finally:
            c.close()
