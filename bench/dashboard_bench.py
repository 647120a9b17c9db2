#!/usr/bin/env python3
"""Dashboard benchmarks in the test browser (Debian chromium driven by Playwright).

    .venv/bin/python bench/dashboard_bench.py [--quick] [--reps N]

dashboard_chart_render_ms_100k: one chart of 100k points drawn by the
dashboard's chart (uPlot 1.6 with our zoom/pan/tooltip plugins, src/charts.js)
against Chart.js 4 with chartjs-plugin-zoom and LTTB decimation (the seed's
choice) on the same points, in the same page; also Chart.js without decimation.
Medians over --reps, one JSON line; ratio = Chart.js ms / ours (bigger is better).
The engine-backed measurements (first render, heap growth) run from
bench/dashboard_live_bench.py once a server is available.
"""
import argparse
import json
import pathlib
import statistics
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGE = ROOT / "dashboard" / "dist" / "bench" / "index.html"
CHROMIUM = "/usr/lib/chromium/chromium"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=0)
    ap.add_argument("--points", type=int, default=100_000)
    args = ap.parse_args()
    reps = args.reps or (3 if args.quick else 7)
    if not PAGE.exists():
        print(f"dashboard_bench: {PAGE} missing: run scripts/setup", file=sys.stderr)
        return 1
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True)
        page = browser.new_page(viewport={"width": 1000, "height": 800})
        page.goto(PAGE.as_uri())
        page.wait_for_function("typeof window.renderDashboardChart === 'function'")
        # Warm both code paths once (JIT, font caches), then interleave.
        page.evaluate("async n => { await renderChartJs(n); await renderDashboardChart(n); }", 1000)
        chartjs, ours, chartjs_nodec = [], [], []
        for _ in range(reps):
            ours.append(page.evaluate("n => renderDashboardChart(n)", args.points))
            chartjs.append(page.evaluate("n => renderChartJs(n, true)", args.points))
            chartjs_nodec.append(page.evaluate("n => renderChartJs(n, false)", args.points))
        version = browser.version
        browser.close()
    med = statistics.median
    line = {
        "name": "dashboard_chart_render_ms_100k", "value": round(med(ours), 2), "unit": "ms",
        "library": "uplot 1.6 + rill zoom/pan/tooltip plugins (the dashboard's)",
        "baseline": "chartjs_4_zoom_lttb", "baseline_value": round(med(chartjs), 2),
        "ratio": round(med(chartjs) / med(ours), 2),
        "chartjs_without_decimation_ms": round(med(chartjs_nodec), 2),
        "points": args.points, "reps": reps, "browser": f"chromium {version}",
    }
    print(json.dumps(line), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
