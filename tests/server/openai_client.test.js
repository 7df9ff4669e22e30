// `kiln serve` queried by the official `openai` npm client: chat, streaming
// chat, completions, stop, max_tokens, usage, seed reproducibility, models,
// and the error cases the client turns into its typed errors.
'use strict';

const { test, describe, before, after } = require('node:test');
const assert = require('node:assert/strict');
const OpenAIModule = require('openai');
const { startServer } = require('./kiln_server.js');

const OpenAI = OpenAIModule.OpenAI || OpenAIModule.default || OpenAIModule;
const question = [{ role: 'user', content: 'Tell me of the king' }];

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
