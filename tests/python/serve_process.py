"""`rill serve` as a child process for the tests: output to files (a pipe
nobody reads would fill with librdkafka's log lines and block the process),
and the address read from its "listening on ADDR" line."""

import subprocess
import time


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
