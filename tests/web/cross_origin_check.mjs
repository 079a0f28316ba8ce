// Another web page tries to read framelog's log: headless Chromium opens a page from another
// origin (another port of 127.0.0.1, and the name evil.example resolved to 127.0.0.1, as DNS
// rebinding would) and tries `new WebSocket(...)` to the server; the server's own page does
// the same as a control.
//
// Usage: node cross_origin_check.mjs SERVER_URL   (e.g. http://127.0.0.1:8080/)
// Prints one JSON line: {"foreign": R, "rebound_page": STATUS, "rebound_ws": R, "own": R}
// where R is "open" (the WebSocket opened), "error" (refused) or "timeout".

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { webTools, launch, serve } from './browser.mjs';

const [serverUrl] = process.argv.slice(2);
if (!serverUrl) {
  console.error('usage: node cross_origin_check.mjs SERVER_URL');
  process.exit(2);
}
const port = new URL(serverUrl).port;
const { puppeteer } = webTools();
const chrome = await launch(puppeteer, 'framelog-origin', {
  args: ['--host-resolver-rules=MAP evil.example 127.0.0.1'],
});
const root = fs.mkdtempSync(path.join(os.tmpdir(), 'framelog-evil-'));
fs.writeFileSync(path.join(root, 'index.html'), '<!doctype html><title>some other site</title>');
const evil = await serve(root, []);
const evilPort = new URL(evil.base).port;

// Opens a WebSocket from the page and reports whether it opened.
const tryWs = (page, url) => page.evaluate((url) => new Promise((done) => {
  const ws = new WebSocket(url);
  const t = setTimeout(() => done('timeout'), 10000);
  ws.onopen = () => { clearTimeout(t); ws.close(); done('open'); };
  ws.onerror = () => { clearTimeout(t); done('error'); };
}), url);

let exitCode = 0;
try {
  const page = await chrome.browser.newPage();
  // Another site on this machine (another port: another origin).
  await page.goto(`${evil.base}/`, { waitUntil: 'load' });
  const foreign = await tryWs(page, `ws://127.0.0.1:${port}/ws`);
  // DNS rebinding: the server under another name, its page and its WebSocket.
  const rebound = await page.goto(`http://evil.example:${port}/`, { waitUntil: 'load' });
  await page.goto(`http://evil.example:${evilPort}/`, { waitUntil: 'load' });
  const reboundWs = await tryWs(page, `ws://evil.example:${port}/ws`);
  // The server's own page.
  await page.goto(serverUrl, { waitUntil: 'load' });
  const own = await tryWs(page, `ws://127.0.0.1:${port}/ws`);
  console.log(JSON.stringify({
    foreign, rebound_page: rebound ? rebound.status() : 0, rebound_ws: reboundWs, own,
  }));
} catch (e) {
  console.error(String(e && e.stack || e));
  exitCode = 1;
} finally {
  evil.server.close();
  await chrome.close();
  fs.rmSync(root, { recursive: true, force: true });
}
process.exit(exitCode);
