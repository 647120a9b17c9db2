// Unit tests of the dashboard's client-side logic (node --test).
import test from 'node:test';
import assert from 'node:assert/strict';
import {formatValue, formatBytes, formatDuration, formatAge, kindOf, memoryLevel, trend, toCsv,
        toUnixSeconds, escapeHtml} from '../src/format.js';
import {SeriesBuffer, BoundedList, downsampleMinMax, pointsForWidth, TIME_RANGES, DEFAULT_RANGE_SECONDS} from '../src/buffers.js';
import {validateRuleForm, evaluate, describeRule} from '../src/rules.js';
import {normalizeAlert, visibleAlerts, sourceKind} from '../src/alerts.js';
import {normalizeAddress} from '../src/api.js';
import {toneFor, scheduleTone, DEFAULT_SOUND_PREFS, SoundPlayer} from '../src/sound.js';
import {readResult} from '../src/result.js';
import {readMetrics, listOf, businessValues, pivotKpiCells, connectorRows} from '../src/state.js';
import {cdcProgress} from '../src/state.js';

test('values format by kind', () => {
  assert.equal(formatValue(13025.214, 'currency'), '$13,025.21');
  assert.equal(formatValue(-5, 'currency'), '-$5.00');
  assert.equal(formatValue(0.265, 'percent'), '26.5%');
  assert.equal(formatValue(37.6, 'percent'), '37.6%');
  assert.equal(formatValue(1234567), '1,234,567');
  assert.equal(formatValue(null), '—');
  assert.equal(formatValue(NaN), 'NaN');
  assert.equal(kindOf('total_revenue ($)'), 'currency');
  assert.equal(kindOf('max_order_amount'), 'currency');
  assert.equal(kindOf('cancelled_ratio'), 'percent');
  assert.equal(kindOf('order_count'), 'count');
});

test('bytes, durations, ages', () => {
  assert.equal(formatBytes(1536), '1.50 KB');
  assert.equal(formatBytes(512), '512 B');
  assert.equal(formatBytes(3.6 * 1024 ** 3), '3.60 GB');
  assert.equal(formatDuration(17), '17 ms');
  assert.equal(formatDuration(1250), '1.25 s');
  assert.equal(formatDuration(185000), '3m 05s');
  assert.equal(formatAge(100, 100.5), 'just now');
  assert.equal(formatAge(100, 130), '30 s ago');
  assert.equal(formatAge(0, 130), 'never');
});

test('memory bar turns purple above 70 and red above 85', () => {
  assert.equal(memoryLevel(70), 'normal');
  assert.equal(memoryLevel(70.1), 'high');
  assert.equal(memoryLevel(85), 'high');
  assert.equal(memoryLevel(85.1), 'critical');
});

test('trend and csv', () => {
  assert.deepEqual(trend(1, 3), {dir: 'up', delta: 2});
  assert.equal(trend(3, 1).dir, 'down');
  assert.equal(trend(NaN, 1).dir, 'flat');
  assert.equal(toCsv(['a', 'b'], [{a: 1, b: 'x,"y"'}, {a: null, b: 'z'}]), 'a,b\r\n1,"x,""y"""\r\n,z\r\n');
  assert.equal(escapeHtml('<a href="x">&</a>'), '&lt;a href=&quot;x&quot;&gt;&amp;&lt;/a&gt;');
});

test('timestamps in seconds, milliseconds and ISO', () => {
  assert.equal(toUnixSeconds(1700000000), 1700000000);
  assert.equal(toUnixSeconds(1700000000123), 1700000000.123);
  assert.equal(toUnixSeconds('2023-11-14T22:13:20Z'), 1700000000);
  assert.equal(toUnixSeconds('2023-11-14 22:13:20Z'), 1700000000);
  assert.ok(Number.isNaN(toUnixSeconds('nope')));
});

test('series buffer keeps the newest points within capacity', () => {
  const b = new SeriesBuffer(3);
  for (let i = 0; i < 5; i++) b.push(i, i * 10);
  assert.deepEqual(b.points(), [{x: 2, y: 20}, {x: 3, y: 30}, {x: 4, y: 40}]);
  assert.equal(b.push(1, 0), false, 'older points are ignored');
  assert.deepEqual(b.points(3), [{x: 3, y: 30}, {x: 4, y: 40}]);
  assert.equal(b.lastY(), 40);
  const l = new BoundedList(2);
  l.push(1); l.push(2); l.push(3);
  assert.deepEqual(l.items, [2, 3]);
});

test('min/max down-sampling keeps extremes and bounds the size', () => {
  const pts = Array.from({length: 10000}, (_, i) => ({x: i, y: Math.sin(i / 50)}));
  pts[5000].y = 99;
  pts[7000].y = -99;
  const d = downsampleMinMax(pts, 200);
  assert.ok(d.length <= 200, `got ${d.length}`);
  assert.ok(d.some((p) => p.y === 99) && d.some((p) => p.y === -99));
  for (let i = 1; i < d.length; i++) assert.ok(d[i].x >= d[i - 1].x, 'x stays ordered');
  assert.equal(downsampleMinMax(pts.slice(0, 10), 200).length, 10);
});

test('rule form validation', () => {
  const ok = validateRuleForm({name: ' High CPU ', metric: 'cpu_usage', operator: '>', threshold: '80', cooldown_seconds: ''});
  assert.equal(ok.ok, true);
  assert.deepEqual(ok.rule, {name: 'High CPU', metric: 'cpu_usage', op: '>', threshold: 80,
    cooldown_seconds: 10, severity: 'warning', enabled: true});
  const bad = validateRuleForm({name: '', metric: '', operator: '=>', threshold: 'x', cooldown_seconds: -1, webhook_url: 'ftp://x'});
  assert.equal(bad.ok, false);
  assert.deepEqual(Object.keys(bad.errors).sort(), ['cooldown_seconds', 'metric', 'name', 'operator', 'threshold', 'webhook_url']);
  const hook = validateRuleForm({name: 'r', metric: 'm', operator: '==', threshold: 0, webhook_url: 'http://127.0.0.1:1/x', webhook_format: 'custom'});
  assert.equal(hook.rule.webhook, 'http://127.0.0.1:1/x');
  assert.equal(hook.rule.webhook_format, 'custom');
  assert.equal(evaluate('>=', 5, 5), true);
  assert.equal(evaluate('<', 5, 5), false);
  assert.equal(evaluate('==', 5, 5), true);
  assert.throws(() => evaluate('!=', 1, 2));
  assert.equal(describeRule({metric: 'cpu_usage', operator: '>', threshold: 80, cooldown_seconds: 10}), 'cpu_usage > 80 (cooldown 10 s)');
});

test('alerts: badges and filters', () => {
  const raw = [
    {ts: 1, severity: 'error', source: 'engine', message: 'boom'},
    {ts: 2, severity: 'warning', source: 'user', message: 'slow'},
    {ts: 3, severity: 'info', source: 'rule', message: 'fired', detail: 'x'},
    {ts: 4, severity: 'WEIRD', source: 'connector:orders', message: '?'},
  ].map(normalizeAlert);
  assert.deepEqual(raw.map((a) => a.kind), ['Engine', 'User', 'Rule', 'Engine']);
  assert.equal(raw[3].severity, 'info');
  assert.deepEqual(visibleAlerts(raw, 'All').map((a) => a.ts), [4, 3, 2, 1]);
  assert.deepEqual(visibleAlerts(raw, 'Errors').map((a) => a.ts), [1]);
  assert.deepEqual(visibleAlerts(raw, 'Warnings').map((a) => a.ts), [2]);
  assert.deepEqual(visibleAlerts(raw, 'Rules').map((a) => a.ts), [3]);
  assert.deepEqual(visibleAlerts(raw, 'User').map((a) => a.ts), [2]);
  assert.deepEqual(visibleAlerts(raw, 'Engine').map((a) => a.ts), [4, 1]);
  assert.deepEqual(visibleAlerts(raw, 'All', 2).map((a) => a.ts), [4, 3], 'Clear hides older entries');
  assert.equal(sourceKind({component: 'user'}), 'User');
});

test('addresses', () => {
  assert.equal(normalizeAddress('quack:127.0.0.1:9494'), 'http://127.0.0.1:9494');
  assert.equal(normalizeAddress('localhost:8080/'), 'http://localhost:8080');
  assert.equal(normalizeAddress('https://rill.example:443/x'), 'https://rill.example');
  assert.throws(() => normalizeAddress(''));
});

test('sound: tone choice and scheduling', () => {
  assert.equal(toneFor(DEFAULT_SOUND_PREFS, 'error'), 'buzzer');
  assert.equal(toneFor({...DEFAULT_SOUND_PREFS, mode: 'global', globalTone: 'chime'}, 'error'), 'chime');
  const started = [];
  const ctx = {
    currentTime: 0, destination: {},
    createGain: () => ({gain: {value: 0}, connect() {}, disconnect() {}}),
    createOscillator: () => ({type: '', frequency: {setValueAtTime() {}}, connect() {},
      start: (t) => started.push(t), stop() {}}),
  };
  const n = scheduleTone(ctx, 'classic', 5);
  assert.equal(n, started.length);
  assert.ok(n >= 9 && n <= 11, `a 0.5 s beep over 5 s: ${n}`);
  assert.ok(Math.max(...started) < 5.02);
  started.length = 0;
  assert.equal(scheduleTone(ctx, 'classic', 100), started.length);
  assert.ok(Math.max(...started) < 30.02, 'duration is capped at 30 s');
});

test('query results and metrics records', () => {
  const r = readResult({columns: [{name: 'a', type: 'INTEGER'}, {name: 'b', type: 'VARCHAR'}], rows: [[1, 'x'], [2, null]]});
  assert.deepEqual(r, {columns: ['a', 'b'], rows: [{a: 1, b: 'x'}, {a: 2, b: null}]});
  assert.deepEqual(readResult({rows: [{c: 1}]}), {columns: ['c'], rows: [{c: 1}]});
  const m = readMetrics({timestamp: 10, cpu_usage: 37.5, used_memory: 3, total_memory: 4,
    records_per_second: 100, business_metrics: '{"revenue": 5}'});
  assert.equal(m.memPercent, 75);
  assert.equal(m.cpu, 37.5);
  assert.deepEqual(m.business, {revenue: 5});
  assert.deepEqual(listOf({alerts: [1]}, 'alerts'), [1]);
  assert.deepEqual(listOf(null, 'x'), []);
});

test('base64url carries any token in a WebSocket subprotocol', async () => {
  const {base64url} = await import('../src/api.js');
  assert.equal(base64url('secret_token'), 'c2VjcmV0X3Rva2Vu');
  assert.equal(base64url('ü?>'), 'w7w_Pg');
  assert.match(base64url('a'.repeat(100)), /^[A-Za-z0-9_-]+$/);
});

test('history is asked for at about twice the chart width, bounded', () => {
  assert.equal(pointsForWidth(700), 1400);
  assert.equal(pointsForWidth(10), 200);
  assert.equal(pointsForWidth(100000), 8000);
  assert.equal(pointsForWidth(undefined), 1200);
});

test('time ranges: 30/60/90 (default)/100/180/300 s and all', () => {
  assert.deepEqual(TIME_RANGES.map((r) => r.seconds), [30, 60, 90, 100, 180, 300, Infinity]);
  assert.equal(DEFAULT_RANGE_SECONDS, 90);
});

test('business metrics from the server ({value, ok, error}) and plain numbers', () => {
  assert.deepEqual(businessValues({a: {value: 3, ok: true, error: ''}, b: {value: 1, ok: false, error: 'x'}, c: 2.5, d: 'n/a'}),
                   {a: 3, c: 2.5});
  const m = readMetrics({timestamp: 10, metrics_db_file_bytes: 4096, metrics_duckdb_memory_bytes: 0,
                         duckdb_memory_bytes: 1024, business_metrics: {rev: {value: 12, ok: true}}});
  assert.equal(m.metricsDbFile, 4096);
  assert.equal(m.metricsDbMemory, 0);
  assert.equal(m.duckdbLive, 1024);
  assert.deepEqual(m.business, {rev: 12});
  // Older servers: only in `values`.
  assert.equal(readMetrics({values: {metrics_db_file_bytes: 77}}).metricsDbFile, 77);
});

test('bounded buffers stay bounded over many pushes', () => {
  const b = new SeriesBuffer(100);
  for (let i = 0; i < 100000; i++) b.push(i, i);
  assert.equal(b.length, 100);
  assert.equal(b.points().length, 100);
  assert.equal(b.points()[0].x, 99900);
  const l = new BoundedList(50);
  for (let i = 0; i < 10000; i++) l.push(i);
  assert.equal(l.length, 50);
  assert.equal(l.items[0], 9950);
});

test('sound: a burst of alerts is one tone; a more severe alert replaces it', () => {
  let oscillators = 0;
  let closed = 0;
  const fakeContext = () => ({
    currentTime: 0, destination: {}, state: 'running', close: async () => { closed++; },
    createGain: () => ({gain: {value: 0}, connect() {}, disconnect() {}}),
    createOscillator: () => { oscillators++; return {type: '', frequency: {setValueAtTime() {}}, connect() {}, start() {}, stop() {}}; },
  });
  const p = new SoundPlayer({durationSeconds: 5}, fakeContext);
  assert.equal(p.playFor('warning', 0), true);
  const afterFirst = oscillators;
  assert.ok(afterFirst > 0);
  assert.equal(p.playFor('warning', 1000), false, 'same severity while playing');
  assert.equal(p.playFor('info', 2000), false, 'lower severity while playing');
  assert.equal(oscillators, afterFirst);
  assert.equal(p.playFor('error', 3000), true, 'more severe replaces');
  assert.equal(closed, 1);
  assert.equal(p.playFor('error', 9000), true, 'after the tone ends');
  const off = new SoundPlayer({enabled: false}, fakeContext);
  assert.equal(off.playFor('error', 0), false);
  assert.equal(p.play('chime', 1), true, 'Test always plays');
});

test('KPI rows from rill_kpi_history cells', () => {
  const cells = [
    {row_index: 1, column_name: 'region', value: null, text: 'US'},
    {row_index: 0, column_name: 'region', value: null, text: 'EU'},
    {row_index: 0, column_name: 'revenue', value: 530.75, text: null},
    {row_index: 1, column_name: 'revenue', value: 99, text: null},
  ];
  assert.deepEqual(pivotKpiCells(cells), {columns: ['region', 'revenue'],
    rows: [{region: 'EU', revenue: 530.75}, {region: 'US', revenue: 99}]});
  assert.deepEqual(pivotKpiCells([]), {columns: [], rows: []});
});

test('the Connectors table lists the sinks after the connectors, with lag, drops and errors', () => {
  const rows = connectorRows(
    [{connector: 'in', table: 'orders', buffered_records: 3, dropped_records: 0, rejected_records: 1}],
    [{sink: 'out', type: 'kafka', table: 'orders', mode: 'upsert', lag_versions: 2, lag_seconds: 0.5,
      dropped_rows: 4, errors: 1, rows_written: 10, batches: 2, retries: 1, backpressure: true,
      last_error: 'broker down'}]);
  assert.equal(rows.length, 2);
  assert.deepEqual(rows[0].cells, ['in', 'orders', '3', '0', '1']);
  assert.equal(rows[1].kind, 'sink');
  assert.deepEqual(rows[1].cells, ['→ out (kafka)', 'orders', 'lag 2 v / 0.5 s (backpressure)', '4', '1']);
  assert.match(rows[1].title, /10 rows in 2 commits, 1 retries, holding .* back; last error: broker down/);
  assert.deepEqual(connectorRows([], undefined), []);
});

test('a change-data-capture connector shows its snapshot progress, then its slot lag', () => {
  const running = {connector: 'pg', table: 'orders', snapshot_done: false, snapshot_rows: 250,
    snapshot_rows_total: 1000, snapshot_rows_per_s: 50, snapshot_eta_seconds: 15, lag_bytes: 0};
  assert.equal(cdcProgress(running), 'snapshot 250 / ~1000 rows (25%), 50 rows/s, ETA 15 s');
  const rows = connectorRows([running, {...running, snapshot_done: true, buffered_records: 2,
    lag_bytes: 4096}], []);
  assert.equal(rows[0].cells[2], 'snapshot 250 / ~1000 rows (25%), 50 rows/s, ETA 15 s');
  assert.equal(rows[1].cells[2], '2, lag 4096 B');
  assert.match(rows[1].title, /slot lag 4096 bytes/);
  assert.equal(cdcProgress({connector: 'in', buffered_records: 1}), undefined);
});
