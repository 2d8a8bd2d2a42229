// End-to-end test of /v1/messages with the official `@anthropic-ai/sdk` npm
// package against a running alice-llm-server (issue 21). Run by
// sdk_test.py (which installs package.json's dependencies into <build>/npm,
// starts the server with an API key and sets ALICE_BASE_URL to .../v1).
// The SDK sends the key as x-api-key. Prints one line per check and
// "N passed, N failed".
import Anthropic from '@anthropic-ai/sdk';

const baseURL = process.env.ALICE_BASE_URL.replace(/\/v1$/, '');
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

const client = new Anthropic({ baseURL, apiKey, maxRetries: 0, timeout: 120000 });
const req = {
  model: 'tiny-tolstoy', max_tokens: 12, temperature: 0, system: 'You are terse.',
  messages: [{ role: 'user', content: 'Who is Pierre?' }],
};

let text = null;
await group('messages', async () => {
  const m = await client.messages.create(req);
  text = m.content[0].text;
  check('messages: type/role/id', m.type === 'message' && m.role === 'assistant' && m.id.startsWith('msg_'), m);
  check('messages: text block', m.content[0].type === 'text' && text.length > 0, m.content);
  check('messages: stop_reason', ['end_turn', 'max_tokens'].includes(m.stop_reason), m.stop_reason);
  check('messages: usage', m.usage.input_tokens > 0 && m.usage.output_tokens > 0, m.usage);
  const n = await client.messages.countTokens({ model: 'x', system: req.system, messages: req.messages });
  check('count_tokens == usage.input_tokens', n.input_tokens === m.usage.input_tokens, { n, u: m.usage });
});

await group('messages stream', async () => {
  const stream = await client.messages.create({ ...req, stream: true });
  const types = [];
  let s = '';
  let stop = null;
  for await (const ev of stream) {
    types.push(ev.type);
    if (ev.type === 'content_block_delta' && ev.delta.type === 'text_delta') s += ev.delta.text;
    if (ev.type === 'message_delta') stop = ev.delta.stop_reason;
  }
  check('stream: text equals non-streamed', s === text, { s, text });
  check('stream: event order', types[0] === 'message_start' && types[1] === 'content_block_start' &&
    types.at(-3) === 'content_block_stop' && types.at(-2) === 'message_delta' && types.at(-1) === 'message_stop',
    types);
  check('stream: stop_reason', ['end_turn', 'max_tokens'].includes(stop), stop);
  const helper = client.messages.stream(req);
  const final = await helper.finalMessage();
  check('messages.stream helper: finalMessage', final.content[0].text === text, final.content);
});

await group('errors', async () => {
  try {
    await client.messages.create({ ...req, max_tokens: 0 });
    check('400: BadRequestError thrown', false, 'no error');
  } catch (e) {
    check('400: BadRequestError', e instanceof Anthropic.BadRequestError && e.status === 400 &&
      e.error && e.error.type === 'error' && e.error.error.type === 'invalid_request_error', String(e));
  }
  const bad = new Anthropic({ baseURL, apiKey: 'wrong-key', maxRetries: 0 });
  try {
    await bad.messages.create(req);
    check('401: AuthenticationError thrown', false, 'no error');
  } catch (e) {
    check('401: AuthenticationError', e instanceof Anthropic.AuthenticationError && e.status === 401, String(e));
  }
});

// tool_use -> tool_result round trip on the server whose model's template
// has tools (the qwen3 fixture, ALICE_TOOLS_BASE_URL): tool_choice any makes
// the random-weight model call the tool.
const toolsURL = process.env.ALICE_TOOLS_BASE_URL;
const tools = [{
  name: 'get_weather', description: 'Current weather of a city',
  input_schema: {
    type: 'object', properties: { city: { type: 'string', maxLength: 10 }, days: { type: 'integer', minimum: 1, maximum: 3 } },
    required: ['city', 'days'],
  },
}];

async function agent(tc, stream) {
  const tag = stream ? 'tool_use stream' : 'tool_use';
  const convo = [{ role: 'user', content: 'What is the weather in Oslo?' }];
  const req = { model: 'qwen3', max_tokens: 200, temperature: 0, tools, tool_choice: { type: 'any' }, messages: convo };
  const m = stream ? await tc.messages.stream(req).finalMessage() : await tc.messages.create(req);
  const use = m.content.find((b) => b.type === 'tool_use');
  check(`${tag}: a tool_use block, stop_reason tool_use`, use && use.name === 'get_weather' &&
    m.stop_reason === 'tool_use', m);
  check(`${tag}: input valid`, use && typeof use.input.city === 'string' && Number.isInteger(use.input.days), use);
  convo.push({ role: 'assistant', content: m.content });
  convo.push({ role: 'user', content: [{ type: 'tool_result', tool_use_id: use.id, content: '21 C, clear' }] });
  const fin = await tc.messages.create({ model: 'qwen3', max_tokens: 16, temperature: 0, tools, messages: convo });
  check(`${tag}: an answer after the tool_result`, fin.type === 'message' &&
    fin.usage.input_tokens > m.usage.input_tokens, fin);
}

if (toolsURL) {
  const tc = new Anthropic({ baseURL: toolsURL.replace(/\/v1$/, ''), apiKey, maxRetries: 0, timeout: 120000 });
  await group('tool_use', () => agent(tc, false));
  await group('tool_use stream', () => agent(tc, true));
} else {
  check('ALICE_TOOLS_BASE_URL set (the tools server)', false);
}

console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
