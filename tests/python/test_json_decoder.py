"""JSONStreamConnector's decoder against pyarrow's JSON reader (the oracle), a
malformed-input corpus, rejects in rill_rejects, and backpressure."""

import io
import json
import random
import threading

import pyarrow as pa
import pyarrow.json as pj
import pytest

import rills
from rills._io_connectors import JSONStreamConnector

SCHEMA = pa.schema(
    [
        ("i", pa.int64()),
        ("f", pa.float64()),
        ("b", pa.bool_()),
        ("s", pa.string()),
        ("small", pa.int32()),
        ("ts", pa.timestamp("s")),
        ("tags", pa.list_(pa.int64())),
        ("obj", pa.struct([("a", pa.int64()), ("n", pa.struct([("x", pa.list_(pa.string()))]))])),
    ]
)

ALPHABET = ["a", "Z", " ", "é", "日本", "\"", "\\", "/", "\n", "\t", "\u0001", "😀", "\u2028"]


def rand_string(rng):
    return "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 12)))


def rand_row(rng):
    row = {}
    gens = {
        "i": lambda: rng.choice([0, -1, 2**63 - 1, -(2**63), rng.randint(-10**12, 10**12)]),
        "f": lambda: rng.choice([0.0, -1.5, 1e300, 5e-324, rng.uniform(-1e6, 1e6), rng.randint(-5, 5)]),
        "b": lambda: rng.choice([True, False]),
        "s": lambda: rand_string(rng),
        "small": lambda: rng.randint(-(2**31), 2**31 - 1),
        "ts": lambda: f"{rng.randint(1971, 2100)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
        f"T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d}",
        "tags": lambda: [rng.randint(-100, 100) if rng.random() > 0.1 else None for _ in range(rng.randint(0, 4))],
        "obj": lambda: {"a": rng.randint(0, 9), "n": {"x": [rand_string(rng) for _ in range(rng.randint(0, 3))]}},
    }
    for name, gen in gens.items():
        r = rng.random()
        if r < 0.1:
            continue  # missing -> null
        row[name] = None if r < 0.2 else gen()
    if rng.random() < 0.2:
        row["unknown_" + str(rng.randint(0, 3))] = {"deep": [1, {"x": None}]}
    keys = list(row)
    rng.shuffle(keys)
    return {k: row[k] for k in keys}


def oracle(data: bytes, schema=SCHEMA) -> pa.Table:
    return pj.read_json(
        io.BytesIO(data),
        parse_options=pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore"),
    )


def decode(data, schema=SCHEMA, **kwargs):
    c = JSONStreamConnector("t", parse_options={"explicit_schema": schema}, **kwargs)
    c.push_bytes(data)
    table = c.read_batch()
    return table, c.take_rejects()


@pytest.mark.parametrize("seed", range(8))
def test_random_documents_decode_like_pyarrows_reader(seed):
    rng = random.Random(seed)
    rows = [rand_row(rng) for _ in range(rng.randint(1, 300))]
    data = "\n".join(json.dumps(r, ensure_ascii=rng.random() < 0.5) for r in rows).encode()
    ours, rejects = decode(data)
    assert rejects == []
    expected = oracle(data)
    assert ours.num_rows == expected.num_rows == len(rows)
    assert ours.schema == SCHEMA
    assert ours.equals(expected), (ours.slice(0, 3).to_pylist(), expected.slice(0, 3).to_pylist())


def test_top_level_array_and_str_input_match_ndjson():
    rng = random.Random(99)
    rows = [rand_row(rng) for _ in range(50)]
    ndjson = "\n".join(json.dumps(r) for r in rows)
    as_array, rejects = decode(json.dumps(rows, indent=1))
    assert rejects == []
    assert as_array.equals(oracle(ndjson.encode()))
    as_str, _ = decode(ndjson)
    assert as_str.equals(as_array)


GOOD = {"i": 1, "f": 2.5, "b": True, "s": "x", "small": 3, "ts": "2024-01-01T00:00:00",
        "tags": [1, 2], "obj": {"a": 1, "n": {"x": ["q"]}}}


def malformed_corpus():
    """>= 500 broken lines: truncations, invalid UTF-8, wrong types, huge
    numbers, duplicate keys, junk, a 10 MB line over the limit."""
    line = json.dumps(GOOD).encode()
    cases = [line[:n] for n in range(1, len(line))]  # every truncation
    for n in range(1, len(line), 3):  # invalid UTF-8 inside or outside strings
        cases.append(line[:n] + b"\xff" + line[n:])
        cases.append(line[:n] + b"\xc3" + line[n:])
    wrong = {"i": ["1", 1.5, True, [], {}, 2**64, -(2**63) - 1], "f": ["1", True, [], {}],
             "b": [1, "true", [], {}], "small": [2**31, -(2**31) - 1, 1.0, "2"],
             "ts": ["yesterday", "2024-13-01", True, [], {}], "tags": [1, "x", {}, ["a"]],
             "obj": [1, "x", [], {"a": "no"}, {"n": {"x": [1]}}, {"n": 5}]}
    for field, values in wrong.items():
        for v in values:
            cases.append(json.dumps({**GOOD, field: v}).encode())
    for digits in (20, 40, 400):
        cases.append(b'{"i": 1' + b"0" * digits + b"}")
        cases.append(b'{"f": 1e' + str(digits * 10).encode() + b"}")
    cases.append(b'{"i": 1, "i": 2}')
    cases.append(b'{"s": "a", "s": "b"}')
    junk = [b"[1,2]", b"5", b'"str"', b"null", b"true", b"{", b"}", b"{}}", b"{\"i\":1}{}", b"{'i':1}",
            b"{i:1}", b'{"i":01}', b'{"i":-}', b'{"i":1,}', b'{"s":"\\x"}', b'{"s":"\\ud800"}',
            b"\x00", b'{"i":NaN}', b'{"f":Infinity}', b'{"s":"a\x01b"}']
    cases += junk
    rng = random.Random(7)
    while len(cases) < 560:  # random byte flips
        b = bytearray(line)
        for _ in range(rng.randint(1, 3)):
            b[rng.randrange(len(b))] = rng.randrange(256)
        if b"\n" not in b and b"\r" not in b:
            cases.append(bytes(b))
    cases.append(b'{"s": "' + b"x" * (10 << 20))  # a truncated 10 MB line
    return cases


def pyarrow_accepts(line: bytes):
    try:
        table = oracle(line)
        table.validate(full=True)  # pyarrow's reader does not check UTF-8 itself
        return table
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None


def test_malformed_corpus_keeps_good_lines_and_agrees_with_pyarrow():
    cases = malformed_corpus()
    assert len(cases) >= 500
    good = json.dumps(GOOD).encode()
    c = JSONStreamConnector("t", parse_options={"explicit_schema": SCHEMA})
    disagreements = []
    total_rejected = 0
    for n, case in enumerate(cases):
        c.push_bytes(good + b"\n" + case + b"\n" + good + b"\n")
        table = c.read_batch()
        rejects = c.take_rejects()
        accepted = table.num_rows - 2
        assert accepted + len(rejects) == 1, (n, case[:80], rejects)
        total_rejected += len(rejects)
        for r in rejects:
            assert r["position"] == f"line 2, byte {len(good) + 1}"
            assert r["raw"] == case[:4096] and r["raw_size"] == len(case)
            assert r["error"]
        if len(case) > 1 << 20 or not case.startswith(b"{"):
            # pyarrow 26's reader crashes (SIGSEGV) on a top-level `null` with an
            # explicit schema; lines that are not objects are checked above.
            continue
        theirs = pyarrow_accepts(case)
        if accepted and (theirs is None or not table.slice(1, 1).equals(theirs)):
            # pyarrow is stricter for nothing we accept, except where noted
            disagreements.append((case, "we accept", theirs))
        if not accepted and theirs is not None and theirs.num_rows == 1:
            disagreements.append((case, "we reject: " + rejects[0]["error"], theirs.to_pylist()))
    # Where we are stricter than pyarrow: duplicate keys (pyarrow keeps one value;
    # the record is ambiguous) and invalid UTF-8 anywhere in a record (pyarrow
    # does not check UTF-8 in keys of ignored fields).
    allowed = [d for d in disagreements if b'"i": 1, "i": 2' in d[0] or b'"s": "a", "s": "b"' in d[0]
               or "not valid UTF-8" in d[1] or d[0] in (b'{"i":NaN}', b'{"f":Infinity}')]
    # ... and NaN / Infinity, which JSON does not have (pyarrow's RapidJSON takes them).
    assert disagreements == allowed, [d for d in disagreements if d not in allowed][:8]
    stats = c.stats()
    assert stats["rejected_records"] == total_rejected > 300
    assert stats["parsed_records"] + total_rejected == stats["received_records"] == 3 * len(cases)


def test_engine_writes_good_rows_and_rejects_with_positions(engine):
    engine.register_table("events", schema=pa.schema([("id", pa.int64()), ("name", pa.string())]))
    c = JSONStreamConnector("events")
    engine.add_connector(c)
    c.push_bytes(b'{"id": 1, "name": "a"}\n{"id": "oops"}\n{"id": 2}\nnot json\n')
    engine.step()
    assert engine.query_sql("SELECT id, name FROM events ORDER BY id").to_pylist() == [
        {"id": 1, "name": "a"}, {"id": 2, "name": None}]
    rejects = engine.query_sql(
        "SELECT source, position, reason, raw FROM rill_rejects ORDER BY position").to_pylist()
    assert [r["position"] for r in rejects] == ["line 2, byte 23", "line 4, byte 48"]
    assert rejects[0]["raw"] == b'{"id": "oops"}' and rejects[0]["source"] == c.name
    assert "field 'id'" in rejects[0]["reason"]
    assert any("Rejected 2 records" in e["message"] for e in engine.recent_events())
    stats = engine.get_metrics()["connectors"][c.name]
    assert stats["rejected_records"] == 2 and stats["parsed_records"] == 2


def test_table_without_schema_takes_the_inferred_schema(engine):
    c = JSONStreamConnector("inferred")
    engine.add_connector(c)
    c.push_bytes('[{"a": 1, "b": "x"}, {"a": 2.5, "c": true}]')
    engine.step()
    table = engine.query_sql("SELECT * FROM inferred ORDER BY a")
    assert table.column("a").to_pylist() == [1.0, 2.5]
    assert table.schema.field("a").type == pa.float64()


@pytest.mark.parametrize("policy", ["drop_oldest", "drop_newest", "error"])
def test_backpressure_with_fast_producers(policy):
    c = JSONStreamConnector("t", parse_options={"explicit_schema": pa.schema([("v", pa.int64())])},
                            max_buffer_records=500, on_overflow=policy)
    refused = [0]
    lock = threading.Lock()

    def produce(k):
        for p in range(40):
            try:
                c.push_bytes("\n".join('{"v": %d}' % (k * 10000 + p * 10 + j) for j in range(10)))
            except BufferError:
                with lock:
                    refused[0] += 10

    threads = [threading.Thread(target=produce, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    got = 0
    for _ in range(5):
        table = c.read_batch()
        got += 0 if table is None else table.num_rows
    for t in threads:
        t.join()
    table = c.read_batch()
    got += 0 if table is None else table.num_rows
    s = c.stats()
    assert got + s["dropped_records"] + s["refused_records"] == 4 * 40 * 10
    assert s["refused_records"] == refused[0]
    if policy == "error":
        assert s["dropped_records"] == 0
    else:
        assert s["refused_records"] == 0


def test_push_bytes_raises_only_for_backpressure_or_a_closed_connector(engine):
    c = JSONStreamConnector("t2", max_buffer_records=1, on_overflow="error")
    c.push_bytes(b"{nonsense\n")  # bad input never raises
    c.push_bytes(b'{"v": 1}')
    with pytest.raises(BufferError):
        c.push_bytes(b'{"v": 2}')
    with pytest.raises(TypeError):
        c.push_bytes(12)
    engine.add_connector(c)
    engine.remove_connector(c)
    with pytest.raises(ValueError, match="closed"):
        c.push_bytes(b'{"v": 3}')
