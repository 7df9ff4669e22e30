// `kiln serve` queried by the official `openai` npm client: chat, streaming
// chat, completions, stop, max_tokens, usage, seed reproducibility, models,
// tool calls (streamed and not, required and named), response_format
// json_schema and the client's parse helper, and the error cases the client
// turns into its typed errors.
'use strict';

const { test, describe, before, after } = require('node:test');
const assert = require('node:assert/strict');
const OpenAIModule = require('openai');
const { startServer } = require('./kiln_server.js');

const OpenAI = OpenAIModule.OpenAI || OpenAIModule.default || OpenAIModule;
const question = [{ role: 'user', content: 'Tell me of the king' }];

// Tools for the tiny model, whose text is random: under tool_choice required
// or a named function the grammar must do all the work.
const weatherSchema = {
  type: 'object',
  properties: {
    city: { type: 'string', minLength: 1, maxLength: 12 },
    unit: { enum: ['celsius', 'fahrenheit'] },
    days: { type: 'integer', minimum: 1, maximum: 7 },
  },
  required: ['city', 'unit'],
  additionalProperties: false,
};
const sumSchema = {
  type: 'object',
  properties: { terms: { type: 'array', items: { type: 'integer', minimum: -9, maximum: 9 }, minItems: 1, maxItems: 4 } },
  required: ['terms'],
  additionalProperties: false,
};
const tools = [
  { type: 'function', function: { name: 'get_weather', description: 'Weather in a city.', parameters: weatherSchema } },
  { type: 'function', function: { name: 'add', description: 'Adds integers.', parameters: sumSchema } },
];
const toolQuestion = [{ role: 'user', content: 'Weather in Bern? And add 2 and 3.' }];

// The arguments fit the schemas above (checked by hand: the client has no validator).
function checkArguments(name, text) {
  const args = JSON.parse(text);
  assert.equal(typeof args, 'object');
  if (name === 'get_weather') {
    assert.deepEqual(Object.keys(args).filter((k) => !['city', 'unit', 'days'].includes(k)), []);
    assert.equal(typeof args.city, 'string');
    assert.ok([...args.city].length >= 1 && [...args.city].length <= 12, args.city);
    assert.ok(['celsius', 'fahrenheit'].includes(args.unit), text);
    if ('days' in args) assert.ok(Number.isInteger(args.days) && args.days >= 1 && args.days <= 7, text);
  } else {
    assert.equal(name, 'add');
    assert.deepEqual(Object.keys(args), ['terms']);
    assert.ok(Array.isArray(args.terms) && args.terms.length >= 1 && args.terms.length <= 4, text);
    for (const t of args.terms) assert.ok(Number.isInteger(t) && t >= -9 && t <= 9, text);
  }
  return args;
}

function checkCalls(calls, names) {
  assert.ok(calls.length >= 1);
  for (const call of calls) {
    assert.equal(call.type, 'function');
    assert.match(call.id, /^call_[A-Za-z0-9]{24}$/);
    assert.ok(names.includes(call.function.name), call.function.name);
    checkArguments(call.function.name, call.function.arguments);
  }
}

describe('kiln serve with the OpenAI client', () => {
  let server;
  let client;

  before(async () => {
    server = await startServer();
    client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 120000 });
  });

  after(async () => {
    const code = await server.stop();
    assert.equal(code, 0, `kiln serve exited with ${code}:\n${server.log()}`);
    assert.doesNotMatch(server.log(), /ERROR: (Address|Leak)Sanitizer|runtime error:/);
  });

  test('lists the served model', async () => {
    const models = await client.models.list();
    assert.deepEqual(models.data.map((m) => m.id), ['tiny-qwen2']);
  });

  test('chat completion', async () => {
    const r = await client.chat.completions.create({ model: 'tiny-qwen2', messages: question, max_tokens: 16, temperature: 0 });
    assert.equal(r.object, 'chat.completion');
    assert.match(r.id, /^chatcmpl-/);
    assert.equal(r.model, 'tiny-qwen2');
    assert.equal(r.choices.length, 1);
    assert.equal(r.choices[0].message.role, 'assistant');
    assert.equal(typeof r.choices[0].message.content, 'string');
    assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
    assert.ok(r.usage.prompt_tokens > 0);
    assert.ok(r.usage.completion_tokens >= 1 && r.usage.completion_tokens <= 16);
    assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  });

  test('streaming chat gives the same text as the whole answer, then usage', async () => {
    const params = { model: 'tiny-qwen2', messages: question, max_tokens: 24, temperature: 0 };
    const whole = await client.chat.completions.create(params);
    const stream = await client.chat.completions.create({ ...params, stream: true, stream_options: { include_usage: true } });
    let text = '';
    let role = null;
    let finish = null;
    let usage = null;
    let chunks = 0;
    for await (const chunk of stream) {
      chunks += 1;
      assert.equal(chunk.object, 'chat.completion.chunk');
      if (chunk.usage) usage = chunk.usage;
      for (const choice of chunk.choices) {
        if (choice.delta.role) role = choice.delta.role;
        if (choice.delta.content) text += choice.delta.content;
        if (choice.finish_reason) finish = choice.finish_reason;
      }
    }
    assert.ok(chunks >= 3);
    assert.equal(role, 'assistant');
    assert.equal(text, whole.choices[0].message.content);
    assert.equal(finish, whole.choices[0].finish_reason);
    assert.deepEqual(usage.completion_tokens, whole.usage.completion_tokens);
    assert.deepEqual(usage.prompt_tokens, whole.usage.prompt_tokens);
  });

  test('completions with max_tokens and usage', async () => {
    const r = await client.completions.create({ model: 'tiny-qwen2', prompt: 'The king', max_tokens: 5, temperature: 0, ignore_eos: true });
    assert.equal(r.object, 'text_completion');
    assert.match(r.id, /^cmpl-/);
    assert.equal(r.choices[0].finish_reason, 'length');
    assert.equal(r.usage.completion_tokens, 5);
    assert.ok(r.choices[0].text.length > 0);
    const several = await client.completions.create({ model: 'tiny-qwen2', prompt: ['The king', 'Once upon a time'], max_tokens: 3, n: 2, ignore_eos: true });
    assert.deepEqual(several.choices.map((c) => c.index), [0, 1, 2, 3]);
    assert.equal(several.usage.completion_tokens, 12);
  });

  test('streaming completions', async () => {
    const params = { model: 'tiny-qwen2', prompt: 'Once upon a time', max_tokens: 10, temperature: 0, ignore_eos: true };
    const whole = await client.completions.create(params);
    let text = '';
    for await (const chunk of await client.completions.create({ ...params, stream: true })) {
      text += chunk.choices.map((c) => c.text).join('');
    }
    assert.equal(text, whole.choices[0].text);
  });

  test('a stop string ends the text before it', async () => {
    const params = { model: 'tiny-qwen2', prompt: 'The king', max_tokens: 40, temperature: 0, ignore_eos: true };
    const free = (await client.completions.create(params)).choices[0].text;
    assert.ok(free.length > 12, free);
    const stop = free.slice(8, 11);
    const stopped = (await client.completions.create({ ...params, stop: [stop] })).choices[0];
    assert.equal(stopped.finish_reason, 'stop');
    assert.equal(stopped.text, free.slice(0, free.indexOf(stop)));
    const chat = await client.chat.completions.create({ model: 'tiny-qwen2', messages: question, max_tokens: 40, temperature: 0, stop: 'the' });
    assert.ok(!chat.choices[0].message.content.includes('the'));
  });

  test('a seed reproduces sampled answers', async () => {
    const params = { model: 'tiny-qwen2', messages: question, max_tokens: 24, temperature: 1.0, top_p: 0.95 };
    const a = await client.chat.completions.create({ ...params, seed: 1234 });
    const b = await client.chat.completions.create({ ...params, seed: 1234 });
    assert.equal(a.choices[0].message.content, b.choices[0].message.content);
    const others = await Promise.all([1, 2, 3, 4].map((seed) => client.chat.completions.create({ ...params, seed })));
    const texts = new Set(others.map((r) => r.choices[0].message.content));
    assert.ok(texts.size > 1, 'different seeds sample differently');
  });

  test('logprobs', async () => {
    const r = await client.chat.completions.create({ model: 'tiny-qwen2', messages: question, max_tokens: 4, temperature: 0, logprobs: true, top_logprobs: 3 });
    const content = r.choices[0].logprobs.content;
    assert.equal(content.length, r.usage.completion_tokens);
    for (const item of content) {
      assert.ok(item.logprob <= 0);
      assert.equal(item.top_logprobs.length, 3);
      // Greedy picks the most likely token.
      assert.equal(item.top_logprobs[0].logprob, item.logprob);
    }
  });

  test('tool_choice required: one call whose arguments fit its schema', async () => {
    for (const seed of [1, 2, 3]) {
      const r = await client.chat.completions.create({
        model: 'tiny-qwen2', messages: toolQuestion, tools, tool_choice: 'required', parallel_tool_calls: false,
        temperature: 1.0, seed, max_tokens: 200 });
      const choice = r.choices[0];
      assert.equal(choice.finish_reason, 'tool_calls');
      assert.equal(choice.message.content, null);
      assert.equal(choice.message.tool_calls.length, 1);
      checkCalls(choice.message.tool_calls, ['get_weather', 'add']);
    }
  });

  test('a named function is the one called', async () => {
    for (const seed of [4, 5]) {
      const r = await client.chat.completions.create({
        model: 'tiny-qwen2', messages: toolQuestion, tools, parallel_tool_calls: false,
        tool_choice: { type: 'function', function: { name: 'add' } }, temperature: 1.0, seed, max_tokens: 200 });
      assert.equal(r.choices[0].finish_reason, 'tool_calls');
      assert.deepEqual(r.choices[0].message.tool_calls.map((c) => c.function.name), ['add']);
      checkCalls(r.choices[0].message.tool_calls, ['add']);
    }
  });

  test('streamed tool calls: name first, then argument deltas, as the whole answer', async () => {
    const params = { model: 'tiny-qwen2', messages: toolQuestion, tools, tool_choice: 'required',
      parallel_tool_calls: false, temperature: 1.0, seed: 11, max_tokens: 200 };
    const whole = await client.chat.completions.create(params);
    const stream = await client.chat.completions.create({ ...params, stream: true });
    const calls = [];
    let finish = null;
    let content = '';
    for await (const chunk of stream) {
      for (const choice of chunk.choices) {
        if (choice.delta.content) content += choice.delta.content;
        for (const call of choice.delta.tool_calls || []) {
          if (call.id) {
            assert.equal(call.index, calls.length);
            assert.equal(call.type, 'function');
            assert.equal(call.function.arguments, '');
            calls.push({ id: call.id, type: 'function', function: { name: call.function.name, arguments: '' } });
          } else {
            assert.equal(typeof call.function.arguments, 'string');
            assert.ok(call.function.arguments.length > 0, 'argument deltas are never empty');
            calls[call.index].function.arguments += call.function.arguments;
          }
        }
        if (choice.finish_reason) finish = choice.finish_reason;
      }
    }
    assert.equal(finish, 'tool_calls');
    assert.doesNotMatch(content, /<|tool_call/);
    checkCalls(calls, ['get_weather', 'add']);
    assert.deepEqual(calls.map((c) => c.function), whole.choices[0].message.tool_calls.map((c) => c.function));

    // The client's own stream helper assembles the same calls.
    const helper = client.chat.completions.stream(params);
    const final = await helper.finalChatCompletion();
    assert.equal(final.choices[0].finish_reason, 'tool_calls');
    assert.deepEqual(final.choices[0].message.tool_calls.map((c) => c.function), calls.map((c) => c.function));
  });

  test('tool results go back through the template', async () => {
    const first = await client.chat.completions.create({
      model: 'tiny-qwen2', messages: toolQuestion, tools, tool_choice: { type: 'function', function: { name: 'get_weather' } },
      parallel_tool_calls: false, temperature: 1.0, seed: 3, max_tokens: 200 });
    const message = first.choices[0].message;
    const messages = [...toolQuestion, message,
      { role: 'tool', tool_call_id: message.tool_calls[0].id, content: '{"temperature": 21}' }];
    const r = await client.chat.completions.create({ model: 'tiny-qwen2', messages, tools, max_tokens: 8, temperature: 0 });
    assert.ok(r.usage.prompt_tokens > first.usage.prompt_tokens);
    const none = await client.chat.completions.create({ model: 'tiny-qwen2', messages, tools, tool_choice: 'none', max_tokens: 8 });
    assert.equal(none.choices[0].message.tool_calls, undefined);
  });

  test('bad tools raise BadRequestError naming the field', async () => {
    await assert.rejects(
      client.chat.completions.create({ model: 'tiny-qwen2', messages: question, tools: [{ type: 'function', function: { parameters: {} } }] }),
      (e) => e instanceof OpenAI.BadRequestError && e.param === 'tools[0].function.name');
    await assert.rejects(
      client.chat.completions.create({ model: 'tiny-qwen2', messages: question, tools, tool_choice: { type: 'function', function: { name: 'fly' } } }),
      (e) => e.status === 400 && e.param === 'tool_choice');
  });

  test('response_format json_schema, with create and the parse helper', async () => {
    const schema = { type: 'object', properties: { name: { type: 'string', maxLength: 10 }, age: { type: 'integer', minimum: 0, maximum: 120 } },
      required: ['name', 'age'], additionalProperties: false };
    const response_format = { type: 'json_schema', json_schema: { name: 'person', schema, strict: true } };
    const r = await client.chat.completions.create({ model: 'tiny-qwen2', messages: question, response_format, temperature: 1.0, seed: 5, max_tokens: 600 });
    assert.equal(r.choices[0].finish_reason, 'stop');
    const value = JSON.parse(r.choices[0].message.content);
    assert.deepEqual(Object.keys(value).sort(), ['age', 'name']);
    assert.ok(Number.isInteger(value.age) && value.age >= 0 && value.age <= 120);
    assert.ok(typeof value.name === 'string' && [...value.name].length <= 10);

    const parsed = await client.chat.completions.parse({ model: 'tiny-qwen2', messages: question, response_format, temperature: 1.0, seed: 6, max_tokens: 600 });
    const person = parsed.choices[0].message.parsed;
    assert.deepEqual(Object.keys(person).sort(), ['age', 'name']);
    assert.ok(Number.isInteger(person.age));

    // Strict tools come back with parsed_arguments.
    const strictTools = tools.map((t) => ({ ...t, function: { ...t.function, strict: true } }));
    const called = await client.chat.completions.parse({ model: 'tiny-qwen2', messages: toolQuestion, tools: strictTools,
      tool_choice: 'required', parallel_tool_calls: false, temperature: 1.0, seed: 8, max_tokens: 200 });
    const call = called.choices[0].message.tool_calls[0];
    assert.deepEqual(call.function.parsed_arguments, checkArguments(call.function.name, call.function.arguments));
  });

  test('bad requests raise BadRequestError naming the field', async () => {
    await assert.rejects(
      client.chat.completions.create({ model: 'tiny-qwen2', messages: question, temperature: 'hot' }),
      (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === 'temperature');
    await assert.rejects(
      client.chat.completions.create({ model: 'tiny-qwen2', messages: question, max_tokens: 100000 }),
      (e) => e.status === 400 && e.param === 'max_tokens' && /context/.test(e.message));
    await assert.rejects(
      client.completions.create({ model: 'tiny-qwen2', prompt: [] }),
      (e) => e.status === 400 && e.param === 'prompt');
    await assert.rejects(
      client.chat.completions.create({ model: 'tiny-qwen2', messages: [{ role: 'wizard', content: 'x' }] }),
      (e) => e.status === 400 && e.param === 'messages[0].role');
  });

  test('an unknown model raises NotFoundError', async () => {
    await assert.rejects(
      client.chat.completions.create({ model: 'gpt-4o', messages: question }),
      (e) => e instanceof OpenAI.NotFoundError && e.status === 404 && e.code === 'model_not_found');
  });
});

describe('kiln serve with an API key', () => {
  let server;

  before(async () => {
    server = await startServer(['--api-key', 'test-key']);
  });

  after(async () => {
    assert.equal(await server.stop(), 0, server.log());
  });

  test('the right key is served, others raise AuthenticationError', async () => {
    const good = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'test-key', maxRetries: 0 });
    const r = await good.chat.completions.create({ model: 'tiny-qwen2', messages: question, max_tokens: 2 });
    assert.equal(r.choices.length, 1);
    const bad = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: 'wrong-key', maxRetries: 0 });
    await assert.rejects(bad.chat.completions.create({ model: 'tiny-qwen2', messages: question }),
      (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
    await assert.rejects(bad.models.list(), (e) => e.status === 401);
  });
});
