"""A real PostgreSQL server for integration tests and benchmarks: Debian's
`postgresql` (15), initdb into a temporary directory, `pg_ctl start` on a free
port of 127.0.0.1, `wal_level=logical` (for the CDC connector), trust auth.

    server = PostgresServer()
    server.start()           # initdb + start, waits until it answers
    server.dsn()             # "host=127.0.0.1 port=PORT user=postgres dbname=postgres"
    server.stop(); server.start()   # the same data directory and port again
    server.close()           # stop and remove the directory

As root, initdb and pg_ctl run as user `postgres` (`runuser -u postgres`): the
server refuses to run as root. The directory is made under /tmp (not pytest's
0700 tmp_path, which `postgres` cannot enter). The server's log is
<dir>/server.log (log_tail() for failure reports).
"""

from __future__ import annotations

import atexit
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import List, Optional


def find_bin() -> Optional[str]:
    """The directory of initdb / pg_ctl (the newest PostgreSQL installed), or None."""
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                        key=lambda p: int(Path(p).parent.parent.name)
                        if Path(p).parent.parent.name.isdigit() else 0)
    return str(Path(candidates[-1]).parent) if candidates else None


def missing_requirements() -> Optional[str]:
    """Why a server cannot run here (None when it can)."""
    if find_bin() is None:
        return "no initdb under /usr/lib/postgresql/*/bin (Debian package postgresql)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root, and there is no user `postgres` to run the server as"
        if shutil.which("runuser") is None:
            return "running as root without runuser"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PostgresServer:
    def __init__(self, fsync: bool = False):
        self.bin = find_bin()
        self.dir = Path(tempfile.mkdtemp(prefix="rill-pg-"))
        self.data = self.dir / "data"
        self.log = self.dir / "server.log"
        self.port = _free_port()
        self.fsync = fsync
        self._as_root = os.geteuid() == 0
        self._initialized = False
        if self._as_root:
            user = pwd.getpwnam("postgres")
            os.chown(self.dir, user.pw_uid, user.pw_gid)
        # pg_ctl detaches the server: stop it when this process exits without close()
        # (SIGTERM still leaves it running; callers that expect one turn it into exit).
        atexit.register(self.close)

    def _cmd(self, args: List[str]) -> List[str]:
        return (["runuser", "-u", "postgres", "--"] if self._as_root else []) + args

    def _run(self, args: List[str], timeout: float = 120) -> None:
        result = subprocess.run(self._cmd(args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                timeout=timeout, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(args[:1])} failed: {result.stdout[-2000:]}\n"
                               f"{self.log_tail()}")

    def start(self) -> None:
        """initdb on first start, then start the server and wait until it accepts connections."""
        if not self._initialized:
            self._run([f"{self.bin}/initdb", "-D", str(self.data), "-U", "postgres",
                       "--auth=trust", "-E", "UTF8", "--no-locale", "--no-sync"])
            self._initialized = True
        options = (f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 "
                   f"-c wal_level=logical -c max_connections=100 "
                   f"-c max_replication_slots=32 -c max_wal_senders=32 "
                   f"-c fsync={'on' if self.fsync else 'off'}")
        self._run([f"{self.bin}/pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w",
                   "-t", "60", "-o", options, "start"])

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (the data directory stays; start() again)."""
        if not (self.data / "postmaster.pid").exists():
            return
        subprocess.run(self._cmd([f"{self.bin}/pg_ctl", "-D", str(self.data), "-m", mode, "-w",
                                  "stop"]), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       timeout=120)

    def close(self) -> None:
        """Stop the server and remove its directory."""
        try:
            self.stop(mode="immediate")
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    def dsn(self, db: str = "postgres") -> str:
        return f"host=127.0.0.1 port={self.port} user=postgres dbname={db}"

    def connect(self, db: str = "postgres"):
        """A psycopg connection in autocommit mode."""
        import psycopg

        return psycopg.connect(self.dsn(db), autocommit=True)

    def create_database(self, name: str) -> str:
        """Create database `name` (dropped first if it exists); return its DSN."""
        with self.connect() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.dsn(name)

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no server log)"
