"""The dashboard's Cluster view in a real browser (issue 28): two `rill serve`
instances of one application on the real broker (fixture `kafka_broker`). The
page of node-1 lists both members (from the group's description: any instance
shows the whole application), draws every input partition in its owner's
colour, and follows a graceful leave of node-2 until node-1 owns all of them.
What the page shows is checked against GET /api/v1/telemetry/cluster.
The screenshot is saved under build/test-artifacts/dashboard/cluster.png.
"""
import os
import pathlib
import uuid

import pytest

from conftest import requires
from serve_process import application_pipeline, http_request, start_serve, stop_all, wait_for
# The browser fixtures of the dashboard tests (chromium driven by Playwright).
from test_dashboard import ARTIFACTS, CHROMIUM, DIST, browser, page  # noqa: F401

ROOT = pathlib.Path(__file__).resolve().parents[2]
RILL = pathlib.Path(os.environ.get("RILL_BIN", ROOT / "build" / "release" / "apps" / "rill" / "rill"))
TOKEN = "cluster-view-token"
PARTITIONS = 6

pytestmark = [
    requires(not RILL.exists(), f"{RILL} not built"),
    requires(not os.path.exists(CHROMIUM), "chromium is installed by scripts/setup"),
    requires(not DIST.exists(), "the dashboard is bundled by scripts/setup"),
    pytest.mark.timeout(240),
]


def test_cluster_view_shows_every_member_and_who_owns_each_partition(kafka_broker, page,  # noqa: F811
                                                                     tmp_path, monkeypatch):
    topic = f"orders-{uuid.uuid4().hex[:8]}"
    app = f"dash-{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(topic, PARTITIONS)
    servers = kafka_broker.bootstrap_servers
    pipeline = tmp_path / "app.yaml"
    pipeline.write_text(application_pipeline(app, servers, topic, "{id: int64}",
                                             max_rows=100000))
    monkeypatch.setenv("RILL_DASHBOARD_DIR", str(DIST.parent))
    procs = {}
    try:
        for node in ("node-1", "node-2"):
            args = [RILL, "serve", "--metrics", ":memory:", "--listen", "127.0.0.1:0", "--token",
                    TOKEN, "--instance-id", node, pipeline]
            if node == "node-2":
                args.insert(-1, "--leave-on-stop")
            procs[node] = start_serve(args, tmp_path / f"{node}.out", tmp_path / f"{node}.err")

        def status(node):
            code, body = http_request(procs[node][1], "/api/v1/telemetry/cluster", TOKEN)
            assert code == 200, body
            return body

        wait_for(lambda: len(status("node-1")["members"]) == 2
                 and sum(len(m["partitions"]) for m in status("node-1")["members"]) == PARTITIONS,
                 60, "both members in the group's description")

        page.goto(f"http://{procs['node-1'][1]}/?token={TOKEN}")
        page.click('button.nav[data-view="cluster"]')
        page.wait_for_function(
            f"document.querySelectorAll('#cluster-map .cluster-cell').length === {PARTITIONS}"
            " && document.querySelectorAll('#cluster-members tbody tr').length === 2", timeout=20000)
        assert app in page.locator("#cluster-app").text_content()
        assert "node-1" in page.locator("#cluster-self").text_content()
        assert page.locator("#cluster-coverage").text_content().endswith("all owned")
        # Each cell's owner is the member the API says owns that partition.
        owner = {}
        for m in status("node-1")["members"]:
            for p in m["partitions"]:
                owner[p["partition"]] = m["instance_id"]
        assert sorted(owner) == list(range(PARTITIONS))
        cells = page.locator("#cluster-map .cluster-cell")
        shown = {int(cells.nth(i).get_attribute("data-partition")): cells.nth(i).get_attribute("data-owner")
                 for i in range(cells.count())}
        assert shown == owner
        assert set(owner.values()) == {"node-1", "node-2"}
        rows = page.locator("#cluster-members tbody tr")
        assert [rows.nth(i).get_attribute("data-instance") for i in range(2)] == ["node-1", "node-2"]
        assert "(this one)" in rows.nth(0).text_content()
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "cluster.png"), full_page=True)

        # node-2 leaves: the page follows until node-1 owns every partition.
        procs["node-2"][0].terminate()
        procs["node-2"][0].wait(timeout=30)
        page.wait_for_function(
            "document.querySelectorAll('#cluster-members tbody tr').length === 1"
            f" && [...document.querySelectorAll('#cluster-map .cluster-cell')].filter("
            f"c => c.dataset.owner === 'node-1').length === {PARTITIONS}", timeout=30000)
    finally:
        stop_all(procs)
