// Metrics Console: business KPIs first, then the engine's infrastructure.
import {h, setChildren, setText} from './dom.js';
import {makeChart, PALETTE} from './charts.js';
import {formatValue, formatBytes, formatDuration, formatRate, formatAge, kindOf, memoryLevel,
        trend} from './format.js';
import {downsampleMinMax} from './buffers.js';
import {connectorRows} from './state.js';

export class ConsoleView {
  constructor(root, app) {
    this.root = root;
    this.app = app;
    this.cards = new Map();
    this.charts = new Map();
    this.build();
  }

  build() {
    this.kpiCards = h('div.cards#kpi-cards');
    this.kpiCharts = h('div.chart-grid#kpi-charts');
    this.kpiEmpty = h('p.empty#kpi-empty', {text: 'No KPI queries yet: schedule one from Custom Queries, or add one with add_dashboard_scheduled_query().'});
    this.tiles = {
      cpu: tile('Host CPU', 'tile-cpu'), mem: tile('System memory', 'tile-mem'),
      arrow: tile('Arrow memory (PyArrow pool)', 'tile-arrow'), duck: tile('DuckDB live', 'tile-duck'),
      metricsDb: tile('Metrics DB', 'tile-metrics-db'), rps: tile('Throughput (RPS)', 'tile-rps'),
      lat: tile('Tick latency', 'tile-lat'),
    };
    this.memBar = h('div.membar-fill#membar-fill');
    this.tiles.mem.el.append(h('div.membar#membar', {role: 'meter', 'aria-label': 'Host memory used',
      'aria-valuemin': '0', 'aria-valuemax': '100'}, this.memBar));
    const sysHost = h('div.chart-wrap#system-chart', {role: 'img', 'aria-label': 'CPU and memory history'});
    this.tablesBody = h('tbody');
    this.connBody = h('tbody');
    this.root.append(
      h('section.panel.business#business-section', {'aria-labelledby': 'business-title'},
        h('h2#business-title', {text: 'Key Business Intelligence & Scheduled Queries'}), this.kpiCards, this.kpiEmpty, this.kpiCharts),
      h('section.panel.infra#infra-section', {'aria-labelledby': 'infra-title'},
        h('h2#infra-title', {text: 'Engine Infrastructure & Resource Utilization'}),
        h('div.tiles', {}, Object.values(this.tiles).map((t) => t.el)),
        h('div.chart-box.tall', {}, h('div.chart-head', {}, h('span', {text: 'System Resource History (CPU / Memory)'}),
          h('button.small#system-reset-zoom', {text: 'Reset zoom', onclick: () => this.sysChart.resetZoom()})), sysHost),
        h('div.two-col', {},
          h('div', {}, h('h3', {text: 'Tables'}), h('table.grid#tables-table', {'aria-label': 'Tables'},
            h('thead', {}, h('tr', {}, ['Table', 'Mode', 'Rows', 'Bytes', 'Freshness (last write)'].map((c) => h('th', {text: c})))), this.tablesBody)),
          h('div', {}, h('h3', {text: 'Connectors'}), h('table.grid#connectors-table', {'aria-label': 'Connectors'},
            h('thead', {}, h('tr', {}, ['Connector / sink', 'Table', 'Buffered / lag', 'Dropped', 'Rejected / errors'].map((c) => h('th', {text: c})))), this.connBody)))));
    this.sysChart = makeChart('system', sysHost, {type: 'line', xKind: 'time',
      series: [{label: 'CPU %', color: PALETTE[0]}, {label: 'Memory %', color: PALETTE[1]}]});
  }

  /** Redraw everything from the active server's state. */
  render(state, rangeSeconds) {
    this.renderKpis(state, rangeSeconds);
    this.renderInfra(state, rangeSeconds);
    this.renderTables(state);
  }

  renderKpis(state, rangeSeconds) {
    const items = [];
    for (const [name, k] of state.kpis) items.push({id: `kpi:${name}`, name, latest: k.latest, previous: k.previous, k});
    for (const [name, b] of state.business) items.push({id: `bm:${name}`, name, latest: b.latest, previous: b.previous});
    this.kpiEmpty.hidden = items.length > 0;
    const keep = new Set(items.map((i) => i.id));
    for (const [id, card] of this.cards) if (!keep.has(id)) { card.el.remove(); this.cards.delete(id); }
    for (const item of items) {
      let card = this.cards.get(item.id);
      if (!card) {
        card = {value: h('div.kpi-value'), trend: h('div.kpi-trend'),
                el: h('div.card.kpi-card', {dataset: {kpi: item.name}})};
        card.el.append(h('div.kpi-name', {text: item.name}), card.value, card.trend);
        this.kpiCards.append(card.el);
        this.cards.set(item.id, card);
      }
      const kind = kindOf(item.name);
      setText(card.value, formatValue(item.latest, kind));
      card.value.dataset.raw = String(item.latest);
      const t = trend(item.previous, item.latest);
      setText(card.trend, t.dir === 'flat' ? '▬ steady' : `${t.dir === 'up' ? '▲' : '▼'} ${formatValue(Math.abs(t.delta), kind)}`);
      card.trend.className = `kpi-trend ${t.dir}`;
    }
    const now = Date.now() / 1000;
    const since = Number.isFinite(rangeSeconds) ? now - rangeSeconds : -Infinity;
    const keepCharts = new Set();
    for (const [name, k] of state.kpis) {
      const id = `kpi:${name}`;
      keepCharts.add(id);
      const type = ['line', 'bar', 'scatter'].includes(k.def.chart_type) ? k.def.chart_type : 'line';
      const xCol = k.def.x_col || 'ts';
      const byRows = xCol !== 'ts' && k.rows.length && k.columns.includes(xCol);
      let c = this.charts.get(id);
      if (c && (c.type !== type || c.byRows !== byRows)) { c.handle.destroy(); c.box.remove(); this.charts.delete(id); c = null; }
      if (!c) {
        const host = h('div.chart-wrap', {role: 'img', 'aria-label': `${name} chart`});
        const handle = makeChart(id, host, {type, xKind: byRows ? 'category' : 'time',
          series: [{label: k.def.y_col || name}]});
        const box = h('div.chart-box', {dataset: {chart: id}},
          h('div.chart-head', {}, h('span', {text: name}),
            h('button.small', {text: 'Reset zoom', onclick: () => handle.resetZoom()})),
          host);
        this.kpiCharts.append(box);
        c = {handle, box, type, byRows};
        this.charts.set(id, c);
      }
      if (byRows) {
        const yCol = k.def.y_col || k.columns.find((col) => col !== xCol);
        c.handle.setLabels(k.rows.map((r) => String(r[xCol])));
        c.handle.setSeries(0, k.rows.map((r) => Number(r[yCol])));
      } else {
        c.handle.setSeries(0, downsampleMinMax(k.series.points(since), c.handle.targetPoints()));
        c.handle.setXRange(Number.isFinite(since) ? since : undefined, undefined);
      }
      c.handle.update();
    }
    for (const [id, c] of this.charts) if (!keepCharts.has(id)) { c.handle.destroy(); c.box.remove(); this.charts.delete(id); }
  }

  renderInfra(state, rangeSeconds) {
    const m = state.metrics;
    if (m) {
      setText(this.tiles.cpu.value, Number.isFinite(m.cpu) ? m.cpu.toFixed(1) + '%' : '—');
      setText(this.tiles.cpu.sub, Number.isFinite(m.processCpu) ? `engine process ${m.processCpu.toFixed(1)}%` : '');
      const pct = m.memPercent;
      setText(this.tiles.mem.value, Number.isFinite(pct) ? pct.toFixed(1) + '%' : '—');
      setText(this.tiles.mem.sub, `${formatBytes(m.used)} / ${formatBytes(m.total)}`);
      this.memBar.style.width = `${Math.max(0, Math.min(100, pct || 0))}%`;
      this.memBar.className = `membar-fill ${memoryLevel(pct)}`;
      this.memBar.parentElement.setAttribute('aria-valuenow', Number.isFinite(pct) ? pct.toFixed(1) : '0');
      this.tiles.mem.el.dataset.level = memoryLevel(pct);
      setText(this.tiles.arrow.value, formatBytes(m.arrow));
      setText(this.tiles.arrow.sub, Number.isFinite(m.arrowPeak) ? `peak ${formatBytes(m.arrowPeak)}` : '');
      setText(this.tiles.duck.value, formatBytes(m.duckdbLive));
      setText(this.tiles.duck.sub, 'live tables (buffer manager)');
      setText(this.tiles.metricsDb.value, formatBytes(m.metricsDbFile));
      setText(this.tiles.metricsDb.sub, Number.isFinite(m.metricsDbMemory)
        ? `file + WAL · ${formatBytes(m.metricsDbMemory)} in memory` : 'file + WAL');
      setText(this.tiles.rps.value, formatRate(m.rps));
      setText(this.tiles.rps.sub, `${formatValue(m.totalRows)} rows total`);
      setText(this.tiles.lat.value, formatDuration(m.lastLatency));
      setText(this.tiles.lat.sub, `avg ${formatDuration(m.avgLatency)}`);
    }
    const now = Date.now() / 1000;
    const since = Number.isFinite(rangeSeconds) ? now - rangeSeconds : -Infinity;
    const target = this.sysChart.targetPoints();
    this.sysChart.setSeries(0, downsampleMinMax(state.series.cpu.points(since), target));
    this.sysChart.setSeries(1, downsampleMinMax(state.series.mem.points(since), target));
    this.sysChart.setXRange(Number.isFinite(since) ? since : undefined, undefined);
    this.sysChart.update();
  }

  renderTables(state) {
    const now = Date.now() / 1000;
    setChildren(this.tablesBody, state.tables.map((t) => h('tr', {dataset: {table: t.name}}, [
      t.name, t.mode || '', formatValue(t.rows ?? t.num_rows), formatBytes(t.bytes ?? t.memory_bytes),
      formatAge(t.published_at ?? t.last_write_ts, now)].map((v) => h('td', {text: v})))));
    // Inputs, then the sinks (outputs) of the same tables.
    setChildren(this.connBody, connectorRows(state.connectors, state.sinks, formatValue).map((r) =>
      h('tr', {dataset: {[r.kind]: r.name}, title: r.title}, r.cells.map((v) => h('td', {text: String(v)})))));
  }
}

function tile(label, id) {
  const value = h('div.tile-value', {text: '—'});
  const sub = h('div.tile-sub');
  const el = h(`div.tile#${id}`, {}, h('div.tile-label', {text: label}), value, sub);
  return {el, value, sub};
}
