"""Fault trial kind "http_ingest": SIGKILL an engine serving HTTP ingest (issue 23).

(Named http_ingest.py, not http.py: bench/fault_trials puts this folder on
sys.path, where a module "http" would shadow the standard library's http package.)

The server is a Python `rills` engine process (RillEngine with quack_address,
a checkpoint directory, checkpoints every 0.2 s, an append table `events`).
Two client threads POST NDJSON batches of ROWS_PER_BATCH rows to
/api/v1/ingest/events?wait=true; every row carries its batch number. At a
random moment (0.3-2.0 s into each trial) the engine process gets SIGKILL and
is started again on the same port and checkpoint directory (start() restores
the newest complete checkpoint). One trial = one kill and restart.

What the reply promises, and what "lost" means here:
  * `200 {"published": true}` means every accepted row of the batch is in the
    table (applied and published by a tick); the batches are accepted whole
    (the server's connector refuses with 429 rather than drop). It does not
    mean durable: durability comes with the next completed checkpoint.
  * A batch is DURABLE when it was acknowledged `published: true` at client
    time t_ack and the checkpoint that the restart restored was captured after
    it (its manifest's `created_at`, the engine time of the captured tick
    boundary, is later than t_ack; engine time is unix seconds on this
    machine's clock). The table version captured at a later tick boundary
    holds every row published before.
  * LOST: a durable batch that is not in the table after the restart. It must
    be 0. At the end (after a last round without a kill, before any stop), any
    batch ever sent that is not in the live table at least once also counts
    as lost.
  * `clean_stop_missing_batches` (reported apart, not a SIGKILL trial): after
    that last round the engine is stopped cleanly (SIGTERM, RillEngine.close(),
    which writes a final checkpoint) and started again; batches acknowledged
    before the stop and missing afterwards are counted here.
  * The client re-sends, after each restart, every batch it cannot prove
    durable: the unacknowledged ones (in flight at the kill, or never
    answered) and the acknowledged ones newer than the restored checkpoint.
    Copies of a batch beyond the first at the end are DUPLICATES (a re-sent
    batch that had in fact made it into the checkpoint): at-least-once.

run() returns {"trials", "lost", "duplicates", "rss_max_over_budget": None,
"batches", "acked", "resent", "durable_checked"}.
"""
import http.client
import json
import os
import pathlib
import random
import signal
import socket
import subprocess
import sys
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOKEN = "fault-token"
ROWS_PER_BATCH = 20
CLIENTS = 2

CHILD = r"""
import signal, sys, time
import pyarrow as pa
from rills import RetentionPolicy, RillEngine, schema
port, token, ckdir = sys.argv[1], sys.argv[2], sys.argv[3]
eng = RillEngine(trigger_interval_ms=20, quack_address=f"quack:127.0.0.1:{port}",
                 quack_token=token, metrics_path=None, checkpoint_dir=ckdir,
                 checkpoint_interval_seconds=0.2)
eng.register_table("events", schema=schema([("batch", pa.int64()), ("i", pa.int64())],
                                           mode="append"),
                   retention_policy=RetentionPolicy(max_rows=50_000_000))
eng.start()
stop = []
signal.signal(signal.SIGTERM, lambda *a: stop.append(1))
print("READY", flush=True)
while not stop:
    time.sleep(0.05)
eng.close()
print("STOPPED", flush=True)
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Engine:
    """The engine process under test."""

    def __init__(self, port, ckdir, log):
        self.port, self.ckdir, self.log = port, ckdir, log
        self.proc = None

    def start(self):
        env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
        self.proc = subprocess.Popen(
            [str(ROOT / ".venv" / "bin" / "python"), "-c", CHILD, str(self.port), TOKEN,
             str(self.ckdir)], env=env, stdout=subprocess.PIPE, stderr=self.log, text=True)
        line = ""
        while "READY" not in line:  # after the engine's banner
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"engine did not start (exit {self.proc.wait()})")

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=60)


def request(port, method, path, body=None, timeout=30):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request(method, path, body=body,
                     headers={"Authorization": f"Bearer {TOKEN}",
                              "Content-Type": "application/x-ndjson"})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def batch_body(batch):
    return "".join(json.dumps({"batch": batch, "i": i}) + "\n" for i in range(ROWS_PER_BATCH))


def copies_in_table(port):
    sql = "SELECT batch, count(*) AS n FROM events GROUP BY batch"
    status, body = request(port, "POST", "/api/v1/query",
                           json.dumps({"sql": sql, "format": "ndjson"}), timeout=60)
    if status != 200:
        raise RuntimeError(f"query failed: {status} {body[:200]!r}")
    out = {}
    for line in body.decode().splitlines():
        row = json.loads(line)
        out[row["batch"]] = row["n"]
    return out


def checkpoint_created_at(ckdir):
    manifest = pathlib.Path(ckdir) / "current" / "manifest.json"
    try:
        return json.loads(manifest.read_text())["created_at"]
    except (OSError, ValueError, KeyError):
        return float("-inf")  # no complete checkpoint yet


class Client:
    """Posts batches until told to stop; remembers what was acknowledged."""

    def __init__(self, port):
        self.port = port
        self.lock = threading.Lock()
        self.next_batch = 0
        self.acked = {}  # batch -> client time of the `published: true` reply
        self.sent = set()
        self.pending = []  # batches to (re-)send first
        self.resent = 0
        self.errors = []

    def take(self):
        with self.lock:
            if self.pending:
                self.resent += 1
                return self.pending.pop()
            b = self.next_batch
            self.next_batch += 1
            return b

    def run(self, stop):
        while not stop.is_set():
            b = self.take()
            with self.lock:
                self.sent.add(b)
            try:
                status, body = request(self.port, "POST", "/api/v1/ingest/events?wait=true",
                                       batch_body(b), timeout=10)
            except OSError:
                with self.lock:
                    self.pending.append(b)  # unanswered: re-sent after the restart
                time.sleep(0.02)
                continue
            t_ack = time.time()
            reply = json.loads(body) if body else {}
            if status == 200 and reply.get("published") is True:
                if reply.get("accepted") != ROWS_PER_BATCH or reply.get("dropped"):
                    self.errors.append(f"batch {b}: {reply}")
                with self.lock:
                    self.acked[b] = t_ack
            else:
                with self.lock:
                    self.pending.append(b)
                time.sleep(0.02)


def run(trials, workdir, args):
    port = free_port()
    ckdir = workdir / "ck"
    log = open(workdir / "engine.log", "w")
    engine = Engine(port, ckdir, log)
    client = Client(port)
    rng = random.Random(int(os.environ.get("RILL_FAULT_SEED", "23")))
    lost = 0
    durable_checked = 0
    engine.start()
    for trial in range(trials):
        stop = threading.Event()
        threads = [threading.Thread(target=client.run, args=(stop,)) for _ in range(CLIENTS)]
        for t in threads:
            t.start()
        time.sleep(rng.uniform(0.3, 2.0))
        engine.kill()
        stop.set()
        for t in threads:
            t.join()
        captured = checkpoint_created_at(ckdir)
        engine.start()
        present = copies_in_table(port)
        with client.lock:
            durable = {b for b, t in client.acked.items() if t < captured}
            durable_checked += len(durable)
            missing = sorted(b for b in durable if present.get(b, 0) < ROWS_PER_BATCH)
            lost += len(missing)
            if missing:
                print(f"[http_ingest] trial {trial}: durable batches missing: {missing[:10]}",
                      file=sys.stderr)
            # Re-send what cannot be proven durable.
            for b in client.sent:
                if b not in durable and b not in client.pending:
                    client.pending.append(b)
                    client.acked.pop(b, None)
    # A last round without a kill, then a clean stop (final checkpoint) and a restart.
    stop = threading.Event()
    threads = [threading.Thread(target=client.run, args=(stop,)) for _ in range(CLIENTS)]
    for t in threads:
        t.start()
    deadline = time.time() + 30
    while time.time() < deadline:
        with client.lock:
            if not client.pending:
                break
        time.sleep(0.05)
    stop.set()
    for t in threads:
        t.join()
    with client.lock:
        unresolved = [b for b in client.sent if b not in client.acked]
    # Every batch ever sent is in the live table at least once (before any stop).
    present = copies_in_table(port)
    never = sorted(b for b in client.sent if present.get(b, 0) < ROWS_PER_BATCH)
    lost += len(never)
    duplicates = sum(max(0, n // ROWS_PER_BATCH - 1) for n in present.values())
    partial = sorted(b for b, n in present.items() if n % ROWS_PER_BATCH != 0)
    # A clean stop writes a final checkpoint: after a restart, every batch
    # acknowledged before the stop should be back. Reported on its own (it is
    # the engine's stop path, not a SIGKILL trial).
    engine.stop()
    engine.start()
    restored = copies_in_table(port)
    engine.stop()
    log.close()
    clean_stop_missing = sorted(b for b in client.acked
                                if restored.get(b, 0) < present.get(b, 0))
    result = {"trials": trials, "lost": lost, "duplicates": duplicates,
              "rss_max_over_budget": None, "batches": len(client.sent),
              "acked": len(client.acked), "resent": client.resent,
              "durable_checked": durable_checked, "rows_per_batch": ROWS_PER_BATCH}
    if never:
        result["missing_batches"] = never[:20]
    result["clean_stop_missing_batches"] = len(clean_stop_missing)
    if unresolved:
        result["unacknowledged_at_end"] = len(unresolved)
    if partial or client.errors:
        result["error"] = f"partial batches {partial[:10]}, bad receipts {client.errors[:3]}"
    return result


KINDS = {"http_ingest": run}
