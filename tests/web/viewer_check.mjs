// Opens framelog's browser viewer (served by `framelog view|serve --http`) in headless
// Chromium and reports what the app shows, read from the state it publishes on `window`
// (`framelog_state`, see debugger-gui/src/web.rs).
//
// Usage: [TOKEN=SECRET] node viewer_check.mjs PAGE_URL SCREENSHOT.png [WORKER:ID]
// With TOKEN, the server is expected to refuse the page first; the token is then typed into
// the box the page asks for it in, as a user would.
// Prints one JSON line per phase:
//   {"phase":"refused", ...}       (with TOKEN) the page was refused and asks for the token
//   {"phase":"first_frames", ...}  the first frames on screen, and the server's list of the
//                                  processes writing the log
//   {"phase":"selected", ...}      WORKER:ID selected and its data answered (if given)
//   {"phase":"finished", ...}      the server says no process writes the log any more and
//                                  the page has taken in all of it
//   {"phase":"says_finished", ...} the page's status bar says the log is finished
//   {"phase":"screenshot", ...}    the PNG written, with its count of distinct colours
// Exits 1 with a message on the first problem (a page error, a phase that never comes).

import { webTools, launch, appState, untilState } from './browser.mjs';

const [page_url, shot, select] = process.argv.slice(2);
if (!page_url || !shot) {
  console.error('usage: node viewer_check.mjs PAGE_URL SCREENSHOT.png [WORKER:ID]');
  process.exit(2);
}
const { puppeteer } = webTools();
const chrome = await launch(puppeteer, 'framelog-viewer', { gpuProcess: true });
const problems = [];
let exitCode = 0;
try {
  const page = await chrome.browser.newPage();
  await page.setViewport({ width: 1280, height: 800 });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(`console error: ${m.text()}`);
  });
  const opened = Date.now();
  await page.goto(page_url, { waitUntil: 'load' });

  const state = () => appState(page);
  const until = (what, secs, cond) => untilState(page, problems, what, secs, cond);
  const report = (phase, s, extra = {}) =>
    console.log(JSON.stringify({ phase, ms: Date.now() - opened, ...extra, state: s }));

  if (process.env.TOKEN) {
    // Refused, and the page asks for the token (its box has the keyboard focus).
    report('refused', await until('the refusal', 60,
      (s) => s.asks_for_token && s.errors.some((e) => e.includes('refused this window'))));
    await page.keyboard.type(process.env.TOKEN);
    await page.keyboard.press('Enter');
  }
  report('first_frames', await until('the first frames', 60,
    (s) => s.frames > 0 && Array.isArray(s.writers)));
  if (select) {
    await page.evaluate((k) => { window.framelog_select = k; }, select);
    report('selected', await until(`frame ${select}'s data`, 60,
      (s) => s.selected === select && s.data_ready));
  }
  // Done when the server lists no writer and the page has read everything.
  report('finished', await until('the end of the log', 120,
    (s) => Array.isArray(s.writers) && s.writers.length === 0 && s.caught_up));
  // And the page says so (not "Following").
  report('says_finished', await until('the page saying the log is finished', 60,
    (s) => s.says_finished));

  // Paint times while idle and after a resize (every panel redrawn).
  await page.setViewport({ width: 1600, height: 1000 });
  await until('a repaint at the new size', 30, (s) => s.ui_ms > 0);
  await page.screenshot({ path: shot });
  // Distinct colours of the screenshot, counted in the page itself (no image library here).
  const b64 = (await import('node:fs')).readFileSync(shot).toString('base64');
  const colours = await page.evaluate(async (data) => {
    const img = new Image();
    img.src = `data:image/png;base64,${data}`;
    await img.decode();
    const c = new OffscreenCanvas(img.width, img.height);
    const g = c.getContext('2d');
    g.drawImage(img, 0, 0);
    const px = g.getImageData(0, 0, img.width, img.height).data;
    const seen = new Set();
    for (let i = 0; i < px.length && seen.size < 10000; i += 4 * 7) {
      seen.add((px[i] << 16) | (px[i + 1] << 8) | px[i + 2]);
    }
    return seen.size;
  }, b64);
  const metrics = await page.metrics();
  report('screenshot', await state(), { colours, js_heap_bytes: metrics.JSHeapUsedSize });
} catch (e) {
  console.error(`viewer_check: ${e.message}`);
  exitCode = 1;
} finally {
  await chrome.close();
}
process.exit(exitCode);
