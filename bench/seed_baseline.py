#!/usr/bin/env python3
"""HOOK (to be filled in by the Python side): the pure-Python Rill as a baseline.

bench/run calls this script only when the environment variable RILL_SEED_REPO
points at a checkout of the pure-Python Rill (github lijose/rill):

    .venv/bin/python bench/seed_baseline.py --seed-repo PATH [--quick]

Contract:
  * Run the bench/run workloads (see bench/upsert_bench.cc, append_bench.cc,
    query_bench.cc for the exact data: schema key int64 | price float64 |
    region string (16 values) | qty int64; 10,000-row batches of random existing
    keys upserted into a table preloaded with N distinct keys) through the seed's
    `rills` package imported from PATH, and through this repository's `rills`
    package (C++ core) on the same batches in the same process, interleaving
    repetitions and reporting medians.
  * Print one JSON object per measurement on its own line on stdout, e.g.
      {"name": "upsert_rows_per_s_keys_1m", "value": <rills C++>, "unit": "rows/s",
       "baseline": "seed_pure_python_rill", "baseline_value": <seed>,
       "ratio": <value / baseline_value, bigger is better for us>}
    Progress goes to stderr. Exit 0 on success.
  * --quick: a subset that finishes in about a minute.

Until it is implemented the script exits with status 3, which bench/run reports
as "not implemented yet" rather than as a failure.
"""
import argparse
import sys


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed-repo", required=True, help="checkout of lijose/rill")
    parser.add_argument("--quick", action="store_true", help="fast subset")
    parser.parse_args()
    print("seed_baseline.py: not implemented yet (hook for the Python side)", file=sys.stderr)
    return 3


if __name__ == "__main__":
    sys.exit(main())
