"""nexmark_bench --kafka against a real Kafka 4.4 broker (KRaft, 127.0.0.1), the
fixture of the Python tests (tests/python/kafka_broker.py; jars from
scripts/fetch-kafka, or RILL_KAFKA_LIBS). Starts a fresh broker, creates
nexmark-person/auction/bid with --partitions partitions, runs nexmark_bench
with --kafka 127.0.0.1:PORT --kafka-only and the remaining arguments, stops.

    .venv/bin/python bench/nexmark/kafka_broker_run.py --partitions 4 -- --events 100k

The real broker keeps every message (no retention limit within the run), so
`retained_events` equals `events`: the check that a shortfall on the
librdkafka mock cluster is the mock's 5 MiB-per-partition log, not the
connector (kafka_run.h).
"""

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "python"))

from kafka_broker import KafkaBroker  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--bench", default=str(ROOT / "build" / "release" / "bench" / "nexmark_bench"))
    ap.add_argument("rest", nargs="*", help="arguments for nexmark_bench (after --)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="nexmark-kafka-") as work:
        broker = KafkaBroker(work).start()
        try:
            for kind in ("person", "auction", "bid"):
                broker.create_topic(f"nexmark-{kind}", args.partitions)
            cmd = [args.bench, "--kafka", broker.bootstrap_servers, "--kafka-only",
                   "--kafka-partitions", str(args.partitions), *args.rest]
            print("[kafka_broker_run] " + " ".join(cmd), file=sys.stderr)
            return subprocess.run(cmd).returncode
        finally:
            broker.stop()


if __name__ == "__main__":
    sys.exit(main())
