"""`rill serve` as a child process for the tests: output to files (a pipe
nobody reads would fill with librdkafka's log lines and block the process),
and the address read from its "listening on ADDR" line."""

import json
import subprocess
import time
import urllib.error
import urllib.request


def start_serve(args, stdout_path, stderr_path, timeout=30):
    """Run `args` (the rill binary and its arguments); return (process, address).
    Kills it and raises AssertionError with its stderr when no address shows."""
    with open(stdout_path, "w") as out, open(stderr_path, "w") as err:
        proc = subprocess.Popen([str(a) for a in args], stdout=out, stderr=err, text=True)
    address = None
    deadline = time.time() + timeout
    while time.time() < deadline and address is None and proc.poll() is None:
        for line in stdout_path.read_text().splitlines():
            if "listening on " in line:
                address = line.split("listening on ", 1)[1].strip()
        time.sleep(0.05)
    if address is None:
        proc.kill()
        proc.wait(timeout=10)
        raise AssertionError(f"rill serve did not start: {stderr_path.read_text()[-3000:]}")
    return proc, address


def http_request(address, path, token, data=None):
    """POST `data` (bytes, text/plain) or GET `path` on the server at `address`
    with the bearer `token`; return (status, the JSON reply)."""
    req = urllib.request.Request(f"http://{address}{path}", data=data,
                                 method="POST" if data is not None else "GET",
                                 headers={"Authorization": f"Bearer {token}",
                                          "Content-Type": "text/plain"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


# The columns a Kafka source's metadata_columns add, as a pipeline file's
# `columns:` mapping entries (after a table's own columns).
METADATA_COLUMNS = ('_topic: string, _partition: int32, _offset: int64, _key: binary, '
                    '"_timestamp": "timestamp[ms]"')


def stop_all(procs):
    """Terminate every (process, address) of `procs` (a dict) still running, then
    wait for each, killing one that takes over 30 s."""
    for proc, _ in procs.values():
        if proc.poll() is None:
            proc.terminate()
    for proc, _ in procs.values():
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()


def wait_for(predicate, timeout=60.0, what="condition", interval=0.1):
    """Poll `predicate` until true; AssertionError naming `what` after `timeout` s."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what}")


def application_pipeline(app, servers, source, columns, *, output=None, session_timeout_ms=6000,
                         commit_interval_ms=None, exactly_once=None, transaction_timeout_ms=None,
                         metadata_columns=False, max_rows=1000000, primary_key=None, tasks=""):
    """The pipeline file of an instance of application `app` (issue 28): a
    `cluster:` section on the Kafka cluster `servers`, the append table
    `orders` with `columns` (YAML mapping text, e.g. "{id: int64}") fed by the
    topic `source` (keyed by `primary_key` instead, when given), with `output`
    a Kafka sink of it to that topic, and `tasks` (a YAML `tasks:` section)."""
    cluster = [f"  app_id: {app}", f'  bootstrap_servers: "{servers}"',
               f"  session_timeout_ms: {session_timeout_ms}"]
    if commit_interval_ms is not None:
        cluster.append(f"  commit_interval_ms: {commit_interval_ms}")
    if exactly_once is not None:
        cluster.append(f"  exactly_once: {'true' if exactly_once else 'false'}")
    if transaction_timeout_ms is not None:
        cluster.append(f'  kafka_config: {{"transaction.timeout.ms": "{transaction_timeout_ms}"}}')
    text = "cluster:\n" + "\n".join(cluster) + f"""
tables:
  - name: orders
    columns: {columns}
""" + (f"    primary_key: {primary_key}\n" if primary_key else f"""    mode: append
    retention: {{max_rows: {max_rows}}}
""") + f"""connectors:
  - type: kafka
    name: orders_in
    table: orders
    topics: [{source}]
    kafka_config: {{"bootstrap.servers": "{servers}"}}
"""
    if metadata_columns:
        text += "    metadata_columns: true\n"
    if output:
        text += f"""sinks:
  - name: orders_out
    type: kafka
    table: orders
    mode: append
    topic: {output}
    kafka_config: {{"bootstrap.servers": "{servers}"}}
"""
    return text + tasks


class Instances(dict):
    """The `rill serve` instances of one application's pipeline file (issue 28's
    tests): instance id -> (process, address), the dict stop_all takes. Each
    serves on a free port with `token`, leaves the group when stopped, and
    logs to `<log_dir>/<id>.out` / `.err`."""

    def __init__(self, rill, pipeline, token, log_dir, admin_token=None):
        super().__init__()
        self.rill, self.pipeline, self.token, self.log_dir = rill, pipeline, token, log_dir
        self.admin_token = admin_token

    def start(self, node):
        args = [self.rill, "serve", "--metrics", ":memory:", "--listen", "127.0.0.1:0",
                "--token", self.token, "--instance-id", node, "--leave-on-stop", self.pipeline]
        if self.admin_token:
            args[-1:-1] = ["--admin-token", self.admin_token]
        self[node] = start_serve(args, self.log_dir / f"{node}.out", self.log_dir / f"{node}.err")

    def query(self, node, sql):
        """The rows of `sql` on `node` (REST, JSON)."""
        code, body = http_request(self[node][1], "/api/v1/query", self.token,
                                  json.dumps({"sql": sql}).encode())
        assert code == 200, body
        return body["rows"]

    def ddl(self, node, statement):
        """Run a CREATE / DROP on `node` (POST /api/v1/sql with the admin token)."""
        code, body = http_request(self[node][1], "/api/v1/sql", self.admin_token,
                                  statement.encode())
        assert code == 200, body
        return body

    def status(self, node):
        """`node`'s /api/v1/telemetry/cluster (no partitions while it does not answer)."""
        code, body = http_request(self[node][1], "/api/v1/telemetry/cluster", self.token)
        return body if code == 200 else {"partitions": []}

    def owned(self, node):
        """The input partitions `node` owns."""
        return {p["partition"] for p in self.status(node)["partitions"]}

