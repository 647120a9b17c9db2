"""The live dashboard's expected behaviour in a real browser (issue 11, second
part): metrics-database sizes, time ranges and server-side down-sampling,
keyboard use, hidden-tab pause, tokens kept per server, toasts, sound and rule
form defaults, memory-bar colours. Same set-up as test_dashboard.py.
"""
import base64
import http.server
import json
import time
import urllib.parse

import pytest

from test_dashboard import (TOKEN, Receiver, api, browser, local_http_server, open_dashboard, page, pytestmark,  # noqa: F401
                            server, shot)



def test_metrics_database_size_tile_matches_the_server(page, server):
    deadline = time.time() + 10
    now = api(server["base"], "GET", "/api/v1/telemetry")
    while now["metrics_db_file_bytes"] is None and time.time() < deadline:
        time.sleep(0.2)
        now = api(server["base"], "GET", "/api/v1/telemetry")
    assert now["metrics_db_file_bytes"] > 0
    # Both known once the store has flushed, and the same figures as rill_telemetry's.
    assert now["metrics_duckdb_memory_bytes"] is not None
    assert now["values"]["metrics_duckdb_memory_bytes"] == now["metrics_duckdb_memory_bytes"]
    assert now["values"]["metrics_db_file_bytes"] == now["metrics_db_file_bytes"]
    urls = []
    page.on("request", lambda r: urls.append(r.url))
    open_dashboard(page, server)
    page.wait_for_function(
        "/B$/.test(document.querySelector('#tile-metrics-db .tile-value').textContent)", timeout=10_000)
    assert "file + WAL" in page.locator("#tile-metrics-db .tile-sub").text_content()
    assert page.locator("#tile-duck .tile-label").text_content() == "DuckDB live"
    # Per-table freshness and per-connector counts.
    row = page.locator('#tables-table tr[data-table="orders"] td')
    row.first.wait_for(timeout=10_000)
    assert row.nth(4).text_content().endswith("ago") or row.nth(4).text_content() == "just now"
    page.wait_for_function("document.querySelectorAll('#connectors-table tbody tr').length >= 1")
    cells = page.locator("#connectors-table tbody tr").first.locator("td").all_text_contents()
    assert cells[1] == "orders" and cells[2:] == ["0", "0", "0"]
    # Works offline: every request goes to the engine itself (no CDN, no web fonts).
    origin = server["base"].replace("http://", "")
    assert urls and all(urllib.parse.urlparse(u).netloc == origin for u in urls), urls
    assert not page.errors


def test_time_ranges_and_history_down_sampled_to_twice_the_chart_width(page, server):
    requests = []
    page.on("request", lambda r: requests.append(r.url) if "/telemetry/history" in r.url else None)
    open_dashboard(page, server)
    labels = page.locator("#time-range option").all_text_contents()
    assert labels == ["30 s", "60 s", "90 s", "100 s", "180 s", "300 s", "All"]
    assert page.locator("#time-range").input_value() == "90"
    page.wait_for_function("window.__rill.charts.get('system').pointsDrawn > 0", timeout=10_000)
    requests.clear()
    page.select_option("#time-range", label="All")
    deadline = time.time() + 5
    while not requests and time.time() < deadline:
        page.wait_for_timeout(100)
    assert requests, "choosing a longer range reloads the history"
    query = urllib.parse.parse_qs(urllib.parse.urlparse(requests[-1]).query)
    width = page.evaluate("window.__rill.charts.get('system').u.width")
    assert abs(int(query["points"][0]) - 2 * width) <= 0.1 * 2 * width  # about twice the width
    assert "since" not in query  # "All"
    # The server honours it: never more rows than asked for.
    rows = api(server["base"], "GET", "/api/v1/telemetry/history?points=3")
    assert 1 <= len(rows["rows"] if isinstance(rows, dict) else rows) <= 3


def test_keyboard_reaches_navigation_and_zooms_charts(page, server):
    open_dashboard(page, server)
    page.wait_for_function("window.__rill.charts.get('system').pointsDrawn > 2", timeout=15_000)
    # Tab order reaches the navigation; Enter switches the view.
    page.locator("body").focus()
    for _ in range(6):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.dataset.view === 'queries'"):
            break
    assert page.evaluate("document.activeElement.dataset.view") == "queries"
    page.keyboard.press("Enter")
    page.wait_for_selector("#view-queries:not([hidden])")
    page.click('button.nav[data-view="console"]')
    before = page.evaluate("window.__rill.charts.get('system').visibleRange()")
    page.focus("#system-chart")
    page.keyboard.press("+")
    assert page.evaluate("window.__rill.charts.get('system').zoomed")
    after = page.evaluate("window.__rill.charts.get('system').visibleRange()")
    assert after["max"] - after["min"] < before["max"] - before["min"]
    page.keyboard.press("Escape")
    assert not page.evaluate("window.__rill.charts.get('system').zoomed")


def test_live_updates_stop_while_the_tab_is_hidden(page, server):
    open_dashboard(page, server)
    page.wait_for_function("window.__rill.app.servers[0].conn.status === 'online'", timeout=10_000)
    # The history request made on connect must have landed first: it fills the
    # series once, whatever the visibility (only live frames stop when hidden).
    page.wait_for_function("window.__rill.app.active().series.cpu.length > 0", timeout=15_000)
    set_hidden = """h => {
      Object.defineProperty(document, 'hidden', {configurable: true, get: () => h});
      Object.defineProperty(document, 'visibilityState', {configurable: true, get: () => h ? 'hidden' : 'visible'});
      document.dispatchEvent(new Event('visibilitychange'));
    }"""
    page.evaluate(set_hidden, True)
    assert page.evaluate("window.__rill.app.servers[0].conn.ws === null")
    n = page.evaluate("window.__rill.app.active().series.cpu.length")
    page.wait_for_timeout(2500)  # metrics frames arrive at 1 Hz when live
    assert page.evaluate("window.__rill.app.active().series.cpu.length") == n
    page.evaluate(set_hidden, False)
    page.wait_for_function("window.__rill.app.servers[0].conn.ws !== null", timeout=5_000)
    page.wait_for_function(f"window.__rill.app.active().series.cpu.length > {n}", timeout=10_000)


class TokenSpy(http.server.BaseHTTPRequestHandler):
    """A second "server" on 127.0.0.1 that records every Authorization it gets."""
    seen = []

    def _cors(self):
        self.send_header("Access-Control-Allow-Origin", self.headers.get("Origin") or "*")
        self.send_header("Access-Control-Allow-Headers", "Authorization, Content-Type")
        self.send_header("Access-Control-Allow-Methods", "GET, POST, PATCH, DELETE")

    def do_OPTIONS(self):
        self.send_response(204)
        self._cors()
        self.end_headers()

    def do_GET(self):
        TokenSpy.seen.append(str(self.headers))  # Authorization, or the WebSocket subprotocol
        body = json.dumps({"version": "spy"} if self.path.startswith("/api/v1/info") else {}).encode()
        self.send_response(200)
        self._cors()
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_tokens_never_go_to_another_server(page, server):
    TokenSpy.seen = []
    with local_http_server(TokenSpy) as port:
        open_dashboard(page, server)
        page.click("#add-tab")
        page.fill("#add-address", f"127.0.0.1:{port}")
        page.fill("#add-token", "spy-token")
        page.click("#add-connect")
        page.locator(f'.tab[data-server="http://127.0.0.1:{port}"]').wait_for(timeout=5_000)
        page.reload()  # the saved tabs reconnect, each with its own token
        page.wait_for_selector("#shell:not([hidden])", timeout=10_000)
        page.wait_for_timeout(1500)
        own = base64.urlsafe_b64encode(TOKEN.encode()).decode().rstrip("=")
        assert any("Bearer spy-token" in h for h in TokenSpy.seen)
        assert all(TOKEN not in h and own not in h for h in TokenSpy.seen)


def test_toast_goes_after_six_seconds_and_sound_and_rule_form_defaults(page, server):
    open_dashboard(page, server)
    # When each toast comes and goes, timed in the page.
    page.evaluate("""() => {
      window.__toastLife = [];
      new MutationObserver((records) => {
        for (const r of records) {
          for (const n of r.addedNodes) window.__toastLife.push({text: n.textContent, added: Number(n.dataset.created)});
          for (const n of r.removedNodes) {
            const t = window.__toastLife.find((x) => x.text === n.textContent && x.removed === undefined);
            if (t) t.removed = performance.now();
          }
        }
      }).observe(document.querySelector('#toasts'), {childList: true});
    }""")
    server["engine"].error("disk almost full")
    toast = page.locator(".toast.sev-error", has_text="disk almost full")
    toast.wait_for(timeout=5_000)
    shot(page, "toast")
    toast.wait_for(state="detached", timeout=12_000)
    life = page.evaluate("window.__toastLife.find((t) => t.text.includes('disk almost full'))")
    assert 6_000 <= life["removed"] - life["added"] <= 9_000, life  # 6 s, then a 0.2 s fade
    page.click('button.nav[data-view="rules"]')
    assert page.locator("#rule-cooldown").input_value() == "10"
    slider = page.locator("#sound-duration")
    assert (slider.get_attribute("min"), slider.get_attribute("max")) == ("1", "30")
    slider.fill("30")
    assert page.locator("#sound-duration-label").text_content() == "30 s"
    prefs = json.loads(page.evaluate("localStorage.getItem('rill.dashboard.prefs.v1')"))
    assert prefs["sound"]["durationSeconds"] == 30
    tones = page.locator("#sound-global option").all_text_contents()
    assert tones == ["Classic Beep", "Warning Siren", "Gentle Chime", "Urgent Buzzer"]
    before = page.evaluate("window.__audio ? window.__audio.oscillators : 0")
    page.click("#sound-test")
    assert page.evaluate("window.__audio.oscillators") > before
    page.click("#sound-stop")
    shot(page, "rules")


def test_memory_bar_turns_purple_above_70_and_red_above_85(page, server):
    open_dashboard(page, server)
    page.wait_for_function("document.querySelector('#membar-fill').className.includes('membar-fill ')",
                           timeout=10_000)
    colours = page.evaluate("""() => {
      const el = document.querySelector('#membar-fill');
      const out = {};
      for (const level of ['normal', 'high', 'critical']) {
        el.className = 'membar-fill ' + level;
        out[level] = getComputedStyle(el).backgroundColor;
      }
      return out;
    }""")
    assert colours["high"] == "rgb(168, 85, 247)"  # purple
    assert colours["critical"] == "rgb(248, 113, 113)"  # red
    assert colours["normal"] not in (colours["high"], colours["critical"])


def test_query_scheduled_as_kpi_appears_on_the_console(page, server):
    open_dashboard(page, server)
    page.click('button.nav[data-view="queries"]')
    page.fill("#query-sql", "SELECT count(*) AS order_count FROM orders")
    page.click("#run-query")
    page.wait_for_function("document.querySelectorAll('#query-result tbody tr').length === 1", timeout=10_000)
    page.select_option("#chart-type", "line")
    page.fill("#kpi-name", "Orders so far")
    page.fill("#kpi-interval", "0.5")
    page.click("#schedule-kpi")
    page.wait_for_function("document.querySelector('#query-status').textContent.includes('Scheduled')")
    kpis = api(server["base"], "GET", "/api/v1/kpis")
    kpis = kpis["kpis"] if isinstance(kpis, dict) else kpis
    k = next(k for k in kpis if k["name"] == "Orders so far")
    assert (k["chart_type"], k["x_col"], k["y_col"]) == ("line", "ts", "order_count")
    page.click('button.nav[data-view="console"]')
    page.wait_for_function(
        "Number(document.querySelector('.kpi-card[data-kpi=\"Orders so far\"] .kpi-value')?.dataset.raw) === 4",
        timeout=10_000)
    page.wait_for_function("window.__rill.charts.get('kpi:Orders so far')?.pointsDrawn > 0", timeout=10_000)


def test_webhook_test_delivery_and_sound_toggle(page, server):
    Receiver.bodies = []
    with local_http_server(Receiver) as port:
        open_dashboard(page, server)
        page.click('button.nav[data-view="rules"]')
        page.fill("#webhook-url", f"http://127.0.0.1:{port}/hook")
        page.select_option("#webhook-format", "slack")
        page.check("#webhook-enabled")
        page.click("#webhook-test")
        page.wait_for_function("document.querySelector('#webhook-status').textContent.startsWith('Delivered')",
                               timeout=10_000)
        assert Receiver.bodies and "Rill test delivery" in json.dumps(Receiver.bodies[0])
        # Preferences persist in localStorage.
        prefs = json.loads(page.evaluate("localStorage.getItem('rill.dashboard.prefs.v1')"))
        assert prefs["webhook"]["enabled"] and prefs["webhook"]["url"].endswith("/hook")
        # Sound off: an alert raises a toast but no tone.
        page.uncheck("#sound-enabled")
        before = page.evaluate("window.__audio.oscillators")
        server["engine"].error("quiet please")
        page.locator(".toast", has_text="quiet please").wait_for(timeout=5_000)
        assert page.evaluate("window.__audio.oscillators") == before


def test_business_metric_gets_a_card_formatted_by_kind(page, server):
    server["engine"].register_business_metric("cancelled_ratio", lambda eng: 0.265)
    open_dashboard(page, server)
    card = page.locator('.kpi-card[data-kpi="cancelled_ratio"] .kpi-value')
    card.wait_for(timeout=10_000)
    page.wait_for_function(
        "document.querySelector('.kpi-card[data-kpi=\"cancelled_ratio\"] .kpi-value').textContent === '26.5%'",
        timeout=10_000)
    assert not page.errors


def test_views_are_found_by_their_names_with_unseen_alerts(page, server):
    open_dashboard(page, server)
    server["engine"].warn("backlog growing")
    page.wait_for_selector("#unseen-count.pulse:not([hidden])", timeout=5_000)
    for name in ("Metrics Console", "Custom Queries", "Alert Rules & Settings"):
        assert page.get_by_role("button", name=name, exact=True).count() == 1
    page.get_by_role("button", name="Alert Logs", exact=True).click()
    page.wait_for_selector("#view-alerts:not([hidden])")
    page.get_by_role("button", name="Warnings", exact=True).click()
    page.locator("li.alert", has_text="backlog growing").wait_for(timeout=5_000)
    shot(page, "alerts")


def test_kpi_chart_by_x_col_and_y_col_rows(page, server):
    server["engine"].add_dashboard_scheduled_query(
        name="Revenue by region",
        sql="SELECT region, SUM(amount) AS revenue FROM orders GROUP BY region ORDER BY region",
        interval_seconds=0.5, chart_type="bar", x_col="region", y_col="revenue")
    open_dashboard(page, server)
    page.wait_for_function(
        "window.__rill.charts.get('kpi:Revenue by region')?.pointsDrawn === 3", timeout=10_000)
    chart = page.evaluate("(() => { const c = window.__rill.charts.get('kpi:Revenue by region');"
                          " return {labels: c.labels, ys: c.points[0], type: c.type, x: c.xKind}; })()")
    expected = server["engine"].query_sql(
        "SELECT region, SUM(amount) AS revenue FROM orders GROUP BY region ORDER BY region").to_pylist()
    assert chart["labels"] == [r["region"] for r in expected]
    assert chart["ys"] == [r["revenue"] for r in expected]
    assert (chart["type"], chart["x"]) == ("bar", "category")
    shot(page, "console_kpi_rows")


def test_pause_resume_and_disconnect(page, server):
    open_dashboard(page, server)
    page.wait_for_function("window.__rill.app.servers[0].conn.status === 'online'", timeout=10_000)
    page.get_by_role("button", name="Pause", exact=True).click()
    assert page.evaluate("window.__rill.app.servers[0].conn.ws === null")
    n = page.evaluate("window.__rill.app.active().series.cpu.length")
    page.wait_for_timeout(2500)
    assert page.evaluate("window.__rill.app.active().series.cpu.length") == n
    page.get_by_role("button", name="Resume", exact=True).click()
    page.wait_for_function(f"window.__rill.app.active().series.cpu.length > {n}", timeout=10_000)
    assert "quack:127.0.0.1:" in page.locator("#server-address").text_content()
    page.get_by_role("button", name="Disconnect", exact=True).click()
    page.wait_for_selector("#connect-screen:not([hidden])")
    assert page.evaluate("sessionStorage.length") == 0


def test_memory_percent_rule_fires_on_the_server(server):
    # The rule form's "Memory %" (memory_percent = host used / total x 100).
    api(server["base"], "POST", "/api/v1/rules",
        {"name": "Memory watch", "metric": "memory_percent", "op": ">", "threshold": 0,
         "cooldown_seconds": 10, "severity": "info"})
    deadline = time.time() + 10
    fired = []
    while not fired and time.time() < deadline:
        time.sleep(0.2)
        rows = api(server["base"], "GET", "/api/v1/alerts?source=rule")
        fired = rows["rows"] if isinstance(rows, dict) else rows
    assert fired and "memory_percent" in fired[0]["message"]
    values = api(server["base"], "GET", "/api/v1/telemetry")["values"]
    expected = 100 * values["used_memory"] / values["total_memory"]
    assert abs(values["memory_percent"] - expected) < 1e-6
