// What the page knows about one server: bounded series and lists, filled from
// REST history on connect and from stream frames afterwards.
import {ROUTES} from './api.js';
import {SeriesBuffer, BoundedList} from './buffers.js';
import {normalizeAlert} from './alerts.js';
import {toUnixSeconds} from './format.js';

const SERIES_CAPACITY = 3600;     // an hour at 1 Hz per series
const ALERT_CAPACITY = 1000;
const KPI_ROWS_CAPACITY = 500;

/** Pick the first defined field among names (the API and seed name some fields differently). */
export function pick(obj, ...names) {
  if (!obj) return undefined;
  for (const n of names) if (obj[n] !== undefined && obj[n] !== null) return obj[n];
  return undefined;
}

/** Metrics record -> the numbers the console shows. */
export function readMetrics(m) {
  const used = Number(pick(m, 'used_memory', 'host_used_memory_bytes'));
  const total = Number(pick(m, 'total_memory', 'host_total_memory_bytes'));
  let business = pick(m, 'business_metrics');
  if (typeof business === 'string') { try { business = JSON.parse(business); } catch (_) { business = {}; } }
  return {
    ts: toUnixSeconds(pick(m, 'timestamp', 'ts')),
    cpu: Number(pick(m, 'cpu_usage')),
    processCpu: Number(pick(m, 'process_cpu_percent')),
    used, total,
    memPercent: total > 0 ? (used / total) * 100 : NaN,
    arrow: Number(pick(m, 'arrow_allocated_bytes', 'pyarrow_allocated_bytes')),
    arrowPeak: Number(pick(m, 'arrow_peak_allocated_bytes', 'arrow_max_memory')),
    duckdbLive: Number(pick(m, 'duckdb_memory_bytes', 'duckdb_live_bytes')),
    metricsDbFile: Number(pick(m, 'metrics_db_file_bytes') ?? pick(m.values, 'metrics_db_file_bytes')),
    metricsDbMemory: Number(pick(m, 'metrics_duckdb_memory_bytes') ??
                            pick(m.values, 'metrics_duckdb_memory_bytes')),
    rps: Number(pick(m, 'records_per_second', 'rows_per_second')),
    totalRows: Number(pick(m, 'total_records_processed', 'records_processed')),
    lastLatency: Number(pick(m, 'last_batch_latency_ms', 'last_latency_ms')),
    avgLatency: Number(pick(m, 'avg_batch_latency_ms', 'avg_latency_ms')),
    business: businessValues(business),
  };
}

/** Business metrics as {name: number}; the server sends {name: {value, ok, error}}. */
export function businessValues(business) {
  const out = {};
  if (!business || typeof business !== 'object') return out;
  for (const [name, v] of Object.entries(business)) {
    const x = v !== null && typeof v === 'object' ? (v.ok === false ? NaN : Number(v.value)) : Number(v);
    if (Number.isFinite(x)) out[name] = x;
  }
  return out;
}

export class ServerState {
  constructor(conn) {
    this.conn = conn;
    this.info = null;
    this.metrics = null;
    this.series = {
      cpu: new SeriesBuffer(SERIES_CAPACITY),
      mem: new SeriesBuffer(SERIES_CAPACITY),
      rps: new SeriesBuffer(SERIES_CAPACITY),
      latency: new SeriesBuffer(SERIES_CAPACITY),
    };
    this.business = new Map();      // name -> {series, latest, previous}
    this.kpis = new Map();          // name -> {def, series, latest, previous, rows, columns}
    this.alerts = new BoundedList(ALERT_CAPACITY);
    this.alertIds = new Set();
    this.unseen = 0;
    this.tables = [];
    this.connectors = [];
    this.sinks = [];
    this.rules = [];
    this.listeners = new Set();
    conn.addEventListener('metrics', (e) => this.onMetrics(e.detail));
    conn.addEventListener('alert', (e) => this.onAlert(e.detail, true));
    conn.addEventListener('kpi', (e) => this.onKpi(e.detail));
  }

  /** Subscribe to changes: fn(kind, payload). Returns an unsubscribe function. */
  on(fn) { this.listeners.add(fn); return () => this.listeners.delete(fn); }
  notify(kind, payload) { for (const fn of this.listeners) fn(kind, payload); }

  /** Load what the views show from the server's history (reload keeps the charts). */
  async load(rangeSeconds, points = 1200) {
    const now = Date.now() / 1000;
    const since = Number.isFinite(rangeSeconds) ? now - rangeSeconds : undefined;
    const results = await Promise.allSettled([
      this.conn.get(ROUTES.telemetry, {since, points}),
      this.conn.get(ROUTES.kpis),
      this.conn.get(ROUTES.alerts, {limit: 500}),
      this.refreshTables(),
      this.refreshRules(),
      this.conn.get(ROUTES.metricsNow),
      this.conn.check(),
    ]);
    // A wrong token or a server gone: say so (the caller marks the tab offline).
    if (results[6].status === 'rejected') throw results[6].reason;
    this.info = results[6].value;
    if (results[0].status === 'fulfilled') this.loadTelemetry(results[0].value);
    if (results[1].status === 'fulfilled') await this.loadKpis(results[1].value, since, points);
    if (results[2].status === 'fulfilled') {
      const list = listOf(results[2].value, 'alerts', 'rows');
      for (const a of list.slice().reverse()) this.onAlert(a, false);
    }
    if (results[5].status === 'fulfilled' && results[5].value) {
      const v = results[5].value;
      this.onMetrics(v);
    }
    this.notify('loaded');
  }

  loadTelemetry(data) {
    const rows = listOf(data, 'points', 'rows', 'telemetry');
    // History replaces what the buffers hold (a longer range brings older points).
    if (rows.length) {
      for (const s of Object.values(this.series)) s.clear();
      for (const b of this.business.values()) b.series.clear();
    }
    for (const row of rows) this.addMetricPoint(readMetrics(row));
  }

  async loadKpis(data, since, points = 1200) {
    const defs = listOf(data, 'kpis', 'queries');
    await Promise.allSettled(defs.map(async (def) => {
      const k = this.kpi(def.name, def);
      if (def.latest !== undefined || def.value !== undefined) this.setKpiValue(k, def);
      this.refreshKpiRows(k).catch(() => {});
      try {
        const hist = await this.conn.get(`${ROUTES.kpis}/${encodeURIComponent(def.name)}/history`,
          {since, points});
        const points = listOf(hist, 'points', 'history', 'rows');
        if (points.length) k.series.clear();
        for (const p of points) {
          const ts = toUnixSeconds(pick(p, 'ts', 'timestamp'));
          const v = Number(pick(p, 'value', def.y_col));
          if (Number.isFinite(ts) && Number.isFinite(v)) k.series.push(ts, v);
        }
      } catch (_) { /* history is optional */ }
    }));
  }

  async refreshTables() {
    const [tables, stats, sinks] = await Promise.allSettled([
      this.conn.get(ROUTES.tables), this.conn.get(ROUTES.stats), this.conn.get(ROUTES.sinks)]);
    if (tables.status === 'fulfilled') this.tables = listOf(tables.value, 'tables');
    if (stats.status === 'fulfilled') this.connectors = listOf(stats.value, 'connectors');
    if (sinks.status === 'fulfilled') this.sinks = listOf(sinks.value, 'sinks');
    this.notify('tables');
  }

  async refreshRules() {
    this.rules = listOf(await this.conn.get(ROUTES.rules), 'rules');
    this.notify('rules');
  }

  addMetricPoint(m) {
    if (!Number.isFinite(m.ts)) return;
    if (Number.isFinite(m.cpu)) this.series.cpu.push(m.ts, m.cpu);
    if (Number.isFinite(m.memPercent)) this.series.mem.push(m.ts, m.memPercent);
    if (Number.isFinite(m.rps)) this.series.rps.push(m.ts, m.rps);
    if (Number.isFinite(m.lastLatency)) this.series.latency.push(m.ts, m.lastLatency);
    for (const [name, value] of Object.entries(m.business || {})) {
      const v = Number(value);
      if (!Number.isFinite(v)) continue;
      let b = this.business.get(name);
      if (!b) { b = {series: new SeriesBuffer(SERIES_CAPACITY), latest: NaN, previous: NaN}; this.business.set(name, b); }
      b.previous = b.latest;
      b.latest = v;
      b.series.push(m.ts, v);
    }
  }

  onMetrics(raw) {
    if (!raw) return;
    const m = readMetrics(raw);
    if (!Number.isFinite(m.ts)) m.ts = Date.now() / 1000;
    this.metrics = m;
    this.addMetricPoint(m);
    if (raw.tables) this.tables = raw.tables;
    if (raw.connectors) this.connectors = raw.connectors;
    this.notify('metrics', m);
  }

  onAlert(raw, live) {
    const a = normalizeAlert(raw);
    if (this.alertIds.has(a.id)) return;
    this.alertIds.add(a.id);
    if (this.alertIds.size > 4 * this.alerts.capacity) this.alertIds = new Set(this.alerts.items.map((x) => x.id));
    this.alerts.push(a);
    this.alertsVersion = (this.alertsVersion || 0) + 1;
    if (live) this.unseen++;
    this.notify('alert', {alert: a, live});
  }

  /** Whether a KPI is charted row by row (x_col names a result column, not ts). */
  static byRows(def) { return !!def.x_col && def.x_col !== 'ts'; }

  /**
   * The rows of a KPI's latest run, from the server's rill_kpi_history (so the
   * page charts what the server computed; at most once a second per KPI).
   */
  async refreshKpiRows(k) {
    if (!ServerState.byRows(k.def)) return;
    const now = Date.now();
    if (k.rowsFetchedAt && now - k.rowsFetchedAt < 1000) return;
    k.rowsFetchedAt = now;
    const q = "'" + String(k.def.name).replace(/'/g, "''") + "'";
    const sql = 'SELECT row_index, column_name, value, text FROM rill_kpi_history WHERE query = ' + q +
      ' AND ts = (SELECT max(ts) FROM rill_kpi_history WHERE query = ' + q + ') ORDER BY row_index';
    const data = await this.conn.request('POST', ROUTES.metricsQuery, {sql, format: 'json'});
    const {columns, rows} = pivotKpiCells(listOf(data, 'rows'));
    if (!rows.length) return;
    k.columns = columns;
    k.rows = rows.slice(0, KPI_ROWS_CAPACITY);
    this.notify('kpi', k);
  }

  kpi(name, def = {}) {
    let k = this.kpis.get(name);
    if (!k) {
      k = {def: {name, ...def}, series: new SeriesBuffer(SERIES_CAPACITY), latest: NaN,
           previous: NaN, rows: [], columns: []};
      this.kpis.set(name, k);
    } else if (def && Object.keys(def).length) {
      k.def = {...k.def, ...def};
    }
    return k;
  }

  setKpiValue(k, payload) {
    const value = Number(pick(payload, 'value', 'latest', 'latest_value'));
    const ts = toUnixSeconds(pick(payload, 'ts', 'timestamp', 'last_run_at', 'last_run')) || Date.now() / 1000;
    if (Array.isArray(payload.rows)) {
      k.rows = payload.rows.slice(0, KPI_ROWS_CAPACITY);
      k.columns = payload.columns ? payload.columns.map((c) => c.name ?? c) : Object.keys(k.rows[0] || {});
    }
    if (Number.isFinite(value)) {
      k.previous = k.latest;
      k.latest = value;
      k.series.push(ts, value);
    }
  }

  onKpi(payload) {
    if (!payload || !payload.name) return;
    const k = this.kpi(payload.name, payload.definition || {});
    this.setKpiValue(k, payload);
    this.notify('kpi', k);
    this.refreshKpiRows(k).catch(() => {});
  }
}

/**
 * rill_kpi_history cells ({row_index, column_name, value, text}) -> {columns,
 * rows: [{column: value or text}]} in row order.
 */
export function pivotKpiCells(cells) {
  const columns = [];
  const byRow = new Map();
  for (const c of cells) {
    if (!columns.includes(c.column_name)) columns.push(c.column_name);
    const i = Number(c.row_index);
    if (!byRow.has(i)) byRow.set(i, {});
    byRow.get(i)[c.column_name] = c.value !== null && c.value !== undefined ? c.value : c.text;
  }
  const rows = [...byRow.keys()].sort((a, b) => a - b).map((i) => byRow.get(i));
  return {columns, rows};
}

/** The array in a response that may be an array or {key: array}. */
/**
 * Rows of the Connectors table: the connectors (inputs), then the sinks
 * (outputs, /api/v1/telemetry/sinks). Each row: {kind, name, cells, title}
 * with cells [name, table, buffered | lag, dropped, rejected | errors].
 */
export function connectorRows(connectors, sinks, formatValue = String) {
  const rows = (connectors || []).map((c) => {
    const name = c.connector ?? c.name;
    return {kind: 'connector', name, title: cdcTitle(c, formatValue), cells: [
      name, c.table || c.target_table || '', cdcProgress(c, formatValue) ?? formatValue(c.buffered_records),
      formatValue(c.dropped_records), formatValue((c.rejected_records ?? 0) + (c.refused_records ?? 0))]};
  });
  for (const s of sinks || []) {
    const lag = `lag ${formatValue(s.lag_versions ?? 0)} v` +
      (Number(s.lag_seconds) > 0 ? ` / ${Number(s.lag_seconds).toFixed(1)} s` : '');
    rows.push({kind: 'sink', name: s.sink ?? s.name,
      title: `${s.type || ''} sink, mode ${s.mode || ''}: ${formatValue(s.rows_written ?? 0)} rows in ` +
        `${formatValue(s.batches ?? 0)} commits, ${formatValue(s.retries ?? 0)} retries` +
        (s.backpressure ? ', holding its table\'s connectors back' : '') +
        (s.last_error ? `; last error: ${s.last_error}` : ''),
      cells: [`→ ${s.sink ?? s.name} (${s.type || 'sink'})`, s.table || '',
        lag + (s.backpressure ? ' (backpressure)' : ''), formatValue(s.dropped_rows ?? 0),
        formatValue(s.errors ?? 0)]});
  }
  return rows;
}

/**
 * A change-data-capture connector's buffered cell (it has snapshot_done): the
 * initial snapshot's progress while it runs ("snapshot 120,000 / ~1,000,000
 * rows (12%), 50,000 rows/s, ETA 18 s"), then the slot's lag in bytes;
 * undefined for other connectors.
 */
export function cdcProgress(c, formatValue = String) {
  if (c.snapshot_done === undefined) return undefined;
  if (c.snapshot_done === false) {
    const total = Number(c.snapshot_rows_total ?? -1);
    const pct = total > 0 ? ` (${Math.min(100, Math.floor(100 * c.snapshot_rows / total))}%)` : '';
    const eta = Number(c.snapshot_eta_seconds ?? -1) >= 0 ? `, ETA ${c.snapshot_eta_seconds} s` : '';
    return `snapshot ${formatValue(c.snapshot_rows ?? 0)}` +
      (total >= 0 ? ` / ~${formatValue(total)}` : '') + ` rows${pct}, ` +
      `${formatValue(c.snapshot_rows_per_s ?? 0)} rows/s${eta}`;
  }
  return `${formatValue(c.buffered_records ?? 0)}, lag ${formatValue(c.lag_bytes ?? 0)} B`;
}

function cdcTitle(c, formatValue) {
  if (c.snapshot_done === undefined) return '';
  return `change data capture: snapshot ${formatValue(c.snapshot_rows ?? 0)} rows` +
    (c.snapshot_done ? ' (done)' : ' (running)') + `, slot lag ${formatValue(c.lag_bytes ?? 0)} bytes, ` +
    `${formatValue(c.reconnects ?? 0)} reconnects, ${formatValue(c.errors ?? 0)} errors`;
}

export function listOf(data, ...keys) {
  if (Array.isArray(data)) return data;
  if (!data || typeof data !== 'object') return [];
  for (const k of keys) if (Array.isArray(data[k])) return data[k];
  return [];
}
