// Chart render benchmark page logic (bundled into dist/bench/chart_bench.js):
// one series of N points drawn by the dashboard's chart (src/charts.js, uPlot)
// and by Chart.js 4 configured as the seed's dashboard would be (zoom plugin,
// with and without LTTB decimation). Each function resolves to milliseconds
// from creation until the chart has drawn.
import {
  Chart, LineController, LineElement, PointElement, LinearScale, Tooltip, Legend, Decimation,
} from 'chart.js';
import zoomPlugin from 'chartjs-plugin-zoom';
import {makeChart} from '../src/charts.js';

Chart.register(LineController, LineElement, PointElement, LinearScale, Tooltip, Legend, Decimation, zoomPlugin);

function series(n) {
  const pts = new Array(n);
  const t0 = 1.7e9;
  for (let i = 0; i < n; i++) {
    pts[i] = {x: t0 + i * 0.1, y: 50 + 30 * Math.sin(i / 500) + 10 * Math.sin(i / 37) + ((i * 7919) % 13)};
  }
  return pts;
}

function host() {
  const el = document.createElement('div');
  el.style.cssText = 'position:relative;width:900px;height:300px';
  document.body.append(el);
  return el;
}

const nextFrame = () => new Promise((r) => requestAnimationFrame(() => r()));

/** The dashboard's chart (uPlot) with n points. */
window.renderDashboardChart = async (n) => {
  const pts = series(n);
  const el = host();
  await nextFrame();
  const t = performance.now();
  const c = makeChart(`bench-${Math.random()}`, el, {type: 'line', xKind: 'time', series: [{label: 'y'}]});
  c.setSeries(0, pts);
  c.update();
  await Promise.resolve();  // uPlot commits its draw in a microtask
  const ms = performance.now() - t;
  c.destroy();
  el.remove();
  return ms;
};

/** Chart.js with the zoom plugin, LTTB decimation on or off, n points. */
window.renderChartJs = async (n, decimation = true) => {
  const pts = series(n);
  const el = host();
  const canvas = document.createElement('canvas');
  el.append(canvas);
  await nextFrame();
  const t = performance.now();
  const chart = new Chart(canvas, {
    type: 'line',
    data: {datasets: [{label: 'y', data: pts, parsing: false, normalized: true, pointRadius: 0, borderWidth: 2}]},
    options: {animation: false, responsive: true, maintainAspectRatio: false,
      scales: {x: {type: 'linear'}},
      plugins: {decimation: {enabled: decimation, algorithm: 'lttb', samples: 600},
        zoom: {zoom: {wheel: {enabled: true}, pinch: {enabled: true}, mode: 'x'}, pan: {enabled: true, mode: 'x'}}}},
  });
  const ms = performance.now() - t;
  chart.destroy();
  el.remove();
  return ms;
};
