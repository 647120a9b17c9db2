"""Kafka kill -9 trials (issue 23), driven by bench/fault_trials.

  kafka_at_least_once  SIGKILL an engine (KafkaConnector, start="committed",
                       no checkpoint directory) at random moments while a real
                       broker's topic is consumed; restart it. lost = produced
                       records no tick ever applied; duplicates = records
                       applied more than once (allowed: at-least-once);
                       commit_violations = kills after which the group's
                       offsets passed a record no tick had applied.
                       Trials: --kafka-trials (default 1000).
  kafka_exactly_once   The same with a checkpoint directory: each restart
                       restores the newest checkpoint (tables and offsets).
                       The final table must hold every produced record once
                       (lost = duplicates = 0), and the group's offsets never
                       pass the newest complete checkpoint. Trials: --trials.

The harness is tests/python/kafka_kill.py (its docstring says what is
checked; the test command runs 50 trials of the first kind). The trials run
this checkout's python/ (rills) and build/release under .venv/bin/python. One
Kafka 4.4 broker (tests/python/kafka_broker.py) serves every kind of a run
when the driver itself runs under the .venv's python (`.venv/bin/python
bench/fault_trials …`); under another interpreter each kind runs the harness
in a .venv subprocess with a broker of its own.
"""

from __future__ import annotations

import atexit
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
PYTHON = ROOT / ".venv" / "bin" / "python"
sys.path.insert(0, str(ROOT / "tests" / "python"))
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "python"),
                                                         os.environ.get("PYTHONPATH")]))

import kafka_broker  # noqa: E402
import kafka_kill  # noqa: E402

_broker = None


def _shared_broker():
    global _broker
    if _broker is None:
        home = tempfile.mkdtemp(prefix="rill-fault-kafka-broker-")
        broker = kafka_broker.KafkaBroker(pathlib.Path(home))

        def stop():
            broker.stop(timeout=10)
            shutil.rmtree(home, ignore_errors=True)

        atexit.register(stop)
        broker.start()
        _broker = broker
    return _broker


def _in_venv_subprocess(mode: str, trials: int) -> dict:
    out = subprocess.run([str(PYTHON), str(ROOT / "tests" / "python" / "kafka_kill.py"),
                          "--trials", str(trials), "--mode", mode, "--seed", "23"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        sys.stderr.write(out.stderr[-4000:])
        return {"trials": 0, "lost": None, "duplicates": None, "error": "harness failed"}
    return json.loads(out.stdout.strip().splitlines()[-1])


def _run(mode: str, trials: int, workdir: pathlib.Path) -> dict:
    reason = kafka_broker.missing_requirements()
    if reason and not PYTHON.exists():
        return {"trials": 0, "lost": None, "duplicates": None, "error": f"no broker: {reason}"}
    if reason:  # confluent-kafka is missing here, not in the .venv
        result = _in_venv_subprocess(mode, trials)
    else:
        result = kafka_kill.run_trials(_shared_broker(), workdir, trials, mode=mode, seed=23,
                                       python=str(PYTHON))
    if "error" in result:
        return result
    if result["commit_violations"] or not result["final_commit_at_end"]:
        result["error"] = "the group's offsets passed records that were not applied/checkpointed"
    if mode == "exactly_once" and result["duplicates"]:
        result["error"] = "duplicates in the table state with a checkpoint directory"
    return result


def at_least_once(trials: int, workdir: pathlib.Path, args) -> dict:
    return _run("at_least_once", getattr(args, "kafka_trials", 1000), workdir)


def exactly_once(trials: int, workdir: pathlib.Path, args) -> dict:
    return _run("exactly_once", trials, workdir)


KINDS = {"kafka_at_least_once": at_least_once, "kafka_exactly_once": exactly_once}
