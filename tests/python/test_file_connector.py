"""FileStreamConnector against files written by pyarrow (parquet, csv, feather, IPC stream, NDJSON)."""

import json
import os
import threading
import time

import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest

import rills
from rills._io_connectors import FileStreamConnector

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("price", pa.float64())])


def rows(start, n):
    return pa.table({"id": list(range(start, start + n)),
                     "name": [f"n{i}" for i in range(start, start + n)],
                     "price": [i * 0.5 for i in range(start, start + n)]}, schema=SCHEMA)


def wait_rows(engine, table, n, timeout=15.0):
    deadline = time.time() + timeout
    got = -1
    while time.time() < deadline:
        engine.step()
        got = engine.query_sql(f"SELECT count(*) AS n FROM {table}").column("n")[0].as_py()
        if got >= n:
            return got
        time.sleep(0.05)
    return got


def test_reads_parquet_csv_ipc_and_ndjson_files_once(engine, tmp_path):
    engine.register_table("items", schema=SCHEMA)
    conn = FileStreamConnector("items", tmp_path, stable_seconds=0.2, poll_interval_seconds=0.05)
    engine.add_connector(conn)
    pq.write_table(rows(0, 100), tmp_path / "a.parquet")
    pcsv.write_csv(rows(100, 50), tmp_path / "b.csv")
    feather.write_feather(rows(150, 30), tmp_path / "c.arrow")  # IPC file format
    with pa.OSFile(str(tmp_path / "d.ipc"), "wb") as sink:
        with pa.ipc.new_stream(sink, SCHEMA) as writer:
            writer.write_table(rows(180, 20))
    with open(tmp_path / "e.ndjson", "w") as f:
        for r in rows(200, 25).to_pylist():
            f.write(json.dumps(r) + "\n")
    assert wait_rows(engine, "items", 225) == 225
    got = engine.query_sql("SELECT * FROM items ORDER BY id").select(["id", "name", "price"])
    assert got.equals(rows(0, 225))
    time.sleep(0.3)
    assert wait_rows(engine, "items", 226, timeout=0.5) == 225  # nothing read twice
    assert sorted(conn.processed_files()) == ["a.parquet", "b.csv", "c.arrow", "d.ipc", "e.ndjson"]


@pytest.mark.parametrize("use_inotify", [True, False])
def test_a_slowly_written_file_is_read_whole(engine, tmp_path, use_inotify):
    engine.register_table("slow", schema=SCHEMA)
    conn = FileStreamConnector("slow", tmp_path, stable_seconds=1.0, poll_interval_seconds=0.05,
                               use_inotify=use_inotify)
    engine.add_connector(conn)
    assert conn.using_inotify == use_inotify
    with open(tmp_path / "slow.ndjson", "w") as f:
        for chunk in range(5):
            for r in rows(chunk * 10, 10).to_pylist():
                line = json.dumps(r) + "\n"
                f.write(line[: len(line) // 2])
                f.flush()
                f.write(line[len(line) // 2:])
            f.flush()
            time.sleep(0.3)
            engine.step()
    assert wait_rows(engine, "slow", 50) == 50
    assert engine.query_sql("SELECT count(*) AS n FROM rill_rejects").column("n")[0].as_py() == 0


def test_restart_reads_only_new_files_and_bad_files_are_rejected(tmp_path):
    pq.write_table(rows(0, 10), tmp_path / "a.parquet")
    (tmp_path / "broken.parquet").write_bytes(b"PAR1 not really")
    first = FileStreamConnector("t", tmp_path, stable_seconds=0, name="restart")
    first.scan_once()
    assert first.read_batch().num_rows == 10
    rejects = first.take_rejects()
    assert [r["position"] for r in rejects] == ["file broken.parquet"]
    assert rejects[0]["raw"].startswith(b"PAR1")
    second = FileStreamConnector("t", tmp_path, stable_seconds=0, name="restart")
    pq.write_table(rows(10, 5), tmp_path / "b.parquet")
    second.scan_once()
    assert second.read_batch().column("id").to_pylist() == list(range(10, 15))
    assert second.take_rejects() == []


def test_error_overflow_waits_for_room_instead_of_losing_files(engine, tmp_path):
    engine.register_table("bp", schema=SCHEMA)
    conn = FileStreamConnector("bp", tmp_path, stable_seconds=0, poll_interval_seconds=0.02,
                               max_buffer_records=10, on_overflow="error")
    for k in range(6):
        pq.write_table(rows(k * 10, 10), tmp_path / f"f{k}.parquet")
    engine.add_connector(conn)
    assert wait_rows(engine, "bp", 60) == 60
    stats = conn.stats()
    assert stats["dropped_records"] == 0 and stats["drained_records"] == 60


def test_drop_oldest_counts_what_it_drops(tmp_path):
    conn = FileStreamConnector("t", tmp_path, stable_seconds=0, max_buffer_records=15)
    for k in range(4):
        pq.write_table(rows(k * 10, 10), tmp_path / f"f{k}.parquet")
    conn.scan_once()
    kept = conn.read_batch().num_rows
    assert kept == 15 and conn.stats()["dropped_records"] == 25


def test_tail_follows_appended_lines(tmp_path):
    conn = FileStreamConnector("t", tmp_path, tail=True, schema=SCHEMA)
    path = tmp_path / "log.ndjson"
    path.write_text('{"id": 1}\n{"id": 2, "na')
    conn.scan_once()
    assert conn.read_batch().column("id").to_pylist() == [1]
    with open(path, "a") as f:
        f.write('me": "x"}\n{"id": "bad"}\n')
    conn.scan_once()
    assert conn.read_batch().to_pylist() == [{"id": 2, "name": "x", "price": None}]
    [reject] = conn.take_rejects()
    assert reject["position"].startswith("file log.ndjson, line 2, byte ")


def test_delete_after_process_and_pattern(tmp_path):
    conn = FileStreamConnector("t", tmp_path, file_pattern="keep_*.parquet", stable_seconds=0,
                               delete_after_process=True)
    pq.write_table(rows(0, 3), tmp_path / "keep_1.parquet")
    pq.write_table(rows(3, 3), tmp_path / "other.parquet")
    conn.scan_once()
    assert conn.read_batch().num_rows == 3
    assert sorted(os.listdir(tmp_path)) == [".rill-t.state", "other.parquet"] or sorted(
        p for p in os.listdir(tmp_path) if not p.startswith(".")) == ["other.parquet"]


def test_delete_after_process_keeps_a_truncated_parquet_file_in_failed_with_its_reason(
        engine, tmp_path):
    engine.register_table("items", schema=SCHEMA)
    pq.write_table(rows(0, 10), tmp_path / "a.parquet")
    pq.write_table(rows(10, 500), tmp_path / "b.parquet")
    whole = (tmp_path / "b.parquet").read_bytes()
    (tmp_path / "b.parquet").write_bytes(whole[: len(whole) // 2])  # cut: corrupt
    pq.write_table(rows(510, 5), tmp_path / "c.parquet")
    conn = FileStreamConnector("items", tmp_path, stable_seconds=0, poll_interval_seconds=0.05,
                               delete_after_process=True)
    engine.add_connector(conn)
    assert wait_rows(engine, "items", 15) == 15
    deadline = time.time() + 15
    while time.time() < deadline and engine.query_sql(
            "SELECT count(*) AS n FROM rill_rejects").column("n")[0].as_py() == 0:
        engine.step()
        time.sleep(0.05)
    ids = engine.query_sql("SELECT id FROM items ORDER BY id").column("id").to_pylist()
    assert ids == list(range(10)) + list(range(510, 515))
    # The good files are processed and deleted (by the reader thread, once a tick
    # applied their rows); the corrupt one is kept in failed/.
    deadline = time.time() + 15
    while True:
        visible = sorted(p for p in os.listdir(tmp_path) if not p.startswith("."))
        if visible == ["failed"] or time.time() > deadline:
            break
        time.sleep(0.02)
    assert visible == ["failed"]
    assert (tmp_path / "failed" / "b.parquet").read_bytes() == whole[: len(whole) // 2]
    rejects = engine.query_sql("SELECT source, position, reason FROM rill_rejects").to_pylist()
    assert len(rejects) == 1
    assert rejects[0]["position"] == "file b.parquet"
    assert "moved to 'failed/b.parquet'" in rejects[0]["reason"]
    assert conn.stats()["errors"] == 1


def test_watch_path_must_be_a_folder(tmp_path):
    with pytest.raises(ValueError, match="not an existing folder"):
        FileStreamConnector("t", tmp_path / "missing")


_CHECKPOINTED_CHILD = """
import sys, time
import pyarrow as pa
from rills import FileStreamConnector, RetentionPolicy, RillEngine
ck, inp = sys.argv[1], sys.argv[2]
e = RillEngine(trigger_interval_ms=10, metrics_path=None, checkpoint_dir=ck,
               checkpoint_interval_seconds=3600)
e.register_table("ev", schema=pa.schema([("f", pa.int64())]), mode="append",
                 retention_policy=RetentionPolicy(max_rows=1000))
e.add_connector(FileStreamConnector("ev", inp, stable_seconds=0.05, poll_interval_seconds=0.02,
                                    name="ev_files"))
e.start()
deadline = time.time() + 10
while e.get_table("ev").num_rows == 0 and time.time() < deadline:
    time.sleep(0.01)
print(e.get_table("ev").num_rows, flush=True)
time.sleep(60)
"""


def test_a_crash_before_the_first_checkpoint_loses_no_file(tmp_path):
    import signal
    import subprocess
    import sys

    ck, inp = tmp_path / "ck", tmp_path / "in"
    inp.mkdir()
    (inp / "a.ndjson").write_text('{"f": 1}\n{"f": 2}\n')
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))

    def run_and_kill():
        proc = subprocess.Popen([sys.executable, "-c", _CHECKPOINTED_CHILD, str(ck), str(inp)],
                                stdout=subprocess.PIPE, text=True, env=env)
        try:
            return int(proc.stdout.readline())
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            proc.stdout.close()

    assert run_and_kill() == 2  # read and applied; no checkpoint yet when killed
    assert run_and_kill() == 2  # after the restart: the rows must come back


def test_delete_after_process_with_checkpoints_keeps_a_file_until_a_checkpoint_holds_it(tmp_path):
    from rills import RetentionPolicy, RillEngine
    from rills import FileStreamConnector as PublicFileStreamConnector

    ck, inp = tmp_path / "ck", tmp_path / "in"
    inp.mkdir()
    (inp / "a.ndjson").write_text('{"f": 1}\n{"f": 2}\n')
    e = RillEngine(trigger_interval_ms=10, metrics_path=None, checkpoint_dir=str(ck),
                   checkpoint_interval_seconds=3600)
    try:
        e.register_table("ev", schema=pa.schema([("f", pa.int64())]), mode="append",
                         retention_policy=RetentionPolicy(max_rows=1000))
        e.add_connector(PublicFileStreamConnector(
            "ev", str(inp), stable_seconds=0.05, poll_interval_seconds=0.02,
            delete_after_process=True, name="ev_files"))
        e.start()
        deadline = time.time() + 15
        while e.get_table("ev").num_rows < 2 and time.time() < deadline:
            time.sleep(0.01)
        assert e.get_table("ev").num_rows == 2
        # Applied, but no checkpoint holds it yet: a crash now must be able to read it again.
        time.sleep(0.2)  # reader rounds that would have deleted it (10 poll intervals)
        assert (inp / "a.ndjson").exists()
        e.checkpointer.save_snapshots(e)
        deadline = time.time() + 15
        while (inp / "a.ndjson").exists() and time.time() < deadline:
            time.sleep(0.01)
        assert not (inp / "a.ndjson").exists()
    finally:
        e.close()
