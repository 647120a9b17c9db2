"""Fault trial kind "postgres_cdc_kill": SIGKILL an engine reading a real
PostgreSQL 15 by PostgresCDCConnector (with a checkpoint directory) at random
moments while transactions stream, and restart it (issue 25).

The harness is tests/python/pg_cdc_kill.py (its docstring says what is
checked): an insert-only source into an append table (every key exactly once:
`lost`, `duplicates`), a source of random inserts / updates / key changes /
deletes / truncates into a keyed table (equal to SELECT * FROM the source at
the end: `mirror_equal`), and after every kill each slot's confirmed_flush_lsn
within the newest complete checkpoint (`confirm_violations`). The test command
runs 20 trials (tests/python/test_postgres_cdc.py); here --pg-cdc-trials
(default 500):
    .venv/bin/python bench/fault_trials --kinds postgres_cdc_kill
The children run this checkout's python/ (rills) and build/release.
"""

from __future__ import annotations

import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
PYTHON = ROOT / ".venv" / "bin" / "python"
sys.path.insert(0, str(ROOT / "tests" / "python"))
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "python"),
                                                         os.environ.get("PYTHONPATH")]))

TRIALS = int(os.environ.get("RILL_PG_CDC_TRIALS", "500"))


def kill_trials(trials: int, workdir: pathlib.Path, args) -> dict:
    import pg_cdc_kill
    import pg_server

    reason = pg_server.missing_requirements()
    if reason:
        return {"trials": 0, "lost": None, "duplicates": None, "error": f"no server: {reason}"}
    n = 10 if getattr(args, "quick", False) else TRIALS
    server = pg_server.PostgresServer()
    server.start()
    try:
        result = pg_cdc_kill.run_trials(server, workdir, n, seed=25, python=str(PYTHON))
    finally:
        server.close()
    if result["confirm_violations"]:
        result["error"] = "a slot confirmed a position past the newest complete checkpoint"
    if result["duplicates"] or not result["mirror_equal"]:
        result["error"] = "rows applied twice, or the keyed mirror differs from the source"
    return result


KINDS = {"postgres_cdc_kill": kill_trials}
