// Charts: Chart.js with chartjs-plugin-zoom (wheel, drag, pinch; reset), LTTB
// decimation for long series, dark theme, time on the x axis (unix seconds).
import {
  Chart, LineController, BarController, ScatterController, LineElement, PointElement,
  BarElement, LinearScale, CategoryScale, Tooltip, Legend, Filler, Decimation,
} from 'chart.js';
import zoomPlugin from 'chartjs-plugin-zoom';
import {formatTime} from './format.js';

Chart.register(LineController, BarController, ScatterController, LineElement, PointElement,
  BarElement, LinearScale, CategoryScale, Tooltip, Legend, Filler, Decimation, zoomPlugin);

Chart.defaults.color = '#c9d1e4';
Chart.defaults.borderColor = 'rgba(148, 163, 184, 0.15)';
Chart.defaults.font.family = 'system-ui, -apple-system, "Segoe UI", Roboto, sans-serif';

export const PALETTE = ['#38bdf8', '#a78bfa', '#34d399', '#fbbf24', '#f87171', '#f472b6', '#22d3ee'];

/** Every live chart, by id (read by the browser tests). */
export const registry = new Map();

/**
 * Create a chart in `canvas`.
 *   type: 'line' | 'bar' | 'scatter'; series: [{label, color?}];
 *   xKind: 'time' (unix seconds) | 'linear' | 'category'.
 * Returns a handle with setSeries(i, points), setXRange(min, max), resetZoom(), destroy().
 */
export function makeChart(id, canvas, {type = 'line', series = [], xKind = 'time', yLabel = '',
                                       stacked = false, animation = false} = {}) {
  const datasets = series.map((s, i) => ({
    label: s.label,
    data: [],
    borderColor: s.color || PALETTE[i % PALETTE.length],
    backgroundColor: (s.color || PALETTE[i % PALETTE.length]) + (type === 'bar' ? 'aa' : '33'),
    borderWidth: type === 'bar' ? 0 : 2,
    pointRadius: type === 'scatter' ? 3 : 0,
    pointHoverRadius: 4,
    fill: type === 'line' && s.fill === true,
    tension: 0.15,
    parsing: false,
    normalized: true,
    yAxisID: s.axis || 'y',
  }));
  const hasY2 = series.some((s) => s.axis === 'y2');
  const xScale = xKind === 'category'
    ? {type: 'category'}
    : {type: 'linear', ticks: {maxRotation: 0, autoSkipPadding: 20,
        callback: xKind === 'time' ? (v) => formatTime(v) : undefined}};
  const scales = {
    x: {...xScale, grid: {display: false}},
    y: {beginAtZero: type === 'bar', title: {display: !!yLabel, text: yLabel}, stacked},
  };
  if (hasY2) scales.y2 = {position: 'right', grid: {drawOnChartArea: false}};
  const chart = new Chart(canvas, {
    type: type === 'scatter' ? 'scatter' : type,
    data: {datasets},
    options: {
      animation: animation ? undefined : false,
      responsive: true,
      maintainAspectRatio: false,
      interaction: {mode: type === 'scatter' ? 'nearest' : 'index', intersect: false},
      scales,
      plugins: {
        legend: {display: series.length > 1 || type === 'scatter', labels: {boxWidth: 10}},
        tooltip: {
          callbacks: xKind === 'time'
            ? {title: (items) => items.length ? formatTime(items[0].parsed.x) : ''}
            : {},
        },
        decimation: {enabled: type === 'line', algorithm: 'lttb', samples: 600, threshold: 1200},
        zoom: {
          limits: {x: {min: 'original', max: 'original'}},
          pan: {enabled: true, mode: 'x', modifierKey: null},
          zoom: {
            wheel: {enabled: true},
            pinch: {enabled: true},
            drag: {enabled: true, modifierKey: 'shift', backgroundColor: 'rgba(56,189,248,0.15)'},
            mode: 'x',
            onZoomComplete: () => { handle.zoomed = true; },
          },
        },
      },
    },
  });
  const handle = {
    id, chart, type, zoomed: false, pointsDrawn: 0,
    /** Replace series i's points ([{x, y}], x ascending for time charts). */
    setSeries(i, points) {
      if (!chart.data.datasets[i]) return;
      chart.data.datasets[i].data = points;
      this.pointsDrawn = chart.data.datasets.reduce((n, d) => n + d.data.length, 0);
    },
    setLabels(labels) { chart.data.labels = labels; },
    /** Follow a moving window unless the user zoomed or panned. */
    setXRange(min, max) {
      if (this.zoomed) return;
      chart.options.scales.x.min = Number.isFinite(min) ? min : undefined;
      chart.options.scales.x.max = Number.isFinite(max) ? max : undefined;
    },
    update() { chart.update('none'); },
    resetZoom() {
      this.zoomed = false;
      chart.resetZoom('none');
    },
    visibleRange() {
      const x = chart.scales.x;
      return x ? {min: x.min, max: x.max} : null;
    },
    destroy() {
      chart.destroy();
      registry.delete(id);
    },
  };
  // Panning counts as a user choice too.
  chart.options.plugins.zoom.pan.onPanComplete = () => { handle.zoomed = true; };
  registry.set(id, handle);
  return handle;
}
