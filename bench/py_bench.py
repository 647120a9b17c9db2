#!/usr/bin/env python3
"""Python-level benchmarks: examples/benchmark_streams.py through `rills`, and
through the pure-Python Rill (github lijose/rill) as the baseline when given.

    .venv/bin/python bench/py_bench.py [--seed-repo PATH] [--quick] [--reps N] [--sizes 1k,10k,1m]
                                       [--workloads examples,seed_script]

bench/run calls it with --seed-repo "$RILL_SEED_REPO" when that variable is
set, and without it otherwise.

Workload `examples`: each repetition runs `examples/benchmark_streams.py --json
--impl rills` and, with --seed-repo, `--impl seed` (the pure-Python package `rill`
imported from PATH; nothing of it is copied here), each in its own process, on the same
generated data (fixed seed), alternating which implementation goes first.
Every stable measurement name (py_*) is reported as the median over the
repetitions, one JSON object per line on stdout:

    {"name": "py_upsert_rows_per_s_products_1m", "value": <rills>, "unit": "rows/s",
     "baseline": "seed_python_rill", "baseline_value": <seed>, "ratio": <bigger is better>,
     "targets": [...], "reps": N, ...}

ratio = value / baseline_value for rates, baseline_value / value for times.
The result digests (py_check_*) of the two implementations must agree, or the
script fails (exit 1): a speed-up over a baseline that computes something
else means nothing. Progress goes to stderr.

Issue 3's target: >= 20x the pure-Python implementation at 1M products, on
py_upsert_rows_per_s_products_1m (and, since the seed's own benchmark is the
streams workload, also shown on py_ingest_rows_per_s_streams_1m).

Workload `seed_script` (issue 29) runs the seed's own file,
PATH/examples/benchmark_streams.py, unchanged, with `--products N --optimize
--incremental-join`: through the seed (in place, importing its `rill`) and
through rills (a copy of the file in a temporary directory beside a package
`rill` that is `rills`), each in its own process, with numpy's global random
seed fixed so both see the same rows. Its per-stage figures (data generation,
ingest, the two top-10 queries, TTL pruning, pyarrow's allocated bytes) are
reported as py_seed_script_* lines like the ones above; the top-10 counts
printed by the two runs must agree. Without --seed-repo it cannot run (the
file is the seed's) and says so. --workloads picks the workloads (default both).
"""
import argparse
import json
import pathlib
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
WORKLOAD = ROOT / "examples" / "benchmark_streams.py"
BASELINE = "seed_python_rill"
TARGETS = {
    "py_upsert_rows_per_s_products_1m": [{"of": "ratio", "op": ">=", "value": 20.0}],
    "py_ingest_rows_per_s_streams_1m": [{"of": "ratio", "op": ">=", "value": 20.0}],
}
# Extra per-stage figures of the products workload attached to the upsert line.
STAGES = {"push_ms": "python_push_{}_latency_ms", "step_ms": "python_tick_{}_latency_ms"}
WORKLOADS = ("examples", "seed_script")

# The seed's examples/benchmark_streams.py: what it prints per stage, as
# (figure, unit, pattern); each pattern's groups are read left to right.
SEED_SCRIPT = pathlib.Path("examples") / "benchmark_streams.py"
SEED_SCRIPT_FIGURES = [
    (("generate_ms",), "ms", r"Done generating batches in ([\d.]+) ms"),
    (("ingest_ms", "ingest_rows_per_s"), ("ms", "records/s"),
     r"Ingestion Complete: ([\d.]+) ms \| Throughput: ([\d,]+) records/sec"),
    (("query_ms_top10_impressions",), "ms", r"Top 10 Impressions Query Latency\s*: ([\d.]+) ms"),
    (("query_ms_top10_clicks",), "ms", r"Top 10 Clicks Query Latency\s*: ([\d.]+) ms"),
    (("ttl_prune_ms",), "ms", r"TTL Retention Pruning Latency: ([\d.]+) ms"),
    (("pyarrow_allocated_mb", "pyarrow_bytes_per_record"), ("MB", "bytes/record"),
     r"Memory Allocation : ([\d.]+) MB \(([\d.]+) bytes/record\)"),
]
SEED_SCRIPT_NOTES = {
    "generate_ms": "numpy only, the same code in both: a control for the machine's noise",
    "pyarrow_allocated_mb": "pa.total_allocated_bytes() after the run (rills' tables use "
                            "the same default pool)",
}
# Runs a script as __main__ with numpy's global random seed fixed first:
#   python -c RUNNER <seed> <script> <script args...>
# pyarrow imports pandas (when installed) on its first conversion of a Python
# list, ~0.4 s that would otherwise land in the script's first timed stage
# (ingest) in both runs; the runner pays it before the script starts.
RUNNER = (
    "import runpy, sys, numpy, pyarrow\n"
    "pyarrow.array([0])\n"
    "numpy.random.seed(int(sys.argv[1]))\n"
    "sys.argv = sys.argv[2:]\n"
    "runpy.run_path(sys.argv[0], run_name='__main__')\n"
)
# Package `rill` of the rills run: the module `rill` is rills, and rill.X is rills.X
# (the same module objects, imported on first use).
RILL_SHIM = '''"""`rill` is `rills` (written by bench/py_bench.py for the seed's scripts)."""
import importlib
import importlib.abc
import importlib.util
import sys


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path=None, target=None):
        if name.startswith("rill."):
            return importlib.util.spec_from_loader(name, self)
        return None

    def create_module(self, spec):
        return importlib.import_module("rills" + spec.name[len("rill"):])

    def exec_module(self, module):
        # module_from_spec gave the rills module this alias's spec: restore its own.
        module.__spec__ = importlib.util.find_spec(module.__name__)


sys.meta_path.insert(0, _Alias())
sys.modules[__name__] = importlib.import_module("rills")
'''


def log(msg):
    print(f"[py_bench] {msg}", file=sys.stderr, flush=True)


def run_impl(impl, args):
    cmd = [sys.executable, str(WORKLOAD), "--json", "--impl", impl]
    if args.quick:
        cmd.append("--quick")
    if args.sizes:
        cmd += ["--sizes", args.sizes]
    if impl == "seed":
        cmd += ["--seed-repo", args.seed_repo]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise SystemExit(f"py_bench: {impl} run failed (exit {proc.returncode})")
    out = {}
    for line in proc.stdout.splitlines():
        if line.strip().startswith("{"):
            rec = json.loads(line)
            out[rec["name"]] = (rec["value"], rec["unit"])
    log(f"  {impl}: {len(out)} figures in {time.monotonic() - t0:.1f} s")
    return out


def fmt(v):
    return float(f"{v:.4g}") if abs(v) < 1000 else round(v)


def bench_examples(args, reps):
    """examples/benchmark_streams.py through rills (and the seed): print its figures."""
    impls = ["rills"] + (["seed"] if args.seed_repo else [])

    runs = {impl: [] for impl in impls}
    for rep in range(reps):
        order = impls if rep % 2 == 0 else impls[::-1]
        log(f"repetition {rep + 1}/{reps}: {', '.join(order)}")
        for impl in order:
            runs[impl].append(run_impl(impl, args))

    def median(impl, name):
        vals = [r[name][0] for r in runs[impl] if name in r]
        return statistics.median(vals) if vals else None

    # Same answers, or no comparison.
    failed = False
    if "seed" in runs:
        for name in runs["rills"][0]:
            if not name.startswith("py_check_"):
                continue
            for r_ours, r_seed in zip(runs["rills"], runs["seed"]):
                ours, seed = r_ours[name][0], r_seed.get(name, (None,))[0]
                if seed is None or abs(ours - seed) > 1e-6 * max(1.0, abs(ours)):
                    log(f"MISMATCH {name}: rills {ours}, seed {seed}")
                    failed = True

    for name, (_, unit) in runs["rills"][0].items():
        if not name.startswith("py_") or name.startswith("py_check_"):
            continue
        value = median("rills", name)
        rec = {"name": name, "value": fmt(value), "unit": unit}
        base = median("seed", name) if "seed" in runs else None
        ratio = None
        if base is not None:
            ratio = value / base if unit.endswith("/s") else base / value
            rec.update(baseline=BASELINE, baseline_value=fmt(base), ratio=fmt(ratio))
        if name in TARGETS:
            rec["targets"] = [dict(t, met=(None if ratio is None else ratio >= t["value"]))
                              for t in TARGETS[name]]
            if ratio is None:
                rec["note"] = "no baseline (set RILL_SEED_REPO): target not measured"
        rec["reps"] = reps
        if name.startswith("py_upsert_rows_per_s_products_"):
            label = name.rsplit("_", 1)[1]
            for key, stage in STAGES.items():
                stage = stage.format(label)
                if median("rills", stage) is not None:
                    rec[key] = fmt(median("rills", stage))
                if "seed" in runs and median("seed", stage) is not None:
                    rec["baseline_" + key] = fmt(median("seed", stage))
        if "seed" in runs:
            rec["check"] = "MISMATCH" if failed else "same results"
        print(json.dumps(rec), flush=True)
    return 1 if failed else 0


def seed_script_checkouts(seed_repo, tmp):
    """Return {impl: (script, working directory)}: the seed's file in place, and an
    unchanged copy of it beside a `rill` package that is rills."""
    shim = tmp / "rills_as_rill"
    (shim / SEED_SCRIPT.parent).mkdir(parents=True)
    (shim / "rill").mkdir()
    shutil.copyfile(pathlib.Path(seed_repo) / SEED_SCRIPT, shim / SEED_SCRIPT)
    (shim / "rill" / "__init__.py").write_text(RILL_SHIM)
    # The script puts its parent's parent first on sys.path: the checkout, or `shim`.
    return {"seed": (pathlib.Path(seed_repo) / SEED_SCRIPT, tmp),
            "rills": (shim / SEED_SCRIPT, tmp)}


def run_seed_script(impl, script, cwd, args):
    """Run the seed's script once; return {figure: value} and the top-10 counts."""
    cmd = [sys.executable, "-c", RUNNER, str(args.data_seed), str(script),
           "--products", str(args.seed_script_products), "--optimize", "--incremental-join"]
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, cwd=cwd)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-4000:])
        raise SystemExit(f"py_bench: the seed's script through {impl} failed "
                         f"(exit {proc.returncode})")
    figures = {}
    for names, units, pattern in SEED_SCRIPT_FIGURES:
        match = re.search(pattern, proc.stdout)
        if match is None:
            raise SystemExit(f"py_bench: no /{pattern}/ in the output of the seed's script "
                             f"through {impl}: has the script changed?")
        units = units if isinstance(units, tuple) else (units,)
        for name, unit, text in zip(names, units, match.groups()):
            figures[name] = (float(text.replace(",", "")), unit)
    log(f"  {impl}: {len(figures)} figures in {time.monotonic() - t0:.1f} s")
    return figures, top10_counts(proc.stdout)


def top10_counts(stdout):
    """The counts of the script's two top-10 tables ({"impressions": [...], "clicks": [...]}).

    Products with equal counts may be listed in any order, so only the counts are kept."""
    counts, current = {}, None
    for line in stdout.splitlines():
        header = re.search(r"Top 10 Products by (\w+)", line)
        if header:
            current = counts.setdefault(header.group(1).lower(), [])
            continue
        row = re.match(r"\s*\|\s*\d+\s*\|\s*([\d,]+)\s*\|\s*$", line)
        if row and current is not None:
            current.append(int(row.group(1).replace(",", "")))
    return counts


def bench_seed_script(args, reps):
    """The seed's own examples/benchmark_streams.py through rills and the seed."""
    if not args.seed_repo:
        log("seed_script: cannot run without --seed-repo (the script is the seed's own file)")
        print(json.dumps({"name": "py_seed_script", "note": "not run: the seed's "
                          "examples/benchmark_streams.py comes from --seed-repo "
                          "(set RILL_SEED_REPO)"}), flush=True)
        return 0
    if not (pathlib.Path(args.seed_repo) / SEED_SCRIPT).is_file():
        log(f"{args.seed_repo} holds no {SEED_SCRIPT}")
        return 2
    products = args.seed_script_products
    label = f"{products // 1000}k" if products < 1_000_000 else f"{products // 1_000_000}m"
    runs = {"rills": [], "seed": []}
    with tempfile.TemporaryDirectory(prefix="py_bench_seed_script_") as tmp:
        checkouts = seed_script_checkouts(args.seed_repo, pathlib.Path(tmp))
        for rep in range(reps):
            order = ["rills", "seed"] if rep % 2 == 0 else ["seed", "rills"]
            log(f"seed_script {label}, repetition {rep + 1}/{reps}: {', '.join(order)}")
            for impl in order:
                runs[impl].append(run_seed_script(impl, *checkouts[impl], args))

    failed = False
    for (_, ours), (_, seed) in zip(runs["rills"], runs["seed"]):
        if ours != seed or len(ours.get("impressions", [])) != 10:
            log(f"MISMATCH seed_script top-10 counts: rills {ours}, seed {seed}")
            failed = True
    for name, (_, unit) in runs["rills"][0][0].items():
        value = statistics.median(r[0][name][0] for r in runs["rills"])
        base = statistics.median(r[0][name][0] for r in runs["seed"])
        ratio = value / base if unit.endswith("/s") else base / value
        rec = {"name": f"py_seed_script_{name}_{label}", "value": fmt(value), "unit": unit,
               "baseline": BASELINE, "baseline_value": fmt(base), "ratio": fmt(ratio),
               "reps": reps, "check": "MISMATCH" if failed else "same top-10 counts"}
        if name in SEED_SCRIPT_NOTES:
            rec["note"] = SEED_SCRIPT_NOTES[name]
        print(json.dumps(rec), flush=True)
    return 1 if failed else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed-repo", default=None, help="checkout of github lijose/rill")
    parser.add_argument("--quick", action="store_true", help="1K and 10K products, one repetition")
    parser.add_argument("--reps", type=int, default=None, help="repetitions (default 3, quick 1)")
    parser.add_argument("--sizes", default=None, help="product counts, e.g. 1k,10k,1m")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per run")
    parser.add_argument("--workloads", default=",".join(WORKLOADS),
                        help="comma-separated, of: " + ", ".join(WORKLOADS))
    parser.add_argument("--seed-script-products", type=int, default=10_000,
                        choices=[1_000, 10_000, 1_000_000],
                        help="seed_script: the seed script's --products (default 10000)")
    parser.add_argument("--data-seed", type=int, default=7,
                        help="seed_script: numpy's global random seed in both runs")
    args = parser.parse_args()
    workloads = [w for w in args.workloads.split(",") if w]
    if not workloads or any(w not in WORKLOADS for w in workloads):
        parser.error(f"--workloads: of {', '.join(WORKLOADS)}, got {args.workloads!r}")
    if args.seed_repo and not (pathlib.Path(args.seed_repo) / "rill" / "__init__.py").is_file():
        log(f"{args.seed_repo} holds no rill/__init__.py; not a checkout of lijose/rill")
        return 2
    reps = args.reps or (1 if args.quick else 3)
    status = 0
    if "examples" in workloads:
        status = max(status, bench_examples(args, reps))
    if "seed_script" in workloads:
        status = max(status, bench_seed_script(args, reps))
    return status


if __name__ == "__main__":
    sys.exit(main())
