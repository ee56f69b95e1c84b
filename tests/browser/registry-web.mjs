// The registry's web page, driven in headless Chromium (scripts/test-browser
// starts the registry and sets the environment): upload calc through the
// form, find it in the listing, search and filter, open its page, see
// refused uploads' reports, and see markup from a manifest shown as text.
// Each check is independent of how the ones before it ended, except for
// what the registry holds; the last line is `N passed, N failed`.

import { createHash, generateKeyPairSync, sign } from 'node:crypto';
import { mkdirSync, readFileSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const env = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set (run scripts/test-browser)`);
  return value;
};
const BASE = env('REGISTRY_URL');
const TOKEN = env('REGISTRY_TOKEN');
const SHOTS = env('SHOTS');
const CALC = readFileSync(env('CALC_WASM'));
const BAD = readFileSync(env('BAD_WASM'));

// --- Signing, as `sandwit sign` does (docs/REGISTRY.md) ---------------------

const { publicKey, privateKey } = generateKeyPairSync('ed25519');
const PUBLIC_KEY = 'ed25519:' + Buffer.from(publicKey.export({ format: 'jwk' }).x, 'base64url').toString('base64');
const digestOf = (bytes) => 'sha256:' + createHash('sha256').update(bytes).digest('hex');
const signatureOf = (bytes, key = privateKey) =>
  sign(null, Buffer.from(`sandwit-plugin-signature-v1:${digestOf(bytes)}`), key).toString('base64');

/** `bytes` with each `from` (found exactly `count` times) replaced by `to`, of the same length. */
function patched(bytes, replacements) {
  let out = Buffer.from(bytes);
  for (const [from, to, count] of replacements) {
    if (Buffer.byteLength(from) !== Buffer.byteLength(to)) throw new Error(`"${to}" is not as long as "${from}"`);
    let found = 0;
    for (let at = out.indexOf(from); at !== -1; at = out.indexOf(from, at + 1)) {
      out.write(to, at);
      found += 1;
    }
    if (found !== count) throw new Error(`calc.wasm has "${from}" ${found} times, not ${count}: the fixture changed`);
  }
  return out;
}

// Calc as version 0.2.0 with markup in its description and a docstring:
// same lengths, so the component stays valid.
const MARKUP_DESCRIPTION = '<script>alert(1)</script><b>x</b>';
const MARKUP_DOC = '<img src=x onerror=alert(1)><b>sum</b>';
const CALC_MARKUP = patched(CALC, [
  ['Calculator0.1.0', 'Calculator0.2.0', 1],
  ['Adds integers and tells the time.', MARKUP_DESCRIPTION, 1],
  ['Add two integers and return their sum.', MARKUP_DOC, 2],
]);

/** A plain HTTP request to the registry: {status, headers, body}. */
function http(method, path, { headers = {}, body } = {}) {
  return new Promise((resolve, reject) => {
    const req = request(new URL(path, BASE), { method, headers, timeout: 120_000 }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body: Buffer.concat(chunks).toString() }));
    });
    req.on('timeout', () => req.destroy(new Error(`${method} ${path} timed out`)));
    req.on('error', reject);
    req.end(body);
  });
}

// --- The checks -------------------------------------------------------------

let passed = 0;
let failed = 0;
async function check(name, body) {
  try {
    await body();
    passed += 1;
    console.log(`ok   ${name}`);
  } catch (e) {
    failed += 1;
    console.log(`FAIL ${name}\n     ${String(e.stack || e).split('\n').slice(0, 4).join('\n     ')}`);
  }
}
function expect(condition, what) {
  if (!condition) throw new Error(what);
}
function equal(actual, expected, what) {
  if (actual !== expected) throw new Error(`${what}: ${JSON.stringify(actual)}, expected ${JSON.stringify(expected)}`);
}

mkdirSync(SHOTS, { recursive: true });
const context = await chromium.launchPersistentContext(env('PROFILE'), {
  executablePath: env('CHROMIUM'),
  headless: true,
  args: [
    '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync',
  ],
  viewport: { width: 1200, height: 900 },
  timeout: 60_000,
});
const page = context.pages()[0] ?? (await context.newPage());
page.setDefaultTimeout(30_000);
// Any script the page runs would be a bug (and the CSP forbids it): a
// script error, a dialog or a CSP violation fails the run. (Refusals are
// pages with 4xx statuses, which the console reports too: those are fine.)
const consoleErrors = [];
page.on('pageerror', (e) => consoleErrors.push(`a script error: ${e.message}`));
page.on('console', (m) => {
  if (m.type() === 'error' && !m.text().startsWith('Failed to load resource')) consoleErrors.push(m.text());
});
page.on('dialog', (d) => { consoleErrors.push(`a dialog opened: ${d.message()}`); d.dismiss(); });

const shot = (name) => page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });

/** Fills the upload form and submits it; the response of the post. */
async function upload({ token = TOKEN, file, signature }) {
  await page.goto(`${BASE}/upload`);
  await page.getByLabel('API token').fill(token);
  await page.getByLabel('Component (.wasm)').setInputFiles(file);
  await page.getByLabel('Signature').fill(signature);
  const [response] = await Promise.all([
    page.waitForNavigation(),
    page.getByRole('button', { name: 'Upload' }).click(),
  ]);
  return response;
}

/** The texts of the refusal's problem list. */
const problems = () => page.locator('ul.problems li').allTextContents();

await check('the publisher key is registered through the API', async () => {
  // The proof names the registry (its id) and the account (the script's
  // `web-publisher`) that holds the key.
  const { id } = JSON.parse((await http('GET', '/v1/registry')).body);
  const r = await http('POST', '/v1/keys', {
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
    body: JSON.stringify({
      public_key: PUBLIC_KEY,
      proof: sign(null, Buffer.from(`sandwit-key-registration-v2:${id}:web-publisher:${PUBLIC_KEY}`), privateKey).toString('base64'),
    }),
  });
  equal(r.status, 201, `POST /v1/keys answered ${r.body}`);
});

await check('the pages are sent with a CSP that forbids scripts', async () => {
  for (const path of ['/', '/upload']) {
    const r = await http('GET', path);
    equal(r.status, 200, `GET ${path}`);
    const csp = r.headers['content-security-policy'] ?? '';
    expect(csp.includes("default-src 'none'") && !csp.includes('script-src'), `GET ${path}: CSP ${csp}`);
    expect(r.headers['content-type'].startsWith('text/html'), `GET ${path}: ${r.headers['content-type']}`);
    expect(r.body.includes('<html lang="en">'), `GET ${path} has no lang`);
  }
});

await check('the upload form publishes calc', async () => {
  await page.goto(`${BASE}/upload`);
  await shot('upload-form');
  const response = await upload({
    file: { name: 'calc.wasm', mimeType: 'application/wasm', buffer: CALC },
    signature: signatureOf(CALC),
  });
  equal(response.status(), 201, 'the post\'s status');
  await page.getByRole('heading', { name: 'Published' }).waitFor();
  const link = page.getByRole('link', { name: 'calc 0.1.0' });
  equal(await link.getAttribute('href'), '/plugins/calc/0.1.0', 'the link to the plugin page');
  expect((await page.textContent('main')).includes(digestOf(CALC)), 'the page shows the digest');
  await shot('upload-published');
});

await check('the listing shows calc', async () => {
  await page.goto(BASE + '/');
  const row = page.locator('table.plugins tbody tr', { hasText: 'Calculator' });
  equal(await row.count(), 1, 'rows for Calculator');
  const text = await row.textContent();
  expect(text.includes('0.1.0') && text.includes('Adds integers and tells the time.') && text.includes('tool'),
    `the row: ${text}`);
  await shot('listing');
});

await check('search and the kind filter find calc, and only when they match', async () => {
  const search = async (q, kind) => {
    await page.goto(BASE + '/');
    await page.getByLabel('Search').fill(q);
    await page.getByLabel('Method kind').selectOption(kind);
    await Promise.all([page.waitForNavigation(), page.getByRole('button', { name: 'Search' }).click()]);
    return page.locator('table.plugins tbody tr', { hasText: 'Calculator' }).count();
  };
  equal(await search('integers sum', 'tool'), 1, 'calc found by words of its docstring, kind tool');
  expect(page.url().includes('q=integers+sum') && page.url().includes('kind=tool'), `the URL ${page.url()}`);
  equal(await page.getByLabel('Search').inputValue(), 'integers sum', 'the search box keeps the words');
  await shot('search');
  equal(await search('integers', 'agent'), 0, 'calc listed under kind agent');
  equal(await search('no-such-word-anywhere', ''), 0, 'calc listed for a word it lacks');
  expect((await page.textContent('.count')).includes('0 plugins match'), 'the count says none match');
});

await check('the plugin page shows the methods, docstrings, schemas and signature', async () => {
  await page.goto(BASE + '/');
  await page.getByRole('link', { name: 'Calculator' }).click();
  await page.waitForURL(`${BASE}/plugins/calc`);
  await page.getByRole('heading', { level: 1, name: /Calculator/ }).waitFor();
  const sum = page.locator('#method-calculate_sum');
  equal(await sum.locator('h3 code').textContent(), 'calculate_sum(num1, num2)', 'the signature');
  equal(await sum.locator('.kind').textContent(), 'tool', 'the kind');
  expect((await sum.locator('pre.docstring').textContent()).includes('num1: The first integer.'), 'the docstring');
  const schema = JSON.parse(await sum.locator('table.params pre.schema').first().textContent());
  equal(schema.type, 'integer', 'num1\'s schema type');
  expect(await page.locator('#method-get_current_time').count() === 1, 'get_current_time is listed');
  const main = await page.textContent('main');
  expect(main.includes(`signed by ${PUBLIC_KEY}, verified when published`), 'the signature status');
  expect(main.includes(digestOf(CALC)), 'the digest');
  expect(main.includes('web-publisher'), 'the owner');
  expect(main.includes(signatureOf(CALC)), 'the signature');
  await shot('plugin');
});

await check('a plugin that fails the load check is refused with every problem of its report', async () => {
  const response = await upload({
    file: { name: 'bad_manifest.wasm', mimeType: 'application/wasm', buffer: BAD },
    signature: signatureOf(BAD),
  });
  equal(response.status(), 422, 'the post\'s status');
  await page.getByRole('heading', { name: 'Upload refused' }).waitFor();
  const shown = await problems();
  // The API's report of the same bytes: the page lists exactly its problems.
  const api = await http('POST', '/v1/plugins', {
    headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/wasm', 'sandwit-signature': signatureOf(BAD) },
    body: BAD,
  });
  equal(api.status, 422, `the API's status (${api.body})`);
  const report = JSON.parse(api.body).report;
  expect(report.problems.length > 0, 'the report has problems');
  equal(JSON.stringify(shown), JSON.stringify(report.problems), 'the problems listed');
  await shot('upload-refused');
});

await check('junk bytes are refused with the load check\'s problems', async () => {
  const junk = Buffer.from('this is not a WebAssembly component, only junk bytes\n'.repeat(20));
  const response = await upload({ file: { name: 'junk.wasm', mimeType: 'application/wasm', buffer: junk }, signature: signatureOf(junk) });
  equal(response.status(), 422, 'the post\'s status');
  expect((await problems()).length > 0, 'problems are listed');
});

await check('a signature from an unregistered key is refused', async () => {
  const { privateKey: other } = generateKeyPairSync('ed25519');
  const response = await upload({
    file: { name: 'calc.wasm', mimeType: 'application/wasm', buffer: CALC_MARKUP },
    signature: signatureOf(CALC_MARKUP, other),
  });
  equal(response.status(), 400, 'the post\'s status');
  expect((await page.textContent('[role=alert]')).includes('verifies with none'), 'the error names the signature');
  await shot('upload-bad-signature');
});

await check('a wrong token is refused', async () => {
  const response = await upload({
    token: 'swr_' + 'A'.repeat(43),
    file: { name: 'calc.wasm', mimeType: 'application/wasm', buffer: CALC_MARKUP },
    signature: signatureOf(CALC_MARKUP),
  });
  equal(response.status(), 401, 'the post\'s status');
  expect(!(await page.content()).includes('swr_AAAA'), 'the page echoes the token');
});

await check('a published version cannot be uploaded again', async () => {
  const response = await upload({ file: { name: 'calc.wasm', mimeType: 'application/wasm', buffer: CALC }, signature: signatureOf(CALC) });
  equal(response.status(), 409, 'the post\'s status');
  expect((await page.textContent('[role=alert]')).includes('already published'), 'the error says so');
});

await check('a cross-site post is refused even with the token', async () => {
  const boundary = 'x-boundary';
  const part = (name, value, extra = '') =>
    `--${boundary}\r\nContent-Disposition: form-data; name="${name}"${extra}\r\n\r\n${value}\r\n`;
  const body = Buffer.concat([
    Buffer.from(part('token', TOKEN) + part('signature', signatureOf(CALC_MARKUP)) +
      `--${boundary}\r\nContent-Disposition: form-data; name="component"; filename="c.wasm"\r\n` +
      'Content-Type: application/wasm\r\n\r\n'),
    CALC_MARKUP,
    Buffer.from(`\r\n--${boundary}--\r\n`),
  ]);
  const r = await http('POST', '/upload', {
    headers: { origin: 'http://evil.example', 'content-type': `multipart/form-data; boundary=${boundary}` },
    body,
  });
  equal(r.status, 403, 'the status');
  equal((await http('GET', '/v1/plugins/calc/0.2.0')).status, 404, 'calc 0.2.0 after the post');
});

await check('markup in a manifest is shown as text', async () => {
  const response = await upload({
    file: { name: 'calc.wasm', mimeType: 'application/wasm', buffer: CALC_MARKUP },
    signature: signatureOf(CALC_MARKUP),
  });
  equal(response.status(), 201, `the post's status (${await page.textContent('main')})`);
  await page.goto(BASE + '/?q=alert');
  const row = page.locator('table.plugins tbody tr', { hasText: 'Calculator' });
  expect((await row.textContent()).includes(MARKUP_DESCRIPTION), 'the listing shows the description as text');
  await shot('listing-markup');
  await page.goto(`${BASE}/plugins/calc`);
  equal(await page.textContent('p.description'), MARKUP_DESCRIPTION, 'the description');
  expect((await page.textContent('#method-calculate_sum pre.docstring')).startsWith(MARKUP_DOC), 'the docstring');
  equal(await page.locator('main script, main img, main b').count(), 0, 'elements made from the manifest');
  equal(await page.locator('script').count(), 0, 'script elements');
  await shot('plugin-markup');
});

await check('no page ran a script or opened a dialog', async () => {
  equal(consoleErrors.length, 0, `console errors: ${consoleErrors.join('; ')}`);
});

await check('the token is not in the registry\'s log', async () => {
  const log = readFileSync(env('SERVER_LOG'), 'utf8');
  expect(log.includes('request'), 'the log has requests');
  expect(!log.includes(TOKEN), 'the token is in the log');
});

await context.close();
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
