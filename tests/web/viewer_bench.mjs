// Measures framelog's browser viewer in headless Chromium, from the state the app publishes
// on `window` (debugger-gui/src/web.rs). Prints one JSON object.
//
//   node viewer_bench.mjs load PAGE_URL FRAMES   a finished log of FRAMES frames: ms from
//       opening the page to its first frames and to all of them; the page's memory
//       (WebAssembly memory + JS heap) before any frame and once loaded
//   node viewer_bench.mjs follow PAGE_URL SECS   a live log: each paint's CPU time (eframe's
//       frame time), sampled every 10 ms for SECS seconds once the page has caught up

import { webTools, launch, appState, untilState } from './browser.mjs';

const [mode, page_url, arg] = process.argv.slice(2);
const { puppeteer } = webTools();
const chrome = await launch(puppeteer, 'framelog-viewer-bench', { gpuProcess: true });
let code = 0;
try {
  const page = await chrome.browser.newPage();
  const [w, h] = (process.env.VIEWPORT || '1280x800').split('x').map(Number);
  await page.setViewport({ width: w, height: h });
  const problems = [];
  page.on('pageerror', (e) => problems.push(e.message));
  const state = () => appState(page);
  const heap = async () => (await page.metrics()).JSHeapUsedSize;
  const sleep = (ms) => new Promise((ok) => setTimeout(ok, ms));
  const until = (what, secs, cond) => untilState(page, problems, what, secs, cond, 10);
  const opened = Date.now();
  await page.goto(page_url, { waitUntil: 'load' });
  if (mode === 'load') {
    const frames = Number(arg);
    const empty = await until('the app running', 60, () => true);
    const empty_bytes = empty.wasm_memory_bytes + await heap();
    const first = await until('the first frames', 120, (s) => s.frames > 0);
    const first_ms = Date.now() - opened;
    const done = await until('the whole log', 600, (s) => s.frames >= frames && s.caught_up);
    const loaded_ms = Date.now() - opened;
    await sleep(1000);
    const after = await state();
    console.log(JSON.stringify({
      first_ms, first_frames: first.frames, loaded_ms, frames: done.frames,
      empty_bytes, loaded_bytes: after.wasm_memory_bytes + await heap(),
      wasm_bytes: after.wasm_memory_bytes,
    }));
  } else if (mode === 'follow') {
    await until('catching up', 120, (s) => s.frames > 0 && s.caught_up);
    const samples = [];
    const start = await state();
    const end = Date.now() + Number(arg) * 1000;
    while (Date.now() < end) {
      const s = await state();
      if (s.frame_ms != null) samples.push(s.frame_ms);
      await sleep(10);
    }
    const last = await state();
    samples.sort((a, b) => a - b);
    const q = (p) => samples[Math.min(samples.length - 1, Math.floor(p * samples.length))];
    console.log(JSON.stringify({
      samples: samples.length, p50_ms: q(0.5), p99_ms: q(0.99), max_ms: samples[samples.length - 1],
      frames_during: last.frames - start.frames, frames: last.frames,
    }));
  } else {
    throw new Error(`unknown mode ${mode}`);
  }
} catch (e) {
  console.error(`viewer_bench: ${e.message}`);
  code = 1;
} finally {
  await chrome.close();
}
process.exit(code);
