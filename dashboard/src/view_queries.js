// Custom Queries: run SQL on the live tables or the metrics database, see the
// result, chart it, export CSV, or schedule it as a KPI query.
import {h, setChildren} from './dom.js';
import {ROUTES} from './api.js';
import {makeChart} from './charts.js';
import {toCsv, toUnixSeconds} from './format.js';
import {readResult} from './result.js';

const MAX_TABLE_ROWS = 1000;

export class QueriesView {
  constructor(root, app) {
    this.root = root;
    this.app = app;
    this.result = {columns: [], rows: []};
    this.chart = null;
    this.build();
  }

  build() {
    this.sql = h('textarea#query-sql', {rows: 6, spellcheck: 'false', 'aria-label': 'SQL',
      placeholder: 'SELECT region, sum(amount) AS revenue FROM orders GROUP BY region'});
    this.target = h('select#query-target', {'aria-label': 'Database'},
      h('option', {value: 'live', text: 'Live tables'}), h('option', {value: 'metrics', text: 'Metrics database (rill_metrics.db)'}));
    this.status = h('span.status#query-status');
    this.head = h('thead');
    this.body = h('tbody');
    this.chartType = h('select#chart-type', {'aria-label': 'Chart type'}, ['line', 'bar', 'scatter'].map((t) => h('option', {value: t, text: t})));
    this.xCol = h('select#chart-x', {'aria-label': 'X column'});
    this.yCol = h('select#chart-y', {'aria-label': 'Y column'});
    this.canvasBox = h('div.chart-wrap', {role: 'img', 'aria-label': 'Query result chart'});
    this.kpiName = h('input#kpi-name', {placeholder: 'KPI name', 'aria-label': 'KPI name'});
    this.kpiInterval = h('input#kpi-interval', {type: 'number', min: '0.1', step: '0.1', value: '1', 'aria-label': 'Interval (s)'});
    this.root.append(h('section.panel', {},
      h('h2', {text: 'Custom Queries'}),
      this.sql,
      h('div.row', {}, this.target,
        h('button.primary#run-query', {text: 'Run ▶', onclick: () => this.run()}),
        h('button#export-csv', {text: 'Export CSV', onclick: () => this.exportCsv()}), this.status),
      h('div.result-wrap', {}, h('table.grid#query-result', {}, this.head, this.body)),
      h('h3', {text: 'Chart the result'}),
      h('div.row', {}, this.chartType, h('label', {}, 'x ', this.xCol), h('label', {}, 'y ', this.yCol),
        h('button#draw-chart', {text: 'Draw chart', onclick: () => this.draw()}),
        h('button.small', {text: 'Reset zoom', onclick: () => this.chart && this.chart.resetZoom()})),
      h('div.chart-box#query-chart', {}, this.canvasBox),
      h('h3', {text: 'Schedule as a KPI query'}),
      h('div.row', {}, this.kpiName, h('label', {}, 'every ', this.kpiInterval, ' s'),
        h('button#schedule-kpi', {text: 'Schedule', onclick: () => this.schedule()}))));
    this.sql.addEventListener('keydown', (e) => {
      if ((e.ctrlKey || e.metaKey) && e.key === 'Enter') this.run();
    });
  }

  async run() {
    const conn = this.app.active()?.conn;
    if (!conn) return;
    const sql = this.sql.value.trim();
    if (!sql) { this.status.textContent = 'Write a query first'; return; }
    this.status.textContent = 'Running…';
    this.status.className = 'status';
    const route = this.target.value === 'metrics' ? ROUTES.metricsQuery : ROUTES.query;
    const t0 = performance.now();
    try {
      const data = await conn.request('POST', route, {sql, format: 'json'});
      this.result = readResult(data);
      const ms = performance.now() - t0;
      this.status.textContent = `${this.result.rows.length} rows in ${ms.toFixed(0)} ms`;
      this.renderTable();
    } catch (e) {
      this.status.textContent = e.message;
      this.status.className = 'status error';
    }
  }

  renderTable() {
    const {columns, rows} = this.result;
    setChildren(this.head, h('tr', {}, columns.map((c) => h('th', {text: c}))));
    setChildren(this.body, rows.slice(0, MAX_TABLE_ROWS).map((r) => h('tr', {}, columns.map((c) => {
      const v = r[c];
      return h('td', {text: v === null || v === undefined ? 'NULL' : (typeof v === 'object' ? JSON.stringify(v) : String(v))});
    }))));
    for (const sel of [this.xCol, this.yCol]) setChildren(sel, columns.map((c) => h('option', {value: c, text: c})));
    if (columns.length > 1) this.yCol.value = columns[1];
  }

  draw() {
    const {rows} = this.result;
    const type = this.chartType.value;
    const x = this.xCol.value;
    const y = this.yCol.value;
    if (!rows.length || !x || !y) return;
    const xs = rows.map((r) => r[x]);
    const numericX = xs.every((v) => v !== null && Number.isFinite(Number(v)));
    const timeX = !numericX && xs.every((v) => Number.isFinite(toUnixSeconds(v)));
    const xKind = numericX ? 'linear' : timeX ? 'time' : 'category';
    if (this.chart) this.chart.destroy();
    setChildren(this.canvasBox);
    this.chart = makeChart('query', this.canvasBox, {type, xKind, series: [{label: y}]});
    if (xKind === 'category') {
      this.chart.setLabels(xs.map(String));
      this.chart.setSeries(0, rows.map((r) => Number(r[y])));
    } else {
      const toX = xKind === 'time' ? toUnixSeconds : Number;
      const pts = rows.map((r) => ({x: toX(r[x]), y: Number(r[y])})).filter((p) => Number.isFinite(p.x));
      if (type !== 'scatter') pts.sort((a, b) => a.x - b.x);
      this.chart.setSeries(0, pts);
    }
    this.chart.update();
  }

  exportCsv() {
    const {columns, rows} = this.result;
    if (!columns.length) return;
    const blob = new Blob([toCsv(columns, rows)], {type: 'text/csv'});
    const a = h('a', {href: URL.createObjectURL(blob), download: 'rill_query.csv'});
    document.body.append(a);
    a.click();
    setTimeout(() => { URL.revokeObjectURL(a.href); a.remove(); }, 1000);
  }

  async schedule() {
    const s = this.app.active();
    if (!s) return;
    const name = this.kpiName.value.trim();
    const sql = this.sql.value.trim();
    if (!name || !sql) { this.status.textContent = 'A KPI needs a name and a query'; return; }
    // One value per run: charted over time (x = ts). Several rows: x and y as mapped above.
    const perRow = this.result.rows.length > 1 && this.xCol.value && this.xCol.value !== this.yCol.value;
    const def = {name, sql, interval_seconds: Number(this.kpiInterval.value) || 1, chart_type: this.chartType.value,
                 x_col: perRow ? this.xCol.value : 'ts', y_col: this.yCol.value || undefined};
    try {
      await s.conn.request('POST', ROUTES.kpis, def);
      s.kpi(name, def);
      this.status.textContent = `Scheduled “${name}”: it appears on the Metrics Console`;
      this.status.className = 'status ok';
    } catch (e) {
      this.status.textContent = e.message;
      this.status.className = 'status error';
    }
  }
}
