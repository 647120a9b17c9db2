#!/usr/bin/env python3
"""Dashboard benchmarks in the test browser (Debian chromium driven by Playwright).

    .venv/bin/python bench/dashboard_bench.py [--quick] [--reps N] [--only WHAT] [--minutes M]

One JSON line per measurement (stdout); progress on stderr.

dashboard_chart_render_ms_100k: one chart of 100k points drawn by the
dashboard's chart (uPlot 1.6 with our zoom/pan/tooltip plugins, src/charts.js)
against Chart.js 4 with chartjs-plugin-zoom and LTTB decimation (the seed's
choice) on the same points, in the same page; also Chart.js without decimation.
Medians over --reps; ratio = Chart.js ms / ours (bigger is better).

dashboard_first_render_ms: a real engine on 127.0.0.1 (orders streaming, three
KPI queries: line, bar, scatter) with a few seconds of history; from navigation
to `/?token=...` until every KPI card shows a value and every chart (KPIs and
the CPU/memory history) has drawn data, measured in the page
(performance.now(), whose origin is the navigation). Fresh browser context per
repetition; median. Target <= 1,000 ms.

dashboard_heap_growth_10min: the same engine with live updates (metrics frames
at 1 Hz, KPI values every second, an alert every 10 s with its toast and sound,
a rule firing), the page switching between all four views every 5 s; the JS
heap after a forced GC at the end against after 1 minute. Target <= 1.10. The
full measurement is 10 minutes (--minutes 10, the default here); bench/run uses
a shorter run (its output says how long in "minutes" and "full_run").

--only chart,first_render,heap picks measurements (default: all three).
"""
import argparse
import json
import os
import pathlib
import statistics
import sys
import tempfile
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGE = ROOT / "dashboard" / "dist" / "bench" / "index.html"
APP = ROOT / "dashboard" / "dist" / "app.js"
CHROMIUM = "/usr/lib/chromium/chromium"
TOKEN = "dashboard-bench-token"
KPIS = [
    ("Total Revenue ($)", "SELECT SUM(amount) AS total_revenue FROM orders", "line", "total_revenue"),
    ("Max Order Amount", "SELECT MAX(amount) AS max_amount FROM orders", "bar", "max_amount"),
    ("Order Count", "SELECT COUNT(*) AS order_count FROM orders", "scatter", "order_count"),
]

# Set in the page before the app runs: the time (ms since navigation) when every
# KPI card has a value and every chart has drawn data.
FIRST_RENDER_PROBE = """
(() => {
  const want = %d;
  const check = () => {
    const r = window.__rill;
    if (r) {
      const cards = Array.from(document.querySelectorAll('.kpi-card .kpi-value'))
        .filter((v) => Number.isFinite(Number(v.dataset.raw)));
      const charts = Array.from(r.charts.values());
      const kpiCharts = charts.filter((c) => String(c.id).startsWith('kpi:'));
      if (cards.length >= want && kpiCharts.length >= want && charts.length > want &&
          charts.every((c) => c.pointsDrawn > 0)) {
        window.__firstRenderMs = performance.now();
        return;
      }
    }
    requestAnimationFrame(check);
  };
  requestAnimationFrame(check);
})();
"""


def log(msg):
    print(f"[dashboard_bench] {msg}", file=sys.stderr, flush=True)


def chart_render(browser, reps, points):
    page = browser.new_page(viewport={"width": 1000, "height": 800})
    page.goto(PAGE.as_uri())
    page.wait_for_function("typeof window.renderDashboardChart === 'function'")
    # Warm both code paths once (JIT, font caches), then interleave.
    page.evaluate("async n => { await renderChartJs(n); await renderDashboardChart(n); }", 1000)
    chartjs, ours, chartjs_nodec = [], [], []
    for _ in range(reps):
        ours.append(page.evaluate("n => renderDashboardChart(n)", points))
        chartjs.append(page.evaluate("n => renderChartJs(n, true)", points))
        chartjs_nodec.append(page.evaluate("n => renderChartJs(n, false)", points))
    page.close()
    med = statistics.median
    return {
        "name": "dashboard_chart_render_ms_100k", "value": round(med(ours), 2), "unit": "ms",
        "library": "uplot 1.6 + rill zoom/pan/tooltip plugins (the dashboard's)",
        "baseline": "chartjs_4_zoom_lttb", "baseline_value": round(med(chartjs), 2),
        "ratio": round(med(chartjs) / med(ours), 2),
        "chartjs_without_decimation_ms": round(med(chartjs_nodec), 2),
        "points": points, "reps": reps, "browser": f"chromium {browser.version}",
    }


class DemoEngine:
    """A served engine with streaming orders, KPI queries, alerts and a rule."""

    def __init__(self, tmp):
        import pyarrow as pa
        import rills

        self.pa = pa
        self.engine = rills.RillEngine(
            trigger_interval_ms=200, quack_address="quack:127.0.0.1:0", quack_token=TOKEN,
            metrics_path=str(pathlib.Path(tmp) / "metrics.db"), metrics_flush_interval_seconds=1.0)
        self.engine.register_table("orders", schema=rills.schema(
            [("order_id", pa.int64()), ("region", pa.string()), ("amount", pa.float64())],
            primary_key="order_id", mode="snapshot"))
        self.connector = rills.MemoryConnector(target_table="orders")
        self.engine.add_connector(self.connector)
        for name, sql, chart, y in KPIS:
            self.engine.add_dashboard_scheduled_query(name=name, sql=sql, interval_seconds=1.0,
                                                      chart_type=chart, x_col="ts", y_col=y)
        self.engine.add_alert_rule(name="Large order", metric="Max Order Amount", op=">",
                                   threshold=450, cooldown_seconds=30, severity="warning")
        self.stop_event = threading.Event()
        self.thread = threading.Thread(target=self._produce, daemon=True)
        self.engine.start()
        self.thread.start()
        self.base = "http://" + self.engine.quack_address[len("quack:"):]

    def _produce(self):
        next_id, tick = 0, 0
        while not self.stop_event.wait(0.1):
            ids = list(range(next_id, next_id + 50))
            next_id += 50
            tick += 1
            self.connector.push({"order_id": ids, "region": [("EU", "US", "APAC")[i % 3] for i in ids],
                                 "amount": [float((i * 7919) % 500) for i in ids]})
            if tick % 100 == 0:  # every 10 s
                self.engine.warn("demo backlog", detail=f"{next_id} orders so far")

    def close(self):
        self.stop_event.set()
        self.thread.join(timeout=5)
        self.engine.stop()
        self.engine.close()


def first_render(browser, server, reps):
    url = f"{server.base}/?token={TOKEN}"
    times = []
    for i in range(reps + 1):  # the first load warms the server's caches and is not counted
        ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
        ctx.add_init_script(FIRST_RENDER_PROBE % len(KPIS))
        page = ctx.new_page()
        page.goto(url)
        page.wait_for_function("window.__firstRenderMs !== undefined", timeout=30_000)
        if i > 0:
            times.append(page.evaluate("window.__firstRenderMs"))
        ctx.close()
    value = statistics.median(times)
    return {"name": "dashboard_first_render_ms", "value": round(value, 1), "unit": "ms",
            "target_ms": 1000, "meets_target": value <= 1000, "min": round(min(times), 1),
            "max": round(max(times), 1), "reps": reps, "kpis": len(KPIS),
            "what": "navigation to every KPI card valued and every chart drawn, loopback",
            "load_average_1m": round(os.getloadavg()[0], 2), "cpus": os.cpu_count()}


def heap_used(cdp):
    cdp.send("HeapProfiler.collectGarbage")
    cdp.send("HeapProfiler.collectGarbage")
    return cdp.send("Runtime.getHeapUsage")["usedSize"]


def heap_growth(browser, server, minutes):
    baseline_at = min(60.0, minutes * 60 / 2)
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = ctx.new_page()
    cdp = ctx.new_cdp_session(page)
    page.goto(f"{server.base}/?token={TOKEN}")
    page.wait_for_selector("#shell:not([hidden])", timeout=30_000)
    views = ["console", "queries", "rules", "alerts"]
    start = time.monotonic()
    end = start + minutes * 60
    baseline = None
    step = 0
    by_minute = []
    while time.monotonic() < end:
        page.click(f'button.nav[data-view="{views[step % len(views)]}"]')
        step += 1
        elapsed = time.monotonic() - start
        if baseline is None and elapsed >= baseline_at:
            baseline = heap_used(cdp)
            log(f"heap after {baseline_at:.0f} s: {baseline / 1e6:.2f} MB")
        if elapsed >= 60 * (len(by_minute) + 1):  # the trend: a plateau, or a leak
            by_minute.append(heap_used(cdp))
            log(f"heap at minute {len(by_minute)}: {by_minute[-1] / 1e6:.3f} MB")
        page.wait_for_timeout(5000)
    final = heap_used(cdp)
    log(f"heap after {minutes} min: {final / 1e6:.2f} MB")
    frames = page.evaluate("window.__rill.app.active().series.cpu.length")
    ctx.close()
    ratio = final / baseline
    return {"name": "dashboard_heap_growth_10min", "value": round(ratio, 3), "unit": "ratio",
            "target": 1.10, "meets_target": ratio <= 1.10, "minutes": minutes,
            "baseline_after_s": baseline_at, "full_run": minutes >= 10,
            "heap_baseline_bytes": baseline, "heap_end_bytes": final, "cpu_points_held": frames,
            "heap_by_minute_bytes": by_minute,
            "note": ("full 10-minute run" if minutes >= 10 else
                     f"shortened to {minutes} min; the full run is "
                     "bench/dashboard_bench.py --only heap --minutes 10")}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=0)
    ap.add_argument("--points", type=int, default=100_000)
    ap.add_argument("--only", default="chart,first_render,heap")
    ap.add_argument("--minutes", type=float, default=10.0,
                    help="length of the heap-growth run (the target is stated for 10)")
    args = ap.parse_args()
    reps = args.reps or (3 if args.quick else 7)
    only = set(args.only.split(","))
    unknown = only - {"chart", "first_render", "heap"}
    if unknown:
        print(f"dashboard_bench: unknown --only {sorted(unknown)}", file=sys.stderr)
        return 2
    if not PAGE.exists() or not APP.exists():
        print(f"dashboard_bench: {PAGE.parent.parent} missing: run scripts/setup", file=sys.stderr)
        return 1
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True)
        if "chart" in only:
            print(json.dumps(chart_render(browser, reps, args.points)), flush=True)
        if only & {"first_render", "heap"}:
            with tempfile.TemporaryDirectory() as tmp:
                server = DemoEngine(tmp)
                try:
                    time.sleep(4)  # a few seconds of history for the charts to load
                    if "first_render" in only:
                        print(json.dumps(first_render(browser, server, reps)), flush=True)
                    if "heap" in only:
                        print(json.dumps(heap_growth(browser, server, args.minutes)), flush=True)
                finally:
                    server.close()
        browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
