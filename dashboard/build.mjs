// Bundle the dashboard into dist/ (index.html, app.js, app.css): one file per
// kind, no CDN, no external fonts. Run by scripts/setup; dist/ is not committed.
import {build} from 'esbuild';
import {mkdir, readFile, writeFile} from 'node:fs/promises';

const out = new URL('./dist/', import.meta.url);
await mkdir(new URL('bench/', out), {recursive: true});
await build({
  entryPoints: [new URL('./src/main.js', import.meta.url).pathname],
  bundle: true,
  minify: true,
  sourcemap: false,
  format: 'iife',
  target: ['chrome110', 'firefox110', 'safari16'],
  outfile: new URL('app.js', out).pathname,
  legalComments: 'linked',
  logLevel: 'warning',
});
await build({
  entryPoints: [new URL('./bench/chart_render.js', import.meta.url).pathname],
  bundle: true, minify: true, format: 'iife', target: ['chrome110'],
  outfile: new URL('bench/chart_bench.js', out).pathname, legalComments: 'none', logLevel: 'warning',
});
await writeFile(new URL('bench/index.html', out),
  '<!doctype html><meta charset="utf-8"><title>chart bench</title><body><script src="chart_bench.js"></script>');
// uPlot's own stylesheet first, then ours.
const css = await readFile(new URL('./node_modules/uplot/dist/uPlot.min.css', import.meta.url), 'utf8') +
  '\n' + await readFile(new URL('./src/app.css', import.meta.url), 'utf8');
await writeFile(new URL('app.css', out), css);
const html = await readFile(new URL('./index.html', import.meta.url), 'utf8');
await writeFile(new URL('index.html', out), html);
console.log('dashboard: built', out.pathname);
