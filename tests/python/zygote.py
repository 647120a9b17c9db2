"""The parent's side of a kill trial's zygote (tests/python/kafka_kill.py,
pg_cdc_kill.py, bench/faults/kafka_sink.py).

A zygote is a child process that has imported everything once and forks one
engine child per trial on request ("<n>\\n" on its stdin; it answers the
child's pid). The parent waits for a child's marker file, SIGKILLs it at a
random moment and reads its stderr (work/child-<n % 4>.err) when it fails.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path


class Zygote:
    def __init__(self, proc: subprocess.Popen, work: Path):
        self.proc = proc
        self.work = Path(work)

    @staticmethod
    def alive(pid: int) -> bool:
        try:
            os.kill(pid, 0)  # exited children are reaped at once (SIGCHLD ignored)
            return True
        except ProcessLookupError:
            return False

    def spawn(self, n: int) -> int:
        """Fork engine child number `n`; return its pid."""
        self.proc.stdin.write(f"{n}\n")
        self.proc.stdin.flush()
        return int(self.proc.stdout.readline())

    def wait_for(self, path: Path, pid: int, timeout: float) -> bool:
        """True once `path` exists; False when `pid` died first or time ran out."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if path.exists():
                return True
            if not self.alive(pid):
                return path.exists()
            time.sleep(0.005)
        return False

    def child_failed(self, n: int, what: str, extra: str = "") -> AssertionError:
        err = (self.work / f"child-{n % 4}.err").read_text(errors="replace")[-4000:]
        return AssertionError(f"child {n} {what}:\n{err}" + (f"\n{extra}" if extra else ""))

    @classmethod
    def kill(cls, pid: int) -> None:
        """SIGKILL `pid` and wait until it is gone."""
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        while cls.alive(pid):
            time.sleep(0.002)
