"""The dashboard's Pipeline view in a real browser (issue 26): `rill serve` with a
pipeline of nine objects created over POST /api/v1/sql (one of them a source
that cannot connect), drawn by the page from the WebSocket's `pipeline`
channel. The graph the page draws is checked against GET /api/v1/pipeline,
which is checked against SHOW over SQL; the failing source is red; a click
shows a node's DDL and counters; rows ingested make an edge's rate non-zero.

The screenshot is saved under build/test-artifacts/dashboard/pipeline.png.
"""
import json
import os
import pathlib
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from conftest import requires
# The browser fixtures of the dashboard tests (chromium driven by Playwright).
from test_dashboard import ARTIFACTS, CHROMIUM, DIST, browser, page  # noqa: F401

ROOT = pathlib.Path(__file__).resolve().parents[2]
RILL = pathlib.Path(os.environ.get("RILL_BIN", ROOT / "build" / "release" / "apps" / "rill" / "rill"))
TOKEN = "pipeline-view-reader"
ADMIN = "pipeline-view-admin"

pytestmark = [
    requires(not RILL.exists(), f"{RILL} not built"),
    requires(not os.path.exists(CHROMIUM), "chromium is installed by scripts/setup"),
    requires(not DIST.exists(), "the dashboard is bundled by scripts/setup"),
]

# SHOW <what> over SQL lists the catalog's objects of these kinds.
SHOW = ("TABLES", "SOURCES", "VIEWS", "WINDOWS", "SINKS", "KPIS", "ALERT RULES")


@pytest.fixture
def serve(tmp_path):
    """`rill serve` with no pipeline file, serving this tree's dashboard bundle."""
    out_path, err_path = tmp_path / "serve.out", tmp_path / "serve.err"
    env = dict(os.environ, RILL_DASHBOARD_DIR=str(DIST.parent))
    with open(out_path, "w") as out, open(err_path, "w") as err:
        proc = subprocess.Popen([str(RILL), "serve", "--listen", "127.0.0.1:0", "--token", TOKEN,
                                 "--admin-token", ADMIN, "--metrics", ":memory:"],
                                stdout=out, stderr=err, env=env)
    address = None
    deadline = time.time() + 30
    while address is None and time.time() < deadline and proc.poll() is None:
        for line in out_path.read_text().splitlines():
            if "listening on " in line:
                address = line.split("listening on ", 1)[1].strip()
        time.sleep(0.05)
    if address is None:
        proc.kill()
        proc.wait(timeout=10)
        raise AssertionError(f"rill serve did not start: {err_path.read_text()[-3000:]}")
    yield {"base": f"http://{address}", "tmp": tmp_path}
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def request(base, method, path, body=None, token=TOKEN, content_type="application/json"):
    data = body.encode() if isinstance(body, str) else body
    req = urllib.request.Request(base + path, method=method, data=data,
                                 headers={"Authorization": f"Bearer {token}", "Content-Type": content_type})
    try:
        with urllib.request.urlopen(req, timeout=15) as r:
            text = r.read().decode()
    except urllib.error.HTTPError as e:
        raise AssertionError(f"{method} {path} -> {e.code}: {e.read().decode()}") from None
    return json.loads(text) if text else None


def sql(base, statement, token=ADMIN):
    return request(base, "POST", "/api/v1/sql", statement, token=token, content_type="text/plain")


def wait_for(predicate, timeout, what):
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def create_pipeline(base, sink_dir):
    statements = [
        "CREATE TABLE orders (id BIGINT NOT NULL, region TEXT, price DOUBLE, PRIMARY KEY (id))",
        "CREATE SOURCE orders_in INTO orders WITH (connector = 'json_stream')",
        "CREATE MATERIALIZED VIEW by_region WITH (interval_seconds = 0.5) AS "
        "SELECT region, count(*) AS n FROM orders GROUP BY region",
        "CREATE STREAM VIEW big WITH (source = 'orders', max_rows = 1000) AS SELECT * FROM orders WHERE price > 10",
        "CREATE WINDOW per_min WITH (source = 'orders', window = 'tumbling', size_seconds = 60, "
        "aggregations = 'n=count(*)')",
        f"CREATE SINK files FROM by_region WITH (connector = 'file', path = '{sink_dir}', format = 'ndjson')",
        "CREATE KPI total AS SELECT count(*) AS n FROM orders",
        "CREATE ALERT RULE r WITH (metric = 'total', op = '>', threshold = 10)",
        # Nothing listens on port 1: the source counts connection errors.
        "CREATE SOURCE broken INTO orders WITH (connector = 'websocket', uri = 'ws://127.0.0.1:1/nothing')",
    ]
    for s in statements:
        reply = sql(base, s)
        assert reply["command"].startswith("CREATE"), (s, reply)


def dom_graph(page):
    return page.evaluate("""() => ({
      nodes: [...document.querySelectorAll('#view-pipeline g.pipeline-node')].map((g) => g.dataset.id),
      edges: [...document.querySelectorAll('#view-pipeline .pipeline-edge')].map((g) => [g.dataset.from, g.dataset.to]),
    })""")


def test_pipeline_view_draws_the_catalog_live(page, serve):  # noqa: F811
    base = serve["base"]
    sink_dir = serve["tmp"] / "sink"
    sink_dir.mkdir()
    create_pipeline(base, sink_dir)

    # The failing source really fails (the server says so) within a few seconds.
    def broken_status():
        graph = request(base, "GET", "/api/v1/pipeline")
        return next(n for n in graph["nodes"] if n["id"] == "source:broken")["status"] == "error"
    wait_for(broken_status, 10, "source:broken to report status error")

    # GET /api/v1/pipeline lists what SHOW lists over SQL (read-only token).
    graph = request(base, "GET", "/api/v1/pipeline")
    shown = set()
    for what in SHOW:
        for row in sql(base, f"SHOW {what}", token=TOKEN)["rows"]:
            shown.add(f"{row['kind']}:{row['name']}")
    api_ids = {n["id"] for n in graph["nodes"]}
    assert api_ids == shown
    assert len(api_ids) >= 9
    api_edges = {(e["from"], e["to"]) for e in graph["edges"]}
    assert ("source:orders_in", "table:orders") in api_edges
    assert ("materialized view:by_region", "sink:files") in api_edges

    # The page, with the ordinary token, on the Pipeline view.
    page.goto(f"{base}/?token={TOKEN}")
    page.wait_for_selector("#shell:not([hidden])", timeout=10_000)
    page.click('button.nav[data-view="pipeline"]')
    page.wait_for_selector("#view-pipeline:not([hidden])")
    # A loaded machine (CI runs this after the broker and cluster tests) may
    # take a while for the first frame; the status line says what the page has.
    try:
        page.wait_for_function("n => document.querySelectorAll('#view-pipeline g.pipeline-node').length === n",
                               arg=len(api_ids), timeout=30_000)
    except Exception as e:
        status = page.locator("#pipeline-status").text_content()
        raise AssertionError(f"the page drew {dom_graph(page)['nodes']} ({status!r}), "
                             f"the API lists {sorted(api_ids)}") from e
    drawn = dom_graph(page)
    assert set(drawn["nodes"]) == api_ids and len(drawn["nodes"]) == len(api_ids)
    assert {tuple(e) for e in drawn["edges"]} == api_edges
    # Every edge carries a rate label; every node its status class.
    assert page.locator("#view-pipeline .pipeline-edge .pipeline-edge-rate").count() == len(api_edges)
    for n in graph["nodes"]:
        if n["status"] != "error":
            continue
        assert "status-error" in page.locator(f'g.pipeline-node[data-id="{n["id"]}"]').get_attribute("class")
    broken = page.locator('g.pipeline-node[data-id="source:broken"]')
    assert "status-error" in broken.get_attribute("class")
    assert "status-error" not in page.locator('g.pipeline-node[data-id="source:orders_in"]').get_attribute("class")
    # ... and drawn red (the box's outline; a running node's is grey).
    stroke = "id => getComputedStyle(document.querySelector(`g.pipeline-node[data-id='${id}'] .pipeline-box`)).stroke"
    assert page.evaluate(stroke, "source:broken") == "rgb(248, 113, 113)"
    assert page.evaluate(stroke, "source:orders_in") != "rgb(248, 113, 113)"
    # The graph comes over the WebSocket (the status says live, not polling).
    page.wait_for_function("document.querySelector('#pipeline-status').textContent.includes('live')",
                           timeout=10_000)

    # A click shows the node's definition and counters.
    for node_id in ("table:orders", "source:broken", "sink:files"):
        node = next(n for n in graph["nodes"] if n["id"] == node_id)
        page.click(f'g.pipeline-node[data-id="{node_id}"]')
        page.wait_for_function("id => document.querySelector('#pipeline-details').dataset.id === id", arg=node_id)
        assert page.locator("#pipeline-details pre.pipeline-ddl").text_content() == node["ddl"]
        counters = page.locator("#pipeline-details table.pipeline-counters tbody td:first-child").all_text_contents()
        assert counters == list(node["counters"].keys())
        assert "selected" in page.locator(f'g.pipeline-node[data-id="{node_id}"]').get_attribute("class")
    page.click('g.pipeline-node[data-id="table:orders"]')

    # Rows arrive: the edges out of the table show a non-zero rate.
    def rate_label_nonzero():
        return page.evaluate("""() => [...document.querySelectorAll('.pipeline-edge[data-from="table:orders"]')]
          .some((g) => Number(g.dataset.rate) > 0 && !g.querySelector('.pipeline-edge-rate').textContent.startsWith('0 '))""")
    next_id = 0
    deadline = time.time() + 15
    while time.time() < deadline and not rate_label_nonzero():
        lines = [json.dumps({"id": next_id + i, "region": ["EU", "US", "APAC"][i % 3], "price": 5.0 + i})
                 for i in range(20)]
        next_id += 20
        request(base, "POST", "/api/v1/ingest/orders", "\n".join(lines) + "\n",
                content_type="application/x-ndjson")
        time.sleep(0.5)
    assert rate_label_nonzero(), dom_graph(page)
    label = page.locator('.pipeline-edge[data-from="table:orders"][data-to="materialized view:by_region"] .pipeline-edge-rate')
    assert label.text_content().endswith("rows/s")
    # The table's node and the details panel follow the counters.
    page.wait_for_function(
        "document.querySelector('#pipeline-details tr[data-counter=\"rows\"] td:last-child').textContent !== '0'",
        timeout=10_000)
    assert "rows" in page.locator('g.pipeline-node[data-id="table:orders"] .pipeline-sub').text_content()

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = serve["tmp"] / "pipeline.png"
    page.screenshot(path=str(shot), full_page=True)
    page.screenshot(path=str(ARTIFACTS / "pipeline.png"), full_page=True)
    assert shot.stat().st_size > 10_000
    assert not page.errors, page.errors


def test_pipeline_view_polls_when_the_channel_is_unsubscribed(page, serve):  # noqa: F811
    """Leaving the view drops the channel; the view also polls the REST route
    (the 2 s fallback) and follows new objects."""
    base = serve["base"]
    sql(base, "CREATE TABLE t (id BIGINT NOT NULL, PRIMARY KEY (id))")
    page.goto(f"{base}/?token={TOKEN}")
    page.wait_for_selector("#shell:not([hidden])", timeout=10_000)
    page.click('button.nav[data-view="pipeline"]')
    page.wait_for_selector('g.pipeline-node[data-id="table:t"]', timeout=10_000)
    assert page.evaluate("window.__rill.app.active().conn.channels.includes('pipeline')")
    sql(base, "CREATE MATERIALIZED VIEW v WITH (interval_seconds = 0.5) AS SELECT count(*) AS n FROM t")
    page.wait_for_selector('.pipeline-edge[data-from="table:t"][data-to="materialized view:v"]', timeout=10_000)
    page.click('button.nav[data-view="console"]')
    assert not page.evaluate("window.__rill.app.active().conn.channels.includes('pipeline')")
    # Without the socket's frames, the view polls GET /api/v1/pipeline.
    page.click('button.nav[data-view="pipeline"]')
    page.evaluate("""() => { const c = window.__rill.app.active().conn;
      c.unsubscribe('pipeline'); c.channels = c.channels.filter((x) => x !== 'pipeline'); }""")
    page.evaluate("window.__rill.app.pipelineView.lastSocketFrameAt = 0")
    sql(base, "DROP MATERIALIZED VIEW v")
    page.wait_for_selector('g.pipeline-node[data-id="materialized view:v"]', state="detached", timeout=10_000)
    page.wait_for_function("document.querySelector('#pipeline-status').textContent.includes('polling')",
                           timeout=10_000)
    assert not page.errors, page.errors
