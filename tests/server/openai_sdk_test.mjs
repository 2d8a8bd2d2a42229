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

// ---- Responses API (issue 21): responses.create, streamed and not ----
let responseText = null;
await group('responses', async () => {
  const r = await client.responses.create({
    model: 'tiny-tolstoy', instructions: 'You are terse.', input: 'Who is Pierre?', max_output_tokens: 12,
    temperature: 0,
  });
  responseText = r.output_text;
  check('responses: object/id', r.object === 'response' && r.id.startsWith('resp_'), r);
  check('responses: output_text', typeof r.output_text === 'string' && r.output_text.length > 0, r);
  check('responses: status', ['completed', 'incomplete'].includes(r.status), r.status);
  check('responses: usage', r.usage.output_tokens > 0 &&
    r.usage.total_tokens === r.usage.input_tokens + r.usage.output_tokens, r.usage);
  const chat = await client.chat.completions.create({
    model: 'x', max_tokens: 12, temperature: 0,
    messages: [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Who is Pierre?' }],
  });
  check('responses: text equals the chat completion', r.output_text === chat.choices[0].message.content,
    { a: r.output_text, b: chat.choices[0].message.content });
  const again = await client.responses.retrieve(r.id);
  check('responses: retrieve', again.id === r.id && again.output_text === r.output_text, again);
  const next = await client.responses.create({
    model: 'x', input: 'And Natasha?', previous_response_id: r.id, max_output_tokens: 4, temperature: 0,
  });
  check('responses: previous_response_id', next.previous_response_id === r.id &&
    next.usage.input_tokens > r.usage.input_tokens, next.usage);
});

await group('responses stream', async () => {
  const stream = await client.responses.create({
    model: 'tiny-tolstoy', instructions: 'You are terse.', input: 'Who is Pierre?', max_output_tokens: 12,
    temperature: 0, stream: true,
  });
  const types = [];
  let text = '';
  let final = null;
  for await (const ev of stream) {
    types.push(ev.type);
    if (ev.type === 'response.output_text.delta') text += ev.delta;
    if (ev.type === 'response.completed' || ev.type === 'response.incomplete') final = ev.response;
  }
  check('responses stream: text equals non-streamed', text === responseText, { text, responseText });
  check('responses stream: starts created, in_progress', types[0] === 'response.created' &&
    types[1] === 'response.in_progress', types);
  check('responses stream: ends with the final response', final !== null &&
    final.output[0].content[0].text === text && final.status !== 'in_progress', types.slice(-4));
  const s2 = client.responses.stream({
    model: 'x', input: 'Who is Pierre?', instructions: 'You are terse.', max_output_tokens: 12, temperature: 0,
  });
  const done = await s2.finalResponse();
  check('responses.stream helper: finalResponse', done.output_text === responseText, done.output_text);
});

await group('responses errors', async () => {
  try {
    await client.responses.create({ model: 'x', input: 'hi', previous_response_id: 'resp_unknown' });
    check('responses: unknown previous_response_id rejected', false, 'no error');
  } catch (e) {
    check('responses: unknown previous_response_id -> 400', e instanceof OpenAI.BadRequestError &&
      e.param === 'previous_response_id', String(e));
  }
});

// An agent loop on a model whose template has tools (the qwen3 fixture:
// Hermes <tool_call> format; a second server, ALICE_TOOLS_BASE_URL): tools
// -> the model calls one (tool_choice required, so the random-weight model
// must) -> the tool's result goes back -> the final answer. Streamed too:
// the SDK's stream helper assembles the call from the deltas.
const toolsURL = process.env.ALICE_TOOLS_BASE_URL;
const tools = [{
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Current weather of a city',
    parameters: {
      type: 'object',
      properties: { city: { type: 'string', maxLength: 10 }, days: { type: 'integer', minimum: 1, maximum: 3 } },
      required: ['city', 'days'],
    },
  },
}];

async function agentLoop(tc, stream) {
  const tag = stream ? 'agent stream' : 'agent';
  const convo = [{ role: 'user', content: 'What is the weather in Oslo?' }];
  const req = { model: 'qwen3', messages: convo, tools, tool_choice: 'required', max_tokens: 200, temperature: 1.0, seed: 11 };
  let msg;
  let finish;
  if (stream) {
    const s = tc.chat.completions.stream(req);
    const done = await s.finalChatCompletion();
    msg = done.choices[0].message;
    finish = done.choices[0].finish_reason;
    const plain = await tc.chat.completions.create(req);
    check(`${tag}: streamed call == non-streamed`,
      JSON.stringify(msg.tool_calls.map((c) => [c.function.name, c.function.arguments])) ===
      JSON.stringify(plain.choices[0].message.tool_calls.map((c) => [c.function.name, c.function.arguments])),
      { msg, plain: plain.choices[0].message });
  } else {
    const r = await tc.chat.completions.create(req);
    msg = r.choices[0].message;
    finish = r.choices[0].finish_reason;
  }
  const call = msg.tool_calls && msg.tool_calls[0];
  check(`${tag}: finish_reason tool_calls`, finish === 'tool_calls', { finish, msg });
  check(`${tag}: a get_weather call with an id`, call && call.type === 'function' &&
    call.function.name === 'get_weather' && /^call_/.test(call.id), msg);
  let args = null;
  try {
    args = JSON.parse(call.function.arguments);
  } catch (e) { /* checked below */ }
  // maxLength counts characters (code points, JSON Schema), not UTF-16 units
  check(`${tag}: arguments valid`, args && typeof args.city === 'string' && [...args.city].length <= 10 &&
    Number.isInteger(args.days) && args.days >= 1 && args.days <= 3, call && call.function.arguments);
  convo.push(msg);
  convo.push({ role: 'tool', tool_call_id: call.id, content: JSON.stringify({ temperature_c: 21, sky: 'clear' }) });
  const fin = await tc.chat.completions.create({ model: 'qwen3', messages: convo, tools, max_tokens: 16, seed: 3 });
  const f = fin.choices[0];
  check(`${tag}: a final answer after the tool result`, ['stop', 'length', 'tool_calls'].includes(f.finish_reason) &&
    f.message.role === 'assistant', f);
}

if (toolsURL) {
  const tc = new OpenAI({ baseURL: toolsURL, apiKey, maxRetries: 0, timeout: 120000 });
  await group('agent loop', () => agentLoop(tc, false));
  await group('agent loop stream', () => agentLoop(tc, true));
  await group('tool_choice errors', async () => {
    try {
      await tc.chat.completions.create({
        model: 'qwen3', messages, tools, tool_choice: { type: 'function', function: { name: 'nope' } },
      });
      check('400: unknown tool_choice name', false, 'no error');
    } catch (e) {
      check('400: unknown tool_choice name', e instanceof OpenAI.BadRequestError && /nope/.test(e.message), String(e));
    }
  });
} else {
  check('ALICE_TOOLS_BASE_URL set (the tools server)', false);
}

// ---- Responses API tool round trip (issue 21) on the tools server: a
// function tool -> a function_call item -> function_call_output -> answer,
// streamed through the SDK's helper too.
async function responsesAgent(tc, stream) {
  const tag = stream ? 'responses agent stream' : 'responses agent';
  const rtools = [{ type: 'function', name: 'get_weather', description: 'Current weather of a city',
    parameters: tools[0].function.parameters }];
  const req = { model: 'qwen3', input: 'What is the weather in Oslo?', tools: rtools, tool_choice: 'required',
    max_output_tokens: 200, temperature: 0 };
  const r = stream ? await tc.responses.stream(req).finalResponse() : await tc.responses.create(req);
  const call = r.output.find((o) => o.type === 'function_call');
  check(`${tag}: a function_call item`, call && call.name === 'get_weather' && /^call_/.test(call.call_id), r.output);
  let args = null;
  try {
    args = JSON.parse(call.arguments);
  } catch (e) { /* checked below */ }
  check(`${tag}: arguments valid`, args && typeof args.city === 'string' && Number.isInteger(args.days), call);
  const next = await tc.responses.create({
    model: 'qwen3', previous_response_id: r.id, tools: rtools, max_output_tokens: 16, temperature: 0,
    input: [{ type: 'function_call_output', call_id: call.call_id, output: JSON.stringify({ temperature_c: 21 }) }],
  });
  check(`${tag}: an answer after function_call_output`, ['completed', 'incomplete'].includes(next.status) &&
    next.usage.input_tokens > r.usage.input_tokens, next);
}

if (toolsURL) {
  const tc = new OpenAI({ baseURL: toolsURL, apiKey, maxRetries: 0, timeout: 120000 });
  await group('responses agent', () => responsesAgent(tc, false));
  await group('responses agent stream', () => responsesAgent(tc, true));
}
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
