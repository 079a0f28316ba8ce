// Opens profiles in the real speedscope app (the npm package's built app) in headless
// Chromium and fails on any console error or warning, page error, failed request, dialog or
// import error message.
//
//   FRAMELOG_WEB_TOOLS=DIR node tests/web/speedscope_check.mjs FILE...
//
// DIR holds node_modules/puppeteer-core and node_modules/speedscope (`npm install
// puppeteer-core speedscope@1.25.0` there; puppeteer-core never downloads a browser).
// The browser is $CHROMIUM, else /usr/bin/chromium. speedscope's dist/release and the files
// are served on 127.0.0.1; each file is loaded with `#profileURL=` and must finish loading
// (the title becomes "NAME - speedscope") with nothing reported. Prints one line per file.

import { createRequire } from 'node:module';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';

const tools = process.env.FRAMELOG_WEB_TOOLS;
if (!tools) {
  console.error('FRAMELOG_WEB_TOOLS is not set');
  process.exit(2);
}
const files = process.argv.slice(2);
if (files.length === 0) {
  console.error('usage: speedscope_check.mjs FILE...');
  process.exit(2);
}
const require = createRequire(path.join(path.resolve(tools), 'package.json'));
const puppeteer = require('puppeteer-core');
const release = path.join(path.dirname(require.resolve('speedscope/package.json')), 'dist', 'release');
const chromium = process.env.CHROMIUM || '/usr/bin/chromium';
const TIMEOUT_MS = 60_000;

const types = { '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css',
  '.json': 'application/json', '.wasm': 'application/wasm', '.png': 'image/png',
  '.woff2': 'font/woff2', '.ico': 'image/x-icon', '.txt': 'text/plain' };

// /files/N serves files[N]; anything else comes from speedscope's release directory.
const server = http.createServer((req, res) => {
  const url = new URL(req.url, 'http://127.0.0.1');
  let p;
  const m = url.pathname.match(/^\/files\/(\d+)\/[^/]*$/);
  if (m && files[Number(m[1])]) {
    p = files[Number(m[1])];
  } else {
    const rel = url.pathname === '/' ? 'index.html' : decodeURIComponent(url.pathname.slice(1));
    p = path.join(release, path.normalize(rel));
    if (!p.startsWith(release)) p = '';
  }
  fs.readFile(p, (err, data) => {
    if (err) {
      res.writeHead(404);
      res.end();
      return;
    }
    res.writeHead(200, { 'Content-Type': types[path.extname(p)] || 'application/octet-stream' });
    res.end(data);
  });
});
await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
const base = `http://127.0.0.1:${server.address().port}`;

const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'speedscope-check-'));
const browser = await puppeteer.launch({
  executablePath: chromium,
  headless: true,
  userDataDir,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync',
    // WebGL in software (speedscope draws with WebGL), without the deprecation warning.
    '--enable-unsafe-swiftshader'],
});

let failed = false;
try {
  for (const [i, file] of files.entries()) {
    const problems = [];
    const page = await browser.newPage();
    page.on('console', (msg) => {
      // The one message not from the page: software GL's performance note about
      // speedscope reading pixels back ("GPU stall due to ReadPixels"), which a real GPU
      // does not print.
      if (/GL Driver Message \(OpenGL, Performance, [^)]*\): GPU stall due to ReadPixels/.test(msg.text())) {
        return;
      }
      if (msg.type() === 'error' || msg.type() === 'warn' || msg.type() === 'warning') {
        problems.push(`console ${msg.type()}: ${msg.text()}`);
      }
    });
    page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
    page.on('requestfailed', (r) => problems.push(`request failed: ${r.url()}`));
    page.on('response', (r) => {
      if (r.status() >= 400) problems.push(`HTTP ${r.status()}: ${r.url()}`);
    });
    page.on('dialog', async (d) => {
      problems.push(`dialog: ${d.message()}`);
      await d.dismiss();
    });
    const name = path.basename(file);
    const url = `${base}/#profileURL=${encodeURIComponent(`${base}/files/${i}/${encodeURIComponent(name)}`)}`;
    await page.goto(url, { waitUntil: 'load', timeout: TIMEOUT_MS });
    const deadline = Date.now() + TIMEOUT_MS;
    let title = '';
    for (;;) {
      title = await page.title();
      const body = await page.evaluate(() => document.body.innerText);
      if (/Something went wrong|Unrecognized format|Error/i.test(body)) {
        problems.push(`import error shown: ${body.slice(0, 300)}`);
        break;
      }
      if (title.endsWith(' - speedscope')) break;
      if (problems.length > 0) break;
      if (Date.now() > deadline) {
        problems.push(`not loaded after ${TIMEOUT_MS} ms (title ${JSON.stringify(title)})`);
        break;
      }
      await new Promise((ok) => setTimeout(ok, 50));
    }
    // Let anything the first frames log arrive.
    await page.evaluate(() => new Promise((ok) => requestAnimationFrame(() => requestAnimationFrame(ok))));
    await page.close();
    if (problems.length > 0) {
      failed = true;
      console.log(`FAIL ${file}: ${problems.length} problems`);
      for (const p of problems.slice(0, 20)) console.log(`  ${p}`);
    } else {
      console.log(`ok ${file}: ${title}`);
    }
  }
} finally {
  await browser.close();
  server.close();
  fs.rmSync(userDataDir, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
