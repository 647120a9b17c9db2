// Charts: uPlot (faster than Chart.js on 100k points in the test browser, even
// against Chart.js with LTTB decimation: bench/dashboard_bench.py, figures in
// dashboard/README.md) with what the dashboard needs added as small plugins:
// wheel and pinch zoom, drag-select zoom, shift+drag pan, double-click reset,
// keyboard zoom/pan, a tooltip, a legend, time on the x axis, dark theme.
// Bars and scatter use uPlot's path builders.
import uPlot from 'uplot';
import {formatTime} from './format.js';
import {pointsForWidth} from './buffers.js';

export {pointsForWidth};

export const PALETTE = ['#38bdf8', '#a78bfa', '#34d399', '#fbbf24', '#f87171', '#f472b6', '#22d3ee'];
const AXIS = {stroke: '#c9d1e4', grid: {stroke: 'rgba(148,163,184,0.12)', width: 1},
              ticks: {stroke: 'rgba(148,163,184,0.25)', width: 1}, font: '11px system-ui, sans-serif'};

/** Every live chart, by id (read by the browser tests). */
export const registry = new Map();

/** Align series of {x, y} points on the union of their x values (nulls where missing). */
export function alignSeries(seriesPoints) {
  if (seriesPoints.length === 1) {
    const p = seriesPoints[0];
    return [p.map((q) => q.x), p.map((q) => q.y)];
  }
  const same = seriesPoints.every((p) => p.length === seriesPoints[0].length &&
    p.every((q, i) => q.x === seriesPoints[0][i].x));
  if (same) return [seriesPoints[0].map((q) => q.x), ...seriesPoints.map((p) => p.map((q) => q.y))];
  const xs = Array.from(new Set(seriesPoints.flatMap((p) => p.map((q) => q.x)))).sort((a, b) => a - b);
  const index = new Map(xs.map((x, i) => [x, i]));
  return [xs, ...seriesPoints.map((p) => {
    const ys = new Array(xs.length).fill(null);
    for (const q of p) ys[index.get(q.x)] = q.y;
    return ys;
  })];
}

/** Wheel zoom, pinch zoom and shift+drag pan on the x scale. */
function interactionPlugin(handle) {
  return {hooks: {ready: (u) => {
    const over = u.over;
    const zoomAt = (factor, leftPx) => {
      const {min, max} = u.scales.x;
      if (!Number.isFinite(min) || !Number.isFinite(max)) return;
      const at = u.posToVal(leftPx, 'x');
      const nmin = at - (at - min) * factor;
      const nmax = at + (max - at) * factor;
      handle.userScale(nmin, nmax);
    };
    over.addEventListener('wheel', (e) => {
      e.preventDefault();
      const rect = over.getBoundingClientRect();
      zoomAt(e.deltaY < 0 ? 0.8 : 1.25, e.clientX - rect.left);
    }, {passive: false});
    let pan = null;
    over.addEventListener('mousedown', (e) => {
      if (!e.shiftKey) return;
      e.stopPropagation();
      e.preventDefault();
      pan = {x: e.clientX, min: u.scales.x.min, max: u.scales.x.max};
    }, true);
    const onMove = (e) => {
      if (!pan) return;
      const perPx = (pan.max - pan.min) / over.clientWidth;
      const dx = (e.clientX - pan.x) * perPx;
      handle.userScale(pan.min - dx, pan.max - dx);
    };
    const onUp = () => { pan = null; };
    window.addEventListener('mousemove', onMove);
    window.addEventListener('mouseup', onUp);
    // A destroyed chart leaves nothing behind on window.
    handle.cleanups.push(() => {
      window.removeEventListener('mousemove', onMove);
      window.removeEventListener('mouseup', onUp);
    });
    let pinch = null;
    over.addEventListener('touchstart', (e) => {
      if (e.touches.length === 2) {
        const [a, b] = e.touches;
        pinch = {d: Math.abs(a.clientX - b.clientX) || 1, min: u.scales.x.min, max: u.scales.x.max,
                 mid: (a.clientX + b.clientX) / 2 - over.getBoundingClientRect().left};
      }
    }, {passive: true});
    over.addEventListener('touchmove', (e) => {
      if (!pinch || e.touches.length !== 2) return;
      e.preventDefault();
      const [a, b] = e.touches;
      const factor = pinch.d / (Math.abs(a.clientX - b.clientX) || 1);
      const at = pinch.min + (pinch.max - pinch.min) * (pinch.mid / over.clientWidth);
      handle.userScale(at - (at - pinch.min) * factor, at + (pinch.max - at) * factor);
    }, {passive: false});
    over.addEventListener('touchend', () => { pinch = null; });
    over.addEventListener('dblclick', (e) => { e.stopPropagation(); handle.resetZoom(); }, true);
  }}};
}

/** A tooltip that follows the cursor with x and each series' value. */
function tooltipPlugin(handle) {
  let tip = null;
  return {hooks: {
    init: (u) => {
      tip = document.createElement('div');
      tip.className = 'chart-tooltip';
      tip.hidden = true;
      u.over.append(tip);
      u.over.addEventListener('mouseleave', () => { tip.hidden = true; });
    },
    setCursor: (u) => {
      const i = u.cursor.idx;
      if (i === null || i === undefined || u.cursor.left < 0) { tip.hidden = true; return; }
      const x = u.data[0][i];
      const lines = [handle.formatX(x)];
      for (let s = 1; s < u.series.length; s++) {
        const v = u.data[s][i];
        if (v !== null && v !== undefined) lines.push(`${u.series[s].label}: ${Number(v).toLocaleString('en-US', {maximumFractionDigits: 3})}`);
      }
      tip.textContent = lines.join('\n');
      tip.hidden = false;
      const left = Math.min(u.cursor.left + 12, u.over.clientWidth - tip.offsetWidth - 4);
      tip.style.transform = `translate(${Math.max(0, left)}px, ${Math.max(0, u.cursor.top - 10)}px)`;
    },
  }};
}

/**
 * Create a chart in `container` (an element that sets the chart's size).
 *   type: 'line' | 'bar' | 'scatter'; series: [{label, color?}];
 *   xKind: 'time' (unix seconds) | 'linear' | 'category'.
 * Returns a handle: setSeries(i, points), setLabels(labels), setXRange(min, max),
 * update(), resetZoom(), visibleRange(), destroy(); `zoomed` is true after the
 * user zoomed or panned (live updates then stop moving the x range).
 */
export function makeChart(id, container, {type = 'line', series = [], xKind = 'time'} = {}) {
  const handle = {
    id, type, xKind, zoomed: false, pointsDrawn: 0, cleanups: [], labels: [], points: series.map(() => []),
    liveRange: {min: undefined, max: undefined}, u: null, programmatic: false,
    formatX: (x) => (xKind === 'time' ? formatTime(x) : xKind === 'category' ? (handle.labels[x] ?? '') : String(x)),
  };
  const paths = type === 'bar' ? uPlot.paths.bars({size: [0.6, 64]}) : type === 'scatter' ? () => null : undefined;
  const opts = {
    width: Math.max(200, container.clientWidth || 400),
    height: Math.max(120, container.clientHeight || 220),
    pxAlign: false,
    scales: {x: {time: false, auto: true}},
    axes: [
      {...AXIS, values: (u, vals) => vals.map((v) => handle.formatX(v)), space: xKind === 'time' ? 70 : 40,
        // Categories: one tick per label, at its bar.
        ...(xKind === 'category' ? {splits: () => handle.labels.map((_, i) => i)} : {})},
      {...AXIS, size: 56},
    ],
    legend: {show: true, live: false},
    cursor: {drag: {x: true, y: false, setScale: false}, points: {size: 6}},
    select: {show: true},
    series: [{label: 'x'}, ...series.map((s, i) => {
      const color = s.color || PALETTE[i % PALETTE.length];
      return {label: s.label, stroke: color, width: type === 'bar' ? 0 : 2,
              fill: type === 'bar' ? color + 'bb' : undefined, paths, spanGaps: true,
              points: type === 'scatter' ? {show: true, size: 5, fill: color, stroke: color} : {show: false}};
    })],
    hooks: {
      setSelect: [(u) => {
        if (u.select.width > 4) {
          handle.userScale(u.posToVal(u.select.left, 'x'), u.posToVal(u.select.left + u.select.width, 'x'));
        }
        u.setSelect({left: 0, top: 0, width: 0, height: 0}, false);
      }],
    },
    plugins: [interactionPlugin(handle), tooltipPlugin(handle)],
  };
  const u = new uPlot(opts, [[], ...series.map(() => [])], container);
  handle.u = u;
  const resize = new ResizeObserver(() => {
    const w = container.clientWidth;
    const h = container.clientHeight;
    if (w > 0 && h > 0 && (w !== u.width || h !== u.height)) u.setSize({width: w, height: h});
  });
  resize.observe(container);
  // Keyboard: + / - zoom, arrows pan, 0 or Escape reset (the chart is focusable).
  if (!container.hasAttribute('tabindex')) container.tabIndex = 0;
  container.setAttribute('aria-keyshortcuts', '+ - ArrowLeft ArrowRight 0 Escape');
  container.addEventListener('keydown', (e) => {
    const {min, max} = u.scales.x;
    if (!Number.isFinite(min) || !Number.isFinite(max)) return;
    const span = max - min;
    const mid = (min + max) / 2;
    if (e.key === '+' || e.key === '=') handle.userScale(mid - span * 0.4, mid + span * 0.4);
    else if (e.key === '-' || e.key === '_') handle.userScale(mid - span * 0.625, mid + span * 0.625);
    else if (e.key === 'ArrowLeft') handle.userScale(min - span * 0.1, max - span * 0.1);
    else if (e.key === 'ArrowRight') handle.userScale(min + span * 0.1, max + span * 0.1);
    else if (e.key === '0' || e.key === 'Escape') handle.resetZoom();
    else return;
    e.preventDefault();
  });

  Object.assign(handle, {
    /** Replace series i's points ([{x, y}]; for category charts, y values in label order). */
    setSeries(i, points) {
      this.points[i] = points;
    },
    setLabels(labels) { this.labels = labels; },
    /** Follow a moving window unless the user zoomed or panned. */
    setXRange(min, max) { this.liveRange = {min, max}; },
    /** Zoom chosen by the user. */
    userScale(min, max) {
      if (!(max > min)) return;
      this.zoomed = true;
      u.setScale('x', {min, max});
    },
    update() {
      let data;
      if (xKind === 'category') {
        data = [this.labels.map((_, i) => i), ...this.points.map((p) => p.map((v) => (typeof v === 'object' && v ? v.y : v)))];
      } else {
        const pts = this.points.map((p) => (type === 'scatter' ? p.slice().sort((a, b) => a.x - b.x) : p));
        data = alignSeries(pts);
      }
      this.pointsDrawn = data.slice(1).reduce((n, ys) => n + ys.length, 0);
      if (this.zoomed) {
        const {min, max} = u.scales.x;
        u.setData(data, false);
        u.setScale('x', {min, max});
      } else {
        u.setData(data, true);
        const xs = data[0];
        // Categories get half a slot of room on each side so the end bars show whole.
        const pad = xKind === 'category' ? 0.5 : 0;
        const min = Number.isFinite(this.liveRange.min) ? this.liveRange.min : xs[0] - pad;
        const max = Number.isFinite(this.liveRange.max) ? this.liveRange.max : xs[xs.length - 1] + pad;
        if (xs.length && Number.isFinite(min) && Number.isFinite(max) && max > min) u.setScale('x', {min, max});
      }
    },
    resetZoom() {
      this.zoomed = false;
      this.update();
    },
    visibleRange() { return {min: u.scales.x.min, max: u.scales.x.max}; },
    /** Points worth drawing: about twice the plot's pixel width. */
    targetPoints() { return pointsForWidth(u.bbox && u.bbox.width ? u.bbox.width / (window.devicePixelRatio || 1) : u.width); },
    destroy() {
      for (const f of this.cleanups.splice(0)) f();
      resize.disconnect();
      u.destroy();
      registry.delete(id);
    },
  });
  registry.set(id, handle);
  return handle;
}
