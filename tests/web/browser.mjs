// What the real-client checks share: a static server on 127.0.0.1 for a web app and the
// files to open in it, and headless Debian Chromium driven by puppeteer-core (which never
// downloads a browser).

import { createRequire } from 'node:module';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';

const types = { '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css',
  '.json': 'application/json', '.wasm': 'application/wasm', '.png': 'image/png',
  '.woff2': 'font/woff2', '.woff': 'font/woff', '.ttf': 'font/ttf', '.svg': 'image/svg+xml',
  '.ico': 'image/x-icon', '.txt': 'text/plain' };

// puppeteer-core from $FRAMELOG_WEB_TOOLS/node_modules (exits 2 if the variable is unset),
// and a `require` resolving other packages installed there.
export function webTools() {
  const tools = process.env.FRAMELOG_WEB_TOOLS;
  if (!tools) {
    console.error('FRAMELOG_WEB_TOOLS is not set');
    process.exit(2);
  }
  const require = createRequire(path.join(path.resolve(tools), 'package.json'));
  return { require, puppeteer: require('puppeteer-core') };
}

// Serves `root` (index.html at /) and `files[N]` at /files/N/NAME on 127.0.0.1, every
// answer allowing any origin (apps fetch the files); resolves to the server and its base URL.
export async function serve(root, files) {
  const server = http.createServer((req, res) => {
    const url = new URL(req.url, 'http://127.0.0.1');
    let p;
    const m = url.pathname.match(/^\/files\/(\d+)\/[^/]*$/);
    if (m && files[Number(m[1])]) {
      p = files[Number(m[1])];
    } else {
      const rel = url.pathname === '/' ? 'index.html' : decodeURIComponent(url.pathname.slice(1));
      p = path.join(root, path.normalize(rel));
      if (!p.startsWith(root)) p = '';
    }
    fs.readFile(p, (err, data) => {
      const headers = { 'Access-Control-Allow-Origin': '*', 'Cache-Control': 'no-cache' };
      if (err) {
        res.writeHead(404, headers);
        res.end();
        return;
      }
      headers['Content-Type'] = types[path.extname(p)] || 'application/octet-stream';
      res.writeHead(200, headers);
      res.end(data);
    });
  });
  await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
  return { server, base: `http://127.0.0.1:${server.address().port}` };
}

// The URL of files[i] as `serve` serves it.
export function fileUrl(base, i, file) {
  return `${base}/files/${i}/${encodeURIComponent(path.basename(file))}`;
}

// Headless Chromium ($CHROMIUM, else /usr/bin/chromium) with a fresh profile, launched with
// the flags this machine's closed network needs; `close()` also removes the profile.
// `gpuProcess`: WebGL in the GPU process on SwiftShader (software), as a browser without a
// usable GPU runs it, instead of `--disable-gpu`'s software compositing, which copies every
// frame of a large WebGL canvas back and made each paint of a 1280×800 egui page take
// ~200 ms here.
// `args`: more command-line flags (e.g. `--host-resolver-rules=…` to give a name to
// 127.0.0.1, as DNS rebinding would).
export async function launch(puppeteer, name, { gpuProcess = false, args = [] } = {}) {
  const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), `${name}-`));
  const browser = await puppeteer.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    userDataDir,
    args: ['--headless', '--no-sandbox', gpuProcess ? '--use-angle=swiftshader' : '--disable-gpu',
      '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
      // WebGL in software (the apps draw with WebGL), without the deprecation warning.
      '--enable-unsafe-swiftshader', ...args],
  });
  return {
    browser,
    async close() {
      await browser.close();
      fs.rmSync(userDataDir, { recursive: true, force: true });
    },
  };
}

// The state framelog's browser viewer publishes on `window` after each paint
// (debugger-gui/src/web.rs), parsed; undefined before its first paint.
export function appState(page) {
  return page.evaluate(() => window.framelog_state && JSON.parse(window.framelog_state));
}

// Polls `appState` every `everyMs` until `cond(state)` holds and returns that state; throws
// when `secs` pass first, or as soon as `problems` (page errors collected by the caller) has
// one.
export async function untilState(page, problems, what, secs, cond, everyMs = 50) {
  const deadline = Date.now() + secs * 1000;
  for (;;) {
    if (problems.length) throw new Error(problems.join('; '));
    const s = await appState(page);
    if (s && cond(s)) return s;
    if (Date.now() > deadline) {
      throw new Error(`${what} did not happen within ${secs} s; last state: ${JSON.stringify(s)}`);
    }
    await new Promise((ok) => setTimeout(ok, everyMs));
  }
}
