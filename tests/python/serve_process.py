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
