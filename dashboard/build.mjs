// Bundle the dashboard into dist/ (index.html, app.js, app.css): one file per
// kind, no CDN, no external fonts. Run by scripts/setup; dist/ is not committed.
import {build} from 'esbuild';
import {copyFile, mkdir, readFile, writeFile} from 'node:fs/promises';

const out = new URL('./dist/', import.meta.url);
await mkdir(out, {recursive: true});
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
await copyFile(new URL('./src/app.css', import.meta.url), new URL('app.css', out));
const html = await readFile(new URL('./index.html', import.meta.url), 'utf8');
await writeFile(new URL('index.html', out), html);
console.log('dashboard: built', out.pathname);
