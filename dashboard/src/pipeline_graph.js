// The Pipeline view's logic, free of the DOM (unit-tested in test/): the
// layout of the catalog's graph in columns by depth, the live rate of each
// edge from successive graphs, and the one-line summary of a node.
import {formatAge, formatValue, toUnixSeconds} from './format.js';

/** Layout sizes (px): column pitch, node box, vertical gap, margins. */
export const LAYOUT = {columnWidth: 256, nodeWidth: 176, nodeHeight: 58, rowGap: 26, margin: 16};

// The least column of each kind, so nodes without edges still read left to
// right (a table made outside the catalog, an alert rule over a KPI).
const KIND_MIN_DEPTH = {
  'source': 0, 'table': 0, 'materialized view': 1, 'stream view': 1, 'window': 1, 'kpi': 1,
  'alert rule': 2, 'sink': 1,
};
const KIND_ORDER = ['source', 'table', 'materialized view', 'stream view', 'window', 'kpi', 'alert rule', 'sink'];

/**
 * Depth of every node: the longest path to it from a node without inputs (at
 * least its kind's least column), so each edge goes left to right; sinks go
 * to the last column. Cycles (which the catalog does not make) are cut after
 * one pass per node. Returns Map id -> depth.
 */
export function nodeDepths(nodes, edges) {
  const depth = new Map();
  for (const n of nodes) depth.set(n.id, KIND_MIN_DEPTH[n.kind] ?? 1);
  const known = edges.filter((e) => depth.has(e.from) && depth.has(e.to) && e.from !== e.to);
  for (let pass = 0; pass < nodes.length; pass++) {
    let changed = false;
    for (const e of known) {
      const d = depth.get(e.from) + 1;
      if (d > depth.get(e.to)) { depth.set(e.to, d); changed = true; }
    }
    if (!changed) break;
  }
  let last = 0;
  for (const n of nodes) if (n.kind !== 'sink') last = Math.max(last, depth.get(n.id));
  for (const n of nodes) if (n.kind === 'sink') depth.set(n.id, Math.max(depth.get(n.id), last + 1));
  return depth;
}

/**
 * Place the graph: columns by depth (nodeDepths), each column ordered by its
 * inputs' positions (so edges cross less), then kind and name. Returns
 * {columns: [[id...]...], pos: Map id -> {x, y, column, row}, width, height}.
 */
export function layoutGraph(nodes, edges, sizes = LAYOUT) {
  const depth = nodeDepths(nodes, edges);
  const byId = new Map(nodes.map((n) => [n.id, n]));
  const columns = [];
  for (const n of nodes) {
    const d = depth.get(n.id);
    while (columns.length <= d) columns.push([]);
    columns[d].push(n.id);
  }
  const inputs = new Map();
  for (const e of edges) {
    if (!byId.has(e.from) || !byId.has(e.to)) continue;
    if (!inputs.has(e.to)) inputs.set(e.to, []);
    inputs.get(e.to).push(e.from);
  }
  const row = new Map();
  const kindRank = (id) => {
    const i = KIND_ORDER.indexOf(byId.get(id).kind);
    return i < 0 ? KIND_ORDER.length : i;
  };
  for (const col of columns) {
    const key = new Map(col.map((id) => {
      const ins = (inputs.get(id) || []).filter((f) => row.has(f));
      const bary = ins.length ? ins.reduce((s, f) => s + row.get(f), 0) / ins.length : Infinity;
      return [id, bary];
    }));
    col.sort((a, b) => {
      const ka = key.get(a);
      const kb = key.get(b);
      if (ka !== kb) return ka === Infinity ? 1 : kb === Infinity ? -1 : ka - kb;
      return kindRank(a) - kindRank(b) || byId.get(a).name.localeCompare(byId.get(b).name);
    });
    col.forEach((id, i) => row.set(id, i));
  }
  const pos = new Map();
  const tallest = Math.max(1, ...columns.map((c) => c.length));
  const height = 2 * sizes.margin + tallest * sizes.nodeHeight + (tallest - 1) * sizes.rowGap;
  columns.forEach((col, c) => {
    // Each column centred vertically.
    const colHeight = col.length * sizes.nodeHeight + Math.max(0, col.length - 1) * sizes.rowGap;
    const top = sizes.margin + (height - 2 * sizes.margin - colHeight) / 2;
    col.forEach((id, r) => {
      pos.set(id, {x: sizes.margin + c * sizes.columnWidth, y: top + r * (sizes.nodeHeight + sizes.rowGap), column: c, row: r});
    });
  });
  const width = 2 * sizes.margin + Math.max(0, columns.length - 1) * sizes.columnWidth + sizes.nodeWidth;
  return {columns, pos, width, height, depth};
}

/**
 * The counters of a node whose change per second is the rate of its outgoing
 * edges, in order of preference: a source's records, a sink's rows written,
 * else the rows of its table (rows/s), then its version (updates/s) for when
 * the rows do not grow (an aggregate keeps its row count). [{name, unit}].
 */
export function rateCounters(node) {
  const c = node && node.counters;
  if (!c) return [];
  const out = [];
  if (node.kind === 'source' && c.records !== undefined) out.push({name: 'records', unit: 'rows/s'});
  if (node.kind === 'sink' && c.rows_written !== undefined) out.push({name: 'rows_written', unit: 'rows/s'});
  if (c.rows !== undefined) out.push({name: 'rows', unit: 'rows/s'});
  if (c.version !== undefined) out.push({name: 'version', unit: 'upd/s'});
  if (node.kind === 'kpi' && c.runs !== undefined) out.push({name: 'runs', unit: 'runs/s'});
  return out;
}

/** Seconds of samples a rate is measured over (a steadier label than one tick). */
export const RATE_WINDOW_SECONDS = 5;

/**
 * Samples of each node's counters over the last few seconds, giving each
 * node's output rate. add(graph, nowSeconds) after each graph; rate(id) ->
 * {value, unit} (value 0 until two samples).
 */
export class RateTracker {
  constructor(windowSeconds = RATE_WINDOW_SECONDS) {
    this.windowSeconds = windowSeconds;
    this.samples = new Map();  // id -> [{t, counters}]
    this.kinds = new Map();
  }

  add(graph, now) {
    const seen = new Set();
    for (const n of graph.nodes || []) {
      seen.add(n.id);
      this.kinds.set(n.id, n);
      let list = this.samples.get(n.id);
      if (!list) { list = []; this.samples.set(n.id, list); }
      if (list.length && now <= list[list.length - 1].t) continue;
      list.push({t: now, counters: {...(n.counters || {})}});
      // Keep one sample older than the window (the rate spans the whole window).
      while (list.length > 2 && now - list[1].t >= this.windowSeconds) list.shift();
    }
    for (const id of [...this.samples.keys()]) {
      if (!seen.has(id)) { this.samples.delete(id); this.kinds.delete(id); }
    }
  }

  rate(id) {
    const list = this.samples.get(id);
    const node = this.kinds.get(id);
    const candidates = rateCounters(node);
    const fallback = {value: 0, unit: candidates.length ? candidates[0].unit : 'rows/s'};
    if (!list || list.length < 2) return fallback;
    const first = list[0];
    const last = list[list.length - 1];
    const dt = last.t - first.t;
    if (dt <= 0) return fallback;
    for (const {name, unit} of candidates) {
      const a = Number(first.counters[name]);
      const b = Number(last.counters[name]);
      if (!Number.isFinite(a) || !Number.isFinite(b)) continue;
      // A counter that went down (a restart, retention): no rate.
      if (b > a) return {value: (b - a) / dt, unit};
    }
    return fallback;
  }
}

/** A rate for an edge label: "0 rows/s", "0.4 rows/s", "12 rows/s", "1,250 rows/s". */
export function formatEdgeRate({value, unit}) {
  const v = Number(value);
  if (!Number.isFinite(v) || v <= 0) return `0 ${unit}`;
  const text = v < 10 ? v.toFixed(1).replace(/\.0$/, '') : Math.round(v).toLocaleString('en-US');
  return `${text} ${unit}`;
}

/** The second line of a node: lag, errors and last run, as its kind has them. */
export function nodeSubtitle(node, nowSeconds = Date.now() / 1000) {
  const c = node.counters || {};
  const parts = [];
  if (node.kind === 'sink') {
    const lag = Number(c.lag_versions ?? 0);
    const secs = Number(c.lag_seconds ?? 0);
    parts.push(`lag ${formatValue(lag)} v` + (secs > 0 ? ` / ${secs.toFixed(1)} s` : ''));
  } else if (c.lag !== undefined) {
    parts.push(`lag ${formatValue(c.lag)}`);
  }
  if (c.errors !== undefined) parts.push(`${formatValue(c.errors)} err`);
  if (c.last_run_at !== undefined) parts.push(`ran ${formatAge(toUnixSeconds(c.last_run_at), nowSeconds)}`);
  else if (node.kind === 'table' && c.updated_at !== undefined) parts.push(`upd ${formatAge(toUnixSeconds(c.updated_at), nowSeconds)}`);
  if (node.kind === 'table' && c.rows !== undefined) parts.unshift(`${formatValue(c.rows)} rows`);
  if (node.kind === 'kpi' && c.value !== undefined) parts.unshift(`= ${formatValue(c.value)}`);
  if (node.kind === 'alert rule' && c.fired !== undefined) parts.unshift(`fired ${formatValue(c.fired)}`);
  return parts.join(' · ');
}

/** A counter's value for the details table (times as clock + age). */
export function formatCounter(name, value, nowSeconds = Date.now() / 1000) {
  if (/_at$/.test(name)) {
    const t = toUnixSeconds(value);
    if (!Number.isFinite(t) || t <= 0) return 'never';
    return `${new Date(t * 1000).toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z')} (${formatAge(t, nowSeconds)})`;
  }
  return formatValue(value);
}

/** A key naming the graph's shape: the DOM is rebuilt only when it changes. */
export function structureKey(graph) {
  const ids = (graph.nodes || []).map((n) => n.id + '|' + n.kind).sort();
  const edges = (graph.edges || []).map((e) => e.from + '>' + e.to).sort();
  return ids.join('\n') + '\n--\n' + edges.join('\n');
}
