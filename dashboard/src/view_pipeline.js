// Pipeline: the engine's catalog as a graph (sources -> tables -> views /
// windows / tasks -> sinks), live over the WebSocket's `pipeline` channel
// (GET /api/v1/pipeline every 2 s while the socket is down). Each edge shows
// its upstream node's rate, each node its lag, errors and last run; a click
// shows the node's definition (DDL) and counters. Layout and rates:
// pipeline_graph.js.
import {h, setChildren, setText} from './dom.js';
import {ROUTES} from './api.js';
import {LAYOUT, layoutGraph, RateTracker, formatEdgeRate, nodeSubtitle, formatCounter, structureKey} from './pipeline_graph.js';

const SVG_NS = 'http://www.w3.org/2000/svg';
/** Without a pipeline frame for this long, the view polls the REST route. */
const POLL_AFTER_MS = 2500;
const POLL_INTERVAL_MS = 2000;
const KIND_LABEL = {
  'source': 'SOURCE', 'table': 'TABLE', 'materialized view': 'MATERIALIZED VIEW', 'stream view': 'STREAM VIEW',
  'window': 'WINDOW', 'sink': 'SINK', 'kpi': 'KPI', 'alert rule': 'ALERT RULE',
};

/** An SVG element with attributes (and text). */
function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null) continue;
    if (k === 'text') el.textContent = v;
    else el.setAttribute(k, String(v));
  }
  for (const c of children.flat()) if (c) el.append(c);
  return el;
}

/** The point at `t` of the cubic Bézier p0 c1 c2 p3. */
function bezierPoint(p0, c1, c2, p3, t) {
  const u = 1 - t;
  const f = (i) => u * u * u * p0[i] + 3 * u * u * t * c1[i] + 3 * u * t * t * c2[i] + t * t * t * p3[i];
  return [f(0), f(1)];
}

/** Trim a label to `max` characters (the node box is fixed-width). */
function clip(text, max) {
  const t = String(text ?? '');
  return t.length > max ? t.slice(0, max - 1) + '…' : t;
}

export class PipelineView {
  constructor(root, app) {
    this.root = root;
    this.app = app;
    this.server = null;        // the ServerState shown
    this.graph = null;
    this.tracker = new RateTracker();
    this.key = '';
    this.selected = null;      // id of the node in the details panel
    this.lastFrameAt = 0;      // ms, a graph from the socket or a poll
    this.lastSocketFrameAt = 0;
    this.polling = false;
    this.onFrame = (e) => { this.lastSocketFrameAt = Date.now(); this.accept(e.detail); };
    this.build();
  }

  build() {
    this.status = h('span.status#pipeline-status', {text: 'Loading…'});
    this.svg = s('svg', {class: 'pipeline-svg', role: 'img', 'aria-label': 'Pipeline graph'});
    this.empty = h('p.hint.pipeline-empty#pipeline-empty', {hidden: true,
      text: 'No pipeline objects yet: create them in SQL (CREATE TABLE, CREATE SOURCE, …) over psql or POST /api/v1/sql with the admin token.'});
    this.canvas = h('div.pipeline-canvas#pipeline-canvas', {}, this.empty, this.svg);
    this.details = h('aside.panel.pipeline-details#pipeline-details', {'aria-live': 'polite'},
      h('p.hint', {text: 'Click a node to see its definition and counters.'}));
    const legend = h('div.pipeline-legend', {},
      ['running', 'waiting', 'error', 'stopped'].map((st) => h(`span.legend-item.status-${st}`, {}, h('span.legend-dot'), st)));
    this.root.append(
      h('section.panel', {},
        h('div.pipeline-head', {}, h('h2', {text: 'Pipeline'}), legend, this.status),
        h('p.hint', {text: 'Sources → tables → views, windows and tasks → sinks. Edges: the rate out of the upstream node; nodes: lag, errors, last run.'}),
        h('div.pipeline-layout', {}, this.canvas, this.details)));
  }

  /** Show `server` (a ServerState): subscribe to its pipeline channel. Called when the view is shown. */
  attach(server) {
    if (this.server === server) return;
    this.detach();
    this.server = server;
    this.graph = null;
    this.key = '';
    this.tracker = new RateTracker();
    this.lastFrameAt = 0;
    this.lastSocketFrameAt = 0;
    if (!server) return;
    server.conn.addEventListener('pipeline', this.onFrame);
    server.conn.subscribe('pipeline');
    setText(this.status, 'Loading…');
    // Right away from REST as well: the socket may be reconnecting.
    this.poll();
    this.timer = setInterval(() => this.maybePoll(), 1000);
  }

  /** Stop following the server (the view is hidden or another tab is active). */
  detach() {
    clearInterval(this.timer);
    this.timer = null;
    if (this.server) {
      this.server.conn.removeEventListener('pipeline', this.onFrame);
      this.server.conn.unsubscribe('pipeline');
    }
    this.server = null;
  }

  /** The 2 s fallback: poll while no frame came over the socket lately. */
  maybePoll() {
    if (!this.server || this.app.paused || document.hidden) return;
    const now = Date.now();
    if (now - this.lastSocketFrameAt < POLL_AFTER_MS) return;
    if (now - this.lastFrameAt < POLL_INTERVAL_MS) return;
    this.poll();
  }

  async poll() {
    const server = this.server;
    if (!server || this.polling) return;
    this.polling = true;
    try {
      const graph = await server.conn.get(ROUTES.pipeline);
      if (server === this.server) this.accept(graph);
    } catch (e) {
      if (server === this.server) {
        setText(this.status, `Not available: ${e.message}`);
        this.status.className = 'status error';
      }
    } finally {
      this.polling = false;
    }
  }

  accept(graph) {
    if (!graph || !Array.isArray(graph.nodes)) return;
    this.graph = {nodes: graph.nodes, edges: Array.isArray(graph.edges) ? graph.edges : []};
    this.lastFrameAt = Date.now();
    this.tracker.add(this.graph, this.lastFrameAt / 1000);
    if (!this.root.hidden) this.draw();
  }

  /** Re-render from the last graph (called by the app's render loop too). */
  render() {
    if (this.graph) this.draw();
  }

  draw() {
    const g = this.graph;
    const live = this.server && this.lastSocketFrameAt && Date.now() - this.lastSocketFrameAt < POLL_AFTER_MS;
    setText(this.status, `${g.nodes.length} objects · ${g.edges.length} edges · ${live ? 'live' : 'polling'}`);
    this.status.className = 'status';
    this.empty.hidden = g.nodes.length > 0;
    const key = structureKey(g);
    if (key !== this.key) {
      this.key = key;
      this.buildSvg();
    }
    this.update();
    this.showDetails();
  }

  buildSvg() {
    const g = this.graph;
    const layout = layoutGraph(g.nodes, g.edges);
    this.layout = layout;
    this.svg.setAttribute('viewBox', `0 0 ${layout.width} ${layout.height}`);
    this.svg.setAttribute('width', String(layout.width));
    this.svg.setAttribute('height', String(layout.height));
    // Shrinks to the panel's width (CSS max-width), down to 3/4; then scrolls.
    this.svg.style.minWidth = `${Math.round(layout.width * 0.75)}px`;
    this.nodeEls = new Map();
    this.edgeEls = [];
    const defs = s('defs', {}, s('marker', {id: 'pipeline-arrow', viewBox: '0 0 10 10', refX: '9', refY: '5',
      markerWidth: '7', markerHeight: '7', orient: 'auto-start-reverse'}, s('path', {d: 'M 0 0 L 10 5 L 0 10 z', class: 'pipeline-arrowhead'})));
    const edgeLayer = s('g', {class: 'pipeline-edges'});
    const nodeLayer = s('g', {class: 'pipeline-nodes'});
    const {nodeWidth: w, nodeHeight: nh} = LAYOUT;
    for (const e of g.edges) {
      const a = layout.pos.get(e.from);
      const b = layout.pos.get(e.to);
      if (!a || !b) continue;
      const x1 = a.x + w;
      const y1 = a.y + nh / 2;
      const x2 = b.x;
      const y2 = b.y + nh / 2;
      const dx = Math.max(30, (x2 - x1) / 2);
      const c1 = [x1 + dx, y1];
      const c2 = [x2 - dx, y2];
      const path = s('path', {class: 'pipeline-edge-line', d: `M ${x1} ${y1} C ${c1[0]} ${c1[1]}, ${c2[0]} ${c2[1]}, ${x2 - 2} ${y2}`,
        'marker-end': 'url(#pipeline-arrow)'});
      // The rate label sits on the curve's middle, in the gap between two
      // columns (a fan of edges out of one node keeps its labels apart); a
      // backing box keeps it readable over crossing lines.
      const [mx, my] = bezierPoint([x1, y1], c1, c2, [x2, y2], 0.5);
      const text = s('text', {class: 'pipeline-edge-rate', x: mx, y: my + 4, 'text-anchor': 'middle', text: '0 rows/s'});
      const back = s('rect', {class: 'pipeline-edge-rate-bg', x: mx - 40, y: my - 9, width: 80, height: 18, rx: 9});
      const label = s('g', {class: 'pipeline-edge-label'}, back, text);
      const el = s('g', {class: 'pipeline-edge', 'data-from': e.from, 'data-to': e.to}, path, label);
      edgeLayer.append(el);
      this.edgeEls.push({edge: e, el, label, text, back, mx});
    }
    for (const n of g.nodes) {
      const p = layout.pos.get(n.id);
      if (!p) continue;
      const title = s('title', {text: n.id});
      const rect = s('rect', {class: 'pipeline-box', x: p.x, y: p.y, width: w, height: nh, rx: 10});
      const bar = s('rect', {class: 'pipeline-bar', x: p.x, y: p.y, width: 5, height: nh, rx: 2});
      const kind = s('text', {class: 'pipeline-kind', x: p.x + 14, y: p.y + 16, text: KIND_LABEL[n.kind] || n.kind.toUpperCase()});
      const dot = s('circle', {class: 'pipeline-dot', cx: p.x + w - 14, cy: p.y + 12, r: 5});
      const name = s('text', {class: 'pipeline-name', x: p.x + 14, y: p.y + 34, text: clip(n.name, 21)});
      const sub = s('text', {class: 'pipeline-sub', x: p.x + 14, y: p.y + 50, text: ''});
      const el = s('g', {class: 'pipeline-node', 'data-id': n.id, 'data-kind': n.kind, tabindex: '0', role: 'button',
        'aria-label': `${n.kind} ${n.name}`}, title, rect, bar, kind, dot, name, sub);
      el.addEventListener('click', () => this.select(n.id));
      el.addEventListener('keydown', (ev) => {
        if (ev.key === 'Enter' || ev.key === ' ') { ev.preventDefault(); this.select(n.id); }
      });
      nodeLayer.append(el);
      this.nodeEls.set(n.id, {el, sub, title});
    }
    setChildren(this.svg, defs, edgeLayer, nodeLayer);
    if (this.selected && !this.nodeEls.has(this.selected)) this.selected = null;
  }

  update() {
    const now = Date.now() / 1000;
    for (const n of this.graph.nodes) {
      const ref = this.nodeEls.get(n.id);
      if (!ref) continue;
      const status = n.status || 'running';
      const cls = `pipeline-node status-${status}${n.id === this.selected ? ' selected' : ''}`;
      if (ref.el.getAttribute('class') !== cls) ref.el.setAttribute('class', cls);
      ref.el.setAttribute('data-status', status);
      setText(ref.sub, clip(nodeSubtitle(n, now), 30));
      setText(ref.title, n.error ? `${n.id}: ${status}\n${n.error}` : `${n.id}: ${status}`);
    }
    for (const ref of this.edgeEls) {
      const rate = this.tracker.rate(ref.edge.from);
      const label = formatEdgeRate(rate);
      setText(ref.text, label);
      ref.el.setAttribute('data-rate', String(rate.value));
      ref.el.classList.toggle('active', rate.value > 0);
      const width = 14 + 6.6 * label.length;
      ref.back.setAttribute('width', String(width));
      ref.back.setAttribute('x', String(ref.mx - width / 2));
    }
  }

  select(id) {
    this.selected = id;
    for (const [nid, ref] of this.nodeEls) ref.el.classList.toggle('selected', nid === id);
    this.showDetails(true);
  }

  /** The details panel: the selected node's status, error, DDL and counters. */
  showDetails(force = false) {
    const n = this.selected && this.graph.nodes.find((x) => x.id === this.selected);
    if (!n) {
      if (force || this.details.dataset.id) {
        delete this.details.dataset.id;
        setChildren(this.details, h('p.hint', {text: 'Click a node to see its definition and counters.'}));
      }
      return;
    }
    const now = Date.now() / 1000;
    const counters = Object.entries(n.counters || {});
    if (this.details.dataset.id !== n.id || force || !this.detailRefs) {
      this.details.dataset.id = n.id;
      const refs = this.detailRefs = {
        status: h('span.badge.pipeline-status-badge'),
        error: h('div.pipeline-error', {role: 'alert'}),
        ddl: h('pre.pipeline-ddl'),
        options: h('div.pipeline-options'),
        body: h('tbody'),
      };
      setChildren(this.details,
        h('div.pipeline-details-head', {}, h('h3', {text: n.name}), h('span.badge', {text: n.kind}), refs.status),
        refs.error,
        h('h4', {text: 'Definition'}), refs.ddl, refs.options,
        h('h4', {text: 'Counters'}),
        h('table.grid.pipeline-counters', {}, h('thead', {}, h('tr', {}, h('th', {text: 'Counter'}), h('th', {text: 'Value'}))), refs.body));
    }
    const r = this.detailRefs;
    const status = n.status || 'running';
    setText(r.status, status);
    r.status.className = `badge pipeline-status-badge status-${status}`;
    setText(r.error, n.error || '');
    r.error.hidden = !n.error;
    setText(r.ddl, n.ddl || '(defined outside the catalog: no DDL)');
    setText(r.options, n.options ? `Options: ${n.options}` : '');
    r.options.hidden = !n.options;
    const rows = r.body.children;
    if (rows.length !== counters.length || counters.some(([k], i) => rows[i].dataset.counter !== k)) {
      setChildren(r.body, counters.map(([k]) => h('tr', {dataset: {counter: k}}, h('td', {text: k}), h('td'))));
    }
    counters.forEach(([k, v], i) => setText(r.body.children[i].children[1], formatCounter(k, v, now)));
  }
}
