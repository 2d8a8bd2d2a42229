// End-to-end test with the official `openai` npm package against a running
// alice-llm-server. Run by sdk_test.py, which installs the package into
// <build>/npm, starts the server (API key "sk-alice-test") and sets
// ALICE_BASE_URL. Prints one line per check and "N passed, N failed".
import OpenAI from 'openai';

const baseURL = process.env.ALICE_BASE_URL;
const apiKey = process.env.ALICE_API_KEY_FOR_TEST;
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

const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 120000 });
const messages = [{ role: 'user', content: 'Who is Pierre?' }];

let chatText = null;
await group('chat', async () => {
  const r = await client.chat.completions.create({ model: 'tiny-tolstoy', messages, max_tokens: 12, temperature: 0 });
  chatText = r.choices[0].message.content;
  check('chat: assistant text', r.choices[0].message.role === 'assistant' && chatText.length > 0, r);
  check('chat: finish_reason', ['stop', 'length'].includes(r.choices[0].finish_reason), r);
  check('chat: usage', r.usage.completion_tokens > 0 &&
    r.usage.total_tokens === r.usage.prompt_tokens + r.usage.completion_tokens, r.usage);
  check('chat: id/object', r.id.startsWith('chatcmpl-') && r.object === 'chat.completion', r);
});

await group('chat stream', async () => {
  const stream = await client.chat.completions.create({
    model: 'tiny-tolstoy', messages, max_tokens: 12, temperature: 0, stream: true,
    stream_options: { include_usage: true },
  });
  let text = '';
  let finish = null;
  let usage = null;
  let role = null;
  const ids = new Set();
  for await (const chunk of stream) {
    ids.add(chunk.id);
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      if (c.delta.role) role = c.delta.role;
      if (c.delta.content) text += c.delta.content;
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  check('stream: text equals non-streamed', text === chatText, { text, chatText });
  check('stream: role chunk', role === 'assistant');
  check('stream: finish_reason', finish === 'stop' || finish === 'length', finish);
  check('stream: usage chunk', usage && usage.completion_tokens > 0, usage);
  check('stream: one id', ids.size === 1, [...ids]);
});

await group('completions', async () => {
  const r = await client.completions.create({
    model: 'tiny-tolstoy', prompt: 'Prince Andrew looked at', max_tokens: 8, temperature: 0,
    logit_bias: { 0: -100, 2: -100 },
  });
  check('completions: text', typeof r.choices[0].text === 'string' && r.choices[0].text.length > 0, r);
  check('completions: length', r.choices[0].finish_reason === 'length' && r.usage.completion_tokens === 8, r);
  const s = await client.completions.create({
    model: 'tiny-tolstoy', prompt: 'Prince Andrew looked at', max_tokens: 8, temperature: 0,
    logit_bias: { 0: -100, 2: -100 }, stream: true,
  });
  let text = '';
  for await (const chunk of s) text += chunk.choices.map((c) => c.text).join('');
  check('completions stream: same text', text === r.choices[0].text, { text, want: r.choices[0].text });
});

await group('response_format', async () => {
  const r = await client.chat.completions.create({
    model: 'tiny-tolstoy', messages: [{ role: 'user', content: 'Describe Pierre as JSON.' }], max_tokens: 150,
    temperature: 0,
    response_format: {
      type: 'json_schema',
      json_schema: {
        name: 'person',
        schema: {
          type: 'object',
          properties: { name: { type: 'string', maxLength: 12 }, rich: { type: 'boolean' } },
          required: ['name', 'rich'],
        },
      },
    },
  });
  let obj = null;
  try {
    obj = JSON.parse(r.choices[0].message.content);
  } catch (e) { /* checked below */ }
  check('json_schema: parsable object of the schema', obj && typeof obj.name === 'string' &&
    typeof obj.rich === 'boolean', r.choices[0].message.content);
});

await group('models', async () => {
  const list = await client.models.list();
  const ids = [];
  for await (const m of list) ids.push(m.id);
  check('models: the loaded model', ids.length === 1 && ids[0] === 'tiny-tolstoy-Q8_0', ids);
  const m = await client.models.retrieve('tiny-tolstoy-Q8_0');
  check('models: retrieve', m.id === 'tiny-tolstoy-Q8_0' && m.object === 'model', m);
  try {
    await client.models.retrieve('gpt-4');
    check('models: unknown id is NotFoundError', false, 'no error');
  } catch (e) {
    check('models: unknown id is NotFoundError', e instanceof OpenAI.NotFoundError && e.status === 404, String(e));
  }
});

await group('errors', async () => {
  try {
    await client.chat.completions.create({ model: 'x', messages, temperature: 5 });
    check('400: BadRequestError thrown', false, 'no error');
  } catch (e) {
    check('400: BadRequestError', e instanceof OpenAI.BadRequestError && e.status === 400, String(e));
    check('400: param names the field', e.param === 'temperature' || (e.error && e.error.param === 'temperature'),
      e.error);
  }
  const bad = new OpenAI({ baseURL, apiKey: 'wrong-key', maxRetries: 0 });
  try {
    await bad.models.list();
    check('401: AuthenticationError thrown', false, 'no error');
  } catch (e) {
    check('401: AuthenticationError', e instanceof OpenAI.AuthenticationError && e.status === 401, String(e));
  }
  try {
    await client.chat.completions.create({
      model: 'x', messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'http://x/y.png' } }] }],
    });
    check('400: image part rejected', false, 'no error');
  } catch (e) {
    check('400: image part rejected', e.status === 400 && /image_url/.test(e.message), String(e));
  }
});

// ---- embeddings (issue 21): a separate block, against a second server
// started with --embeddings (ALICE_EMBED_BASE_URL, set by sdk_test.py) ----
async function embeddingsGroup() {
  const embBase = process.env.ALICE_EMBED_BASE_URL;
  if (!embBase) {
    check('embeddings: ALICE_EMBED_BASE_URL set by sdk_test.py', false);
    return;
  }
  const emb = new OpenAI({ baseURL: embBase, apiKey, maxRetries: 0, timeout: 120000 });
  const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));
  await group('embeddings', async () => {
    // the SDK asks for base64 by default and decodes it to floats
    const r = await emb.embeddings.create({ model: 'tiny-tolstoy', input: ['Pierre', 'Natasha and Andrei'] });
    check('embeddings: list of 2', r.object === 'list' && r.data.length === 2 &&
      r.data.every((d, i) => d.object === 'embedding' && d.index === i), r);
    check('embeddings: unit vectors', r.data.every((d) => Array.isArray(d.embedding) &&
      d.embedding.length > 0 && Math.abs(norm(d.embedding) - 1) < 1e-5));
    check('embeddings: usage', r.usage.prompt_tokens > 0 && r.usage.total_tokens === r.usage.prompt_tokens, r.usage);
    check('embeddings: model echoed', r.model === 'tiny-tolstoy', r.model);
    const f = await emb.embeddings.create({ model: 'tiny-tolstoy', input: 'Pierre', encoding_format: 'float' });
    check('embeddings: float == base64 decoded',
      f.data[0].embedding.length === r.data[0].embedding.length &&
      f.data[0].embedding.every((x, i) => Math.fround(x) === r.data[0].embedding[i]));
    try {
      await emb.embeddings.create({ model: 'tiny-tolstoy', input: '' });
      check('embeddings: empty input -> 400', false, 'no error');
    } catch (e) {
      check('embeddings: empty input -> 400', e instanceof OpenAI.BadRequestError, String(e));
    }
  });
  await group('embeddings on a generation server', async () => {
    try {
      await client.embeddings.create({ model: 'tiny-tolstoy', input: 'Pierre' });
      check('embeddings: generation server -> 400', false, 'no error');
    } catch (e) {
      check('embeddings: generation server -> 400', e instanceof OpenAI.BadRequestError &&
        /--embeddings/.test(e.message), String(e));
    }
  });
}
await embeddingsGroup();

console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
