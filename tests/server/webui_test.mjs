// The chat page at / in headless chromium (puppeteer-core), against a running
// alice-llm-server started by webui_test.py with an API key
// (ALICE_PORT, ALICE_KEY, ALICE_LOG, ALICE_CHROMIUM). Checks: the page shows
// the model and its context size; a 401 brings up the key field; a message
// streams an answer that is kept in localStorage; Stop aborts the fetch and
// the server cancels the generation (in-flight gauge back to 0, the request
// logged as 499 well before its max_tokens); model output and stored history
// with <script> / onerror markup are shown as text, never run; fenced code
// becomes a <pre><code> block. Prints one line per check and "N passed, N failed".
import fs from 'node:fs';
import puppeteer from 'puppeteer-core';

const base = `http://127.0.0.1:${process.env.ALICE_PORT}`;
const key = process.env.ALICE_KEY;
let passed = 0;
let failed = 0;

function check(name, cond, detail) {
  if (cond) {
    passed++;
    console.log(`PASS ${name}`);
  } else {
    failed++;
    console.log(`FAIL ${name} ${detail === undefined ? '' : JSON.stringify(detail)}`);
  }
}

async function group(name, fn) {
  try {
    await fn();
  } catch (e) {
    check(`${name} threw`, false, String(e && e.stack ? e.stack : e));
  }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function waitFor(fn, ms = 15000) {
  const t0 = Date.now();
  while (Date.now() - t0 < ms) {
    const v = await fn();
    if (v) return v;
    await sleep(50);
  }
  return null;
}

async function inFlight() {
  const r = await fetch(`${base}/metrics`);
  const m = /^alice_requests_in_flight (\d+)/m.exec(await r.text());
  return m ? Number(m[1]) : -1;
}

// Rewrite the page's next chat request body (the test's way to give it a
// long or a forced answer; the page itself sends only messages + stream).
let rewrite = null;

const browser = await puppeteer.launch({
  executablePath: process.env.ALICE_CHROMIUM,
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
});
const page = await browser.newPage();
const pageErrors = [];
page.on('pageerror', (e) => pageErrors.push(String(e)));
await page.setRequestInterception(true);
page.on('request', (req) => {
  if (rewrite && req.method() === 'POST' && req.url().endsWith('/v1/chat/completions')) {
    const body = Object.assign(JSON.parse(req.postData()), rewrite);
    rewrite = null;
    req.continue({ postData: JSON.stringify(body) });
  } else {
    req.continue();
  }
});

const messageTexts = () => page.$$eval('.msg', (els) => els.map((e) => [e.className, e.querySelector('.body') ? e.querySelector('.body').textContent : e.textContent]));
const idle = () => page.$eval('#send', (b) => !b.disabled);

async function sendMessage(text) {
  await page.$eval('#input', (t) => { t.value = ''; });
  await page.type('#input', text);
  await page.keyboard.press('Enter');
}

await group('load', async () => {
  const resp = await page.goto(`${base}/`, { waitUntil: 'load' });
  check('page: 200 text/html', resp.status() === 200 && resp.headers()['content-type'].startsWith('text/html'));
  const info = await waitFor(async () => {
    const t = await page.$eval('#model', (e) => e.textContent);
    return t.includes('tiny-tolstoy') ? t : null;
  });
  check('page: shows the model name and context size', info && /context \d+ tokens/.test(info), info);
});

await group('api key', async () => {
  await sendMessage('Who is Pierre?');
  const shown = await waitFor(() => page.$eval('#keybar', (e) => e.classList.contains('show')));
  check('page: a 401 shows the API-key field', shown);
  const err = await waitFor(() => page.$$eval('.msg.error', (els) => els.map((e) => e.textContent).join(' ')));
  check('page: the 401 is explained', err && /API key/.test(err), err);
  await page.type('#apikey', key);
  await page.click('#savekey');
  check('page: key field hidden after saving', !(await page.$eval('#keybar', (e) => e.classList.contains('show'))));
});

await group('stream an answer', async () => {
  await page.evaluate(() => document.getElementById('clear').click());
  rewrite = { max_tokens: 24, temperature: 0 };
  await sendMessage('Who is Pierre?');
  await waitFor(async () => (await messageTexts()).length >= 2 && (await idle()));
  const msgs = await messageTexts();
  const answer = msgs.find(([c]) => c.includes('assistant'));
  check('page: user message and a streamed assistant answer', msgs[0][0].includes('user') &&
    msgs[0][1] === 'Who is Pierre?' && answer && answer[1].length > 0, msgs);
  const r = await fetch(`${base}/v1/chat/completions`, {
    method: 'POST', headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${key}` },
    body: JSON.stringify({ messages: [{ role: 'user', content: 'Who is Pierre?' }], max_tokens: 24, temperature: 0 }),
  });
  const want = (await r.json()).choices[0].message.content;
  const stored = JSON.parse(await page.evaluate(() => localStorage.getItem('alice-llm-chat')));
  check('page: conversation kept in localStorage', stored.length === 2 && stored[1].role === 'assistant' &&
    stored[1].content === want, { stored, want });
  await page.reload({ waitUntil: 'load' });
  const again = await messageTexts();
  check('page: the conversation survives a reload', again.length === 2 && again[0][1] === 'Who is Pierre?', again);
});

await group('stop', async () => {
  await page.evaluate(() => document.getElementById('clear').click());
  // a long answer: end-of-generation tokens ignored, 3000 tokens (tens of seconds here)
  rewrite = { max_tokens: 3000, ignore_eos: true };
  await sendMessage('Tell me a long story.');
  const started = await waitFor(async () => {
    const m = await messageTexts();
    return m.length >= 2 && m[1][1].length > 0;
  });
  check('stop: the answer starts streaming', started);
  check('stop: the request is in flight', (await inFlight()) >= 1);
  await page.click('#stop');
  const t0 = Date.now();
  const zero = await waitFor(async () => (await inFlight()) === 0, 5000);
  check('stop: the server cancels the generation (in-flight back to 0)', zero, Date.now() - t0);
  const h = await (await fetch(`${base}/health`)).json();
  check('stop: no busy slot left', h.slots_busy === 0, h);
  await sleep(200);
  const lines = fs.readFileSync(process.env.ALICE_LOG, 'utf8').split('\n')
    .filter((l) => l.includes('POST /v1/chat/completions 499'));
  const n = lines.length ? Number(/completion=(\d+)/.exec(lines.at(-1))[1]) : -1;
  check('stop: logged as 499 (client gone) long before max_tokens', n >= 0 && n < 2500, lines);
  check('stop: the page is ready again', await waitFor(idle, 3000));
});

await group('markup is text', async () => {
  await page.evaluate(() => document.getElementById('clear').click());
  // the model is forced (grammar) to answer with markup and a code fence
  const out = 'Look: <script>window.__pwned=1</script><img src=x onerror=window.__pwned=2> **bold**\n\n' +
    '```html\n<script>window.__pwned=3</script>\n```';
  const gbnf = 'root ::= "' + out.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n') + '"';
  rewrite = { grammar: gbnf, max_tokens: 200 };
  await sendMessage('Say something.');
  await waitFor(async () => (await messageTexts()).length >= 2 && (await idle()));
  await sleep(300); // an <img onerror> would have fired by now
  const msgs = await messageTexts();
  const body = msgs.length >= 2 ? msgs[1][1] : '';
  check('markup: the forced output arrived', body.includes('<script>window.__pwned=1</script>'), msgs);
  check('markup: <script> and onerror shown as text, never run',
    (await page.evaluate(() => window.__pwned)) === undefined, body);
  const counts = await page.$$eval('#log', ([log]) => [log.querySelectorAll('script').length,
    log.querySelectorAll('img').length]);
  check('markup: no script or img element made from the output', counts[0] === 0 && counts[1] === 0, counts);
  const code = await page.$$eval('#log pre code', (els) => els.map((e) => e.textContent));
  check('markup: the fenced block is a <pre><code> holding the text', code.length === 1 &&
    code[0] === '<script>window.__pwned=3</script>', code);
  const bold = await page.$$eval('#log strong', (els) => els.map((e) => e.textContent));
  check('markup: **bold** rendered as <strong>', bold.includes('bold'), bold);
  // stored history with markup, rendered on load
  await page.evaluate(() => localStorage.setItem('alice-llm-chat', JSON.stringify([
    { role: 'user', content: '<img src=x onerror=window.__pwned=4>' },
    { role: 'assistant', content: '<script>window.__pwned=5</script>' }])));
  await page.reload({ waitUntil: 'load' });
  await sleep(300);
  const hist = await messageTexts();
  check('markup: stored history with markup shown as text', hist.length === 2 &&
    hist[1][1] === '<script>window.__pwned=5</script>' &&
    (await page.evaluate(() => window.__pwned)) === undefined, hist);
});

check('page: no uncaught script errors', pageErrors.length === 0, pageErrors);
await browser.close();
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
