"""The live dashboard in a real browser: Debian's chromium driven by Playwright,
against real engines serving on 127.0.0.1 (issue 11).

Screenshots of every view are saved under build/test-artifacts/dashboard/.
"""
import contextlib
import http.server
import json
import os
import pathlib
import socket
import threading
import time
import urllib.request

import pyarrow as pa
import pytest

import rills
from conftest import require_module, requires

playwright = require_module("playwright.sync_api")
CHROMIUM = "/usr/lib/chromium/chromium"
ROOT = pathlib.Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "build" / "test-artifacts" / "dashboard"
DIST = ROOT / "dashboard" / "dist" / "app.js"

pytestmark = [
    requires(not os.path.exists(CHROMIUM), "chromium is installed by scripts/setup"),
    requires(not DIST.exists(), "the dashboard is bundled by scripts/setup"),
]

TOKEN = "dashboard-test-token"

# Counts Web Audio oscillators the page starts (the sound test observes them).
AUDIO_SPY = """
(() => {
  window.__audio = {oscillators: 0};
  const Orig = window.AudioContext;
  if (!Orig) return;
  window.AudioContext = class extends Orig {
    createOscillator() { window.__audio.oscillators++; return super.createOscillator(); }
  };
})();
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def make_engine(tmp_path, name="orders", tag="a"):
    # conftest keeps serving on 127.0.0.1 with a free port; a restart reuses it.
    eng = rills.RillEngine(trigger_interval_ms=100, quack_address="quack:127.0.0.1:0",
                           quack_token=TOKEN, metrics_path=str(tmp_path / f"metrics_{tag}.db"),
                           metrics_flush_interval_seconds=0.25, allow_private_webhooks=True)
    eng.register_table(name, schema=rills.schema(
        [("order_id", pa.int64()), ("region", pa.string()), ("amount", pa.float64())],
        primary_key="order_id", mode="snapshot"))
    conn = rills.MemoryConnector(target_table=name)
    eng.add_connector(conn)
    conn.push({"order_id": [1, 2, 3, 4], "region": ["EU", "US", "EU", "APAC"],
               "amount": [120.5, 99.0, 410.25, 42.0]})
    eng.add_dashboard_scheduled_query(name="Max Order Amount",
                                      sql=f"SELECT MAX(amount) AS max_amount FROM {name}",
                                      interval_seconds=0.5, chart_type="bar", x_col="ts",
                                      y_col="max_amount")
    eng.start()
    return eng, conn


def base_of(eng):
    return "http://" + eng.quack_address[len("quack:"):]


@pytest.fixture
def server(tmp_path):
    eng, conn = make_engine(tmp_path)
    yield {"engine": eng, "connector": conn, "base": base_of(eng)}
    eng.stop()
    eng.close()


@pytest.fixture(scope="module")
def browser():
    with playwright.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True)
        yield b
        b.close()


@pytest.fixture
def page(browser):
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    ctx.add_init_script(AUDIO_SPY)
    pg = ctx.new_page()
    errors = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.errors = errors
    yield pg
    ctx.close()


def shot(page, name):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


def api(base, method, path, body=None, token=TOKEN):
    req = urllib.request.Request(base + path, method=method,
                                 data=None if body is None else json.dumps(body).encode(),
                                 headers={"Authorization": f"Bearer {token}",
                                          "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        text = r.read().decode()
        return json.loads(text) if text else None


def open_dashboard(page, server):
    page.goto(f"{server['base']}/?token={TOKEN}")
    page.wait_for_selector("#shell:not([hidden])", timeout=10_000)


def test_token_from_url_is_kept_for_the_session_and_dropped_from_the_address_bar(page, server):
    open_dashboard(page, server)
    assert "token" not in page.url
    assert page.evaluate("sessionStorage.length") >= 1
    page.reload()
    page.wait_for_selector("#shell:not([hidden])", timeout=10_000)
    assert not page.errors


def test_wrong_token_is_refused_with_a_clear_message(page, server):
    page.goto(f"{server['base']}/?token=wrong")
    page.wait_for_selector("#connect-screen:not([hidden])", timeout=10_000)
    page.wait_for_function("document.querySelector('#connect-error').textContent.includes('Wrong token')")
    page.fill("#connect-token", TOKEN)
    page.click("#connect-button")
    page.wait_for_selector("#shell:not([hidden])", timeout=10_000)


def test_unreachable_server_says_so(page, server):
    page.goto(f"{server['base']}/?token={TOKEN}")
    page.wait_for_selector("#shell:not([hidden])")
    page.click("#add-tab")
    page.fill("#add-address", f"127.0.0.1:{free_port()}")
    page.fill("#add-token", "x")
    page.click("#add-connect")
    page.wait_for_function("document.querySelector('#add-error').textContent.includes('unreachable')", timeout=10_000)


def test_kpi_card_shows_the_sql_result_and_views_render(page, server):
    open_dashboard(page, server)
    expected = server["engine"].query_sql("SELECT MAX(amount) AS m FROM orders").to_pylist()[0]["m"]
    card = page.locator('.kpi-card[data-kpi="Max Order Amount"] .kpi-value')
    card.wait_for(timeout=10_000)
    page.wait_for_function(
        "v => Number(document.querySelector('.kpi-card[data-kpi=\"Max Order Amount\"] .kpi-value').dataset.raw) === v",
        arg=expected, timeout=10_000)
    assert card.text_content() == f"${expected:,.2f}"
    # Infrastructure: host CPU and memory tiles and the history chart get data.
    page.wait_for_function("window.__rill.charts.get('system').pointsDrawn > 0", timeout=10_000)
    assert page.locator("#tile-mem .tile-value").text_content().endswith("%")
    page.wait_for_function("document.querySelectorAll('#tables-table tbody tr').length >= 1", timeout=10_000)
    shot(page, "console")
    for view in ("queries", "rules", "alerts"):
        page.click(f'button.nav[data-view="{view}"]')
        page.wait_for_selector(f"#view-{view}:not([hidden])")
        shot(page, view)
    assert not page.errors


def test_pushed_alert_appears_with_badges_toast_and_sound(page, server):
    open_dashboard(page, server)
    page.click('button.nav[data-view="alerts"]')
    api(server["base"], "POST", "/api/v1/alerts",
        {"severity": "error", "message": "payment gateway down", "detail": "trace here"})
    item = page.locator("li.alert", has_text="payment gateway down")
    item.wait_for(timeout=10_000)  # pushed over the WebSocket, no reload
    assert "🔴" in item.locator(".badge.sev").text_content()
    assert item.locator(".badge.src").text_content() == "User"
    page.locator(".toast.sev-error", has_text="payment gateway down").wait_for(timeout=3_000)
    assert page.evaluate("window.__audio.oscillators") > 0
    item.click()
    assert page.locator("li.alert pre.alert-detail", has_text="trace here").is_visible()
    # Filters.
    server["engine"].alert("all good")
    page.locator("li.alert", has_text="all good").wait_for(timeout=5_000)
    page.click('button.filter[data-filter="Errors"]')
    assert page.locator("li.alert", has_text="all good").count() == 0
    assert page.locator("li.alert", has_text="payment gateway down").count() == 1
    page.click('button.filter[data-filter="All"]')
    page.click("#alerts-clear")
    assert page.locator("li.alert").count() == 0
    # Toasts close themselves.
    page.wait_for_function("document.querySelectorAll('.toast').length === 0", timeout=8_000)


def test_unseen_alert_count_pulses_until_viewed(page, server):
    open_dashboard(page, server)
    server["engine"].warn("queue backlog")
    page.wait_for_selector("#unseen-count.pulse:not([hidden])", timeout=5_000)
    page.click('button.nav[data-view="alerts"]')
    page.wait_for_selector("#unseen-count[hidden]", state="attached")


def test_custom_query_to_chart_and_csv(page, server):
    open_dashboard(page, server)
    page.click('button.nav[data-view="queries"]')
    page.fill("#query-sql", "SELECT region, sum(amount) AS revenue FROM orders GROUP BY region ORDER BY region")
    page.click("#run-query")
    page.wait_for_function("document.querySelectorAll('#query-result tbody tr').length === 3", timeout=10_000)
    cells = page.locator("#query-result tbody tr").first.locator("td").all_text_contents()
    assert cells[0] == "APAC" and float(cells[1]) == 42.0
    page.select_option("#chart-type", "bar")
    page.select_option("#chart-x", "region")
    page.select_option("#chart-y", "revenue")
    page.click("#draw-chart")
    page.wait_for_function("window.__rill.charts.get('query').pointsDrawn === 3")
    with page.expect_download() as dl:
        page.click("#export-csv")
    text = pathlib.Path(dl.value.path()).read_text()
    assert text.splitlines()[0] == "region,revenue"
    assert len(text.splitlines()) == 4
    shot(page, "query_chart")


def test_zoom_changes_the_visible_range(page, server):
    open_dashboard(page, server)
    page.wait_for_function("window.__rill.charts.get('system').pointsDrawn > 2", timeout=15_000)
    before = page.evaluate("window.__rill.charts.get('system').visibleRange()")
    box = page.locator("#view-console .chart-box.tall .u-over").bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.wheel(0, -400)
    page.wait_for_function("window.__rill.charts.get('system').zoomed")
    after = page.evaluate("window.__rill.charts.get('system').visibleRange()")
    assert after["max"] - after["min"] < before["max"] - before["min"]


@contextlib.contextmanager
def local_http_server(handler):
    """Serve `handler` on 127.0.0.1 from a thread; yields the port."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield httpd.server_address[1]
    finally:
        httpd.shutdown()


class Receiver(http.server.BaseHTTPRequestHandler):
    """Records the JSON body of every POST (a webhook's receiving end)."""
    bodies = []

    def do_POST(self):
        n = int(self.headers.get("Content-Length", 0))
        Receiver.bodies.append(json.loads(self.rfile.read(n) or b"null"))
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args):
        pass


def test_rule_created_in_the_page_fires_on_the_server(page, server):
    Receiver.bodies = []
    with local_http_server(Receiver) as port:
        open_dashboard(page, server)
        page.click('button.nav[data-view="rules"]')
        page.fill("#webhook-url", f"http://127.0.0.1:{port}/hook")
        page.select_option("#webhook-format", "custom")
        page.check("#webhook-enabled")
        page.fill("#rule-name", "Big order")
        page.fill("#rule-metric", "Max Order Amount")
        page.select_option("#rule-operator", ">")
        page.fill("#rule-threshold", "100")
        page.fill("#rule-cooldown", "1")
        page.check("#rule-webhook")
        page.click("#rule-save")
        page.locator('#rules-table tr[data-rule="Big order"]').wait_for(timeout=5_000)
        rules = api(server["base"], "GET", "/api/v1/rules")["rules"]
        rule = next(r for r in rules if r["name"] == "Big order")
        assert rule["op"] == ">" and rule["threshold"] == 100 and rule["webhook"].endswith("/hook")
        page.click('button.nav[data-view="alerts"]')
        page.locator('li.alert[data-kind="Rule"]').first.wait_for(timeout=10_000)
        deadline = time.time() + 10
        while not Receiver.bodies and time.time() < deadline:
            time.sleep(0.1)
        assert Receiver.bodies, "the rule's webhook was not delivered"
        shot(page, "rule_fired")


def test_offline_tab_turns_grey_and_recovers_and_a_second_server_is_independent(page, server, tmp_path):
    eng2, _ = make_engine(tmp_path, name="orders", tag="b")
    port2 = int(eng2.quack_address.rsplit(":", 1)[1])
    try:
        open_dashboard(page, server)
        page.click("#add-tab")
        page.fill("#add-address", f"quack:127.0.0.1:{port2}")
        page.fill("#add-token", TOKEN)
        page.click("#add-connect")
        tab2 = page.locator(f'.tab[data-server="http://127.0.0.1:{port2}"]')
        tab2.wait_for(timeout=5_000)
        page.wait_for_function(f"document.querySelector('.tab[data-server=\"http://127.0.0.1:{port2}\"]').classList.contains('online')", timeout=10_000)
        eng2.stop()
        page.wait_for_function(f"document.querySelector('.tab[data-server=\"http://127.0.0.1:{port2}\"]').classList.contains('offline')", timeout=10_000)
        assert "(Offline)" in tab2.text_content()
        assert tab2.get_attribute("title")
        first = page.locator(f'.tab[data-server="{server["base"]}"]')
        assert "offline" not in first.get_attribute("class")
        shot(page, "offline_tab")
        eng2.start()
        page.wait_for_function(f"document.querySelector('.tab[data-server=\"http://127.0.0.1:{port2}\"]').classList.contains('online')", timeout=20_000)
    finally:
        eng2.stop()
        eng2.close()
