#!/usr/bin/env python3
"""Python-level benchmarks: examples/benchmark_streams.py through `rills`, and
through the pure-Python Rill (github lijose/rill) as the baseline when given.

    .venv/bin/python bench/py_bench.py [--seed-repo PATH] [--quick] [--reps N] [--sizes 1k,10k,1m]

bench/run calls it with --seed-repo "$RILL_SEED_REPO" when that variable is
set, and without it otherwise.

Each repetition runs `examples/benchmark_streams.py --json --impl rills` and,
with --seed-repo, `--impl seed` (the pure-Python package `rill` imported from
PATH; nothing of it is copied here), each in its own process, on the same
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
"""
import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed-repo", default=None, help="checkout of github lijose/rill")
    parser.add_argument("--quick", action="store_true", help="1K and 10K products, one repetition")
    parser.add_argument("--reps", type=int, default=None, help="repetitions (default 3, quick 1)")
    parser.add_argument("--sizes", default=None, help="product counts, e.g. 1k,10k,1m")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per run")
    args = parser.parse_args()
    if args.seed_repo and not (pathlib.Path(args.seed_repo) / "rill" / "__init__.py").is_file():
        log(f"{args.seed_repo} holds no rill/__init__.py; not a checkout of lijose/rill")
        return 2
    reps = args.reps or (1 if args.quick else 3)
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


if __name__ == "__main__":
    sys.exit(main())
