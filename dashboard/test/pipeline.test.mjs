// Unit tests of the Pipeline view's logic (node --test): layout and rates.
import test from 'node:test';
import assert from 'node:assert/strict';
import {nodeDepths, layoutGraph, LAYOUT, RateTracker, rateCounters, formatEdgeRate, nodeSubtitle,
        formatCounter, structureKey} from '../src/pipeline_graph.js';

const node = (kind, name, counters = {}, status = 'running') => ({id: `${kind}:${name}`, kind, name, counters, status});
const edge = (from, to) => ({from, to});

const NODES = [
  node('sink', 'files', {rows_written: 0}),
  node('alert rule', 'r', {fired: 0}),
  node('kpi', 'total', {runs: 0}),
  node('window', 'per_min', {rows: 0, version: 0}),
  node('stream view', 'big', {rows: 0, version: 0}),
  node('materialized view', 'by_region', {rows: 0, version: 0}),
  node('table', 'orders', {rows: 0, version: 0}),
  node('source', 'orders_in', {records: 0}),
  node('source', 'broken', {records: 0, errors: 3}, 'error'),
];
const EDGES = [
  edge('source:orders_in', 'table:orders'),
  edge('source:broken', 'table:orders'),
  edge('table:orders', 'materialized view:by_region'),
  edge('table:orders', 'stream view:big'),
  edge('table:orders', 'window:per_min'),
  edge('table:orders', 'kpi:total'),
  edge('kpi:total', 'alert rule:r'),
  edge('materialized view:by_region', 'sink:files'),
];

test('depths follow the edges left to right; sinks go last', () => {
  const d = nodeDepths(NODES, EDGES);
  assert.equal(d.get('source:orders_in'), 0);
  assert.equal(d.get('table:orders'), 1);
  assert.equal(d.get('materialized view:by_region'), 2);
  assert.equal(d.get('kpi:total'), 2);
  assert.equal(d.get('alert rule:r'), 3);
  assert.equal(d.get('sink:files'), 4);
  for (const e of EDGES) assert.ok(d.get(e.from) < d.get(e.to), `${e.from} -> ${e.to}`);
});

test('a view over a view is a column further; a cycle does not hang', () => {
  const nodes = [node('table', 't'), node('materialized view', 'a'), node('materialized view', 'b')];
  const d = nodeDepths(nodes, [edge('table:t', 'materialized view:a'), edge('materialized view:a', 'materialized view:b')]);
  assert.deepEqual([d.get('table:t'), d.get('materialized view:a'), d.get('materialized view:b')], [0, 1, 2]);
  const cyc = nodeDepths(nodes, [edge('materialized view:a', 'materialized view:b'), edge('materialized view:b', 'materialized view:a')]);
  assert.equal(cyc.size, 3);
  // Edges to unknown nodes are ignored.
  assert.equal(nodeDepths([node('table', 't')], [edge('table:t', 'sink:gone')]).get('table:t'), 0);
  // Lone nodes keep their kind's column: an alert rule right of a table.
  const lone = nodeDepths([node('table', 't'), node('alert rule', 'x')], []);
  assert.ok(lone.get('alert rule:x') > lone.get('table:t'));
});

test('layout: every node placed once, no overlaps, edges point right, inside the size', () => {
  const l = layoutGraph(NODES, EDGES);
  assert.equal(l.pos.size, NODES.length);
  assert.deepEqual(l.columns.flat().sort(), NODES.map((n) => n.id).sort());
  const boxes = [...l.pos.values()];
  for (let i = 0; i < boxes.length; i++) {
    const a = boxes[i];
    assert.ok(a.x >= 0 && a.y >= 0 && a.x + LAYOUT.nodeWidth <= l.width && a.y + LAYOUT.nodeHeight <= l.height);
    for (let j = i + 1; j < boxes.length; j++) {
      const b = boxes[j];
      const apart = a.x + LAYOUT.nodeWidth <= b.x || b.x + LAYOUT.nodeWidth <= a.x ||
        a.y + LAYOUT.nodeHeight <= b.y || b.y + LAYOUT.nodeHeight <= a.y;
      assert.ok(apart, `boxes ${i} and ${j} overlap`);
    }
  }
  for (const e of EDGES) assert.ok(l.pos.get(e.from).x < l.pos.get(e.to).x);
  // Within a column: the sources' order is stable (by name), the two sources share column 0.
  assert.deepEqual(l.columns[0], ['source:broken', 'source:orders_in']);
  // Empty graph: a drawable size.
  const empty = layoutGraph([], []);
  assert.ok(empty.width > 0 && empty.height > 0);
});

test('layout orders a column by its inputs (fewer crossings)', () => {
  const nodes = [node('table', 'a'), node('table', 'b'), node('materialized view', 'x_from_b'), node('materialized view', 'y_from_a')];
  const l = layoutGraph(nodes, [edge('table:a', 'materialized view:y_from_a'), edge('table:b', 'materialized view:x_from_b')]);
  assert.ok(l.pos.get('materialized view:y_from_a').y < l.pos.get('materialized view:x_from_b').y);
});

test('rate counters by kind', () => {
  assert.deepEqual(rateCounters(node('source', 's', {records: 1})).map((c) => c.name), ['records']);
  assert.deepEqual(rateCounters(node('sink', 'k', {rows_written: 1})).map((c) => c.name), ['rows_written']);
  assert.deepEqual(rateCounters(node('table', 't', {rows: 1, version: 1})).map((c) => c.name), ['rows', 'version']);
  assert.deepEqual(rateCounters(null), []);
});

test('rate: growth per second over the window, version as a fallback, 0 on reset', () => {
  const r = new RateTracker(5);
  const graph = (records, rows, version) => ({nodes: [
    node('source', 's', {records}), node('materialized view', 'v', {rows, version})], edges: []});
  r.add(graph(0, 3, 1), 100);
  assert.deepEqual(r.rate('source:s'), {value: 0, unit: 'rows/s'});
  r.add(graph(50, 3, 3), 101);
  r.add(graph(100, 3, 5), 102);
  assert.equal(r.rate('source:s').value, 50);
  // An aggregate keeps its row count: its version rate shows instead.
  assert.deepEqual(r.rate('materialized view:v'), {value: 2, unit: 'upd/s'});
  // Nothing new for longer than the window: back to 0.
  for (let t = 103; t <= 110; t++) r.add(graph(100, 3, 5), t);
  assert.equal(r.rate('source:s').value, 0);
  // A counter that goes down (restart) gives no negative rate.
  r.add(graph(10, 3, 5), 111);
  assert.equal(r.rate('source:s').value, 0);
  // A repeated or older timestamp is ignored.
  r.add(graph(1000, 3, 5), 111);
  assert.equal(r.rate('source:s').value, 0);
  // A node that disappears is forgotten.
  r.add({nodes: [node('source', 's', {records: 10})]}, 112);
  assert.equal(r.samples.has('materialized view:v'), false);
  assert.deepEqual(r.rate('unknown:x'), {value: 0, unit: 'rows/s'});
});

test('edge rate labels', () => {
  assert.equal(formatEdgeRate({value: 0, unit: 'rows/s'}), '0 rows/s');
  assert.equal(formatEdgeRate({value: -3, unit: 'rows/s'}), '0 rows/s');
  assert.equal(formatEdgeRate({value: 0.44, unit: 'upd/s'}), '0.4 upd/s');
  assert.equal(formatEdgeRate({value: 2, unit: 'rows/s'}), '2 rows/s');
  assert.equal(formatEdgeRate({value: 12.4, unit: 'rows/s'}), '12 rows/s');
  assert.equal(formatEdgeRate({value: 1250.2, unit: 'rows/s'}), '1,250 rows/s');
});

test('node subtitles: lag, errors, last run by kind', () => {
  const now = 1_700_000_100;
  assert.equal(nodeSubtitle(node('source', 's', {records: 5, errors: 2, lag: 7}), now), 'lag 7 · 2 err');
  assert.equal(nodeSubtitle(node('sink', 'k', {rows_written: 1, errors: 0, lag_versions: 3, lag_seconds: 1.5}), now),
    'lag 3 v / 1.5 s · 0 err');
  assert.equal(nodeSubtitle(node('materialized view', 'v', {errors: 1, last_run_at: now - 30}), now), '1 err · ran 30 s ago');
  assert.equal(nodeSubtitle(node('table', 't', {rows: 1234, updated_at: now - 30}), now), '1,234 rows · upd 30 s ago');
  assert.equal(nodeSubtitle(node('kpi', 'k', {value: 42, errors: 0}), now), '= 42 · 0 err');
  assert.equal(nodeSubtitle(node('alert rule', 'r', {fired: 2}), now), 'fired 2');
});

test('counters for the details table; structure key ignores counters', () => {
  assert.equal(formatCounter('rows', 1234), '1,234');
  assert.equal(formatCounter('last_run_at', 0), 'never');
  assert.match(formatCounter('last_run_at', 1_700_000_000, 1_700_000_030), /^2023-11-14 22:13:20Z \(30 s ago\)$/);
  const a = {nodes: NODES, edges: EDGES};
  const b = {nodes: NODES.map((n) => ({...n, counters: {rows: 99}})).reverse(), edges: [...EDGES].reverse()};
  assert.equal(structureKey(a), structureKey(b));
  assert.notEqual(structureKey(a), structureKey({nodes: NODES, edges: EDGES.slice(1)}));
});
