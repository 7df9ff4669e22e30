// `kiln serve`'s chat page (GET /) driven in the system's headless Chromium
// by playwright-core: loading without the API key, entering it, streaming a
// reply with its token speed, stop, regenerate, the system prompt and
// sampling settings as sent, JSON-schema mode, the context size asked again
// while the model loads, and model output full of markup staying text. Leaves a screenshot, chat.png, in
// $KILN_CHAT_PAGE_ARTIFACTS (else build/tests/chat_page). The browser is
// $KILN_CHROMIUM, else /usr/bin/chromium; playwright never downloads one.
'use strict';

const { describe, test, before, after } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const { chromium } = require('playwright-core');
const { startServer } = require('../server/kiln_server.js');

const API_KEY = 'page-test-key';
const repo = path.resolve(__dirname, '..', '..');
const artifacts = process.env.KILN_CHAT_PAGE_ARTIFACTS || path.join(repo, 'build', 'tests', 'chat_page');
const chromiumPath = process.env.KILN_CHROMIUM || '/usr/bin/chromium';

// What the browser must never run: markup a model (or a setting) may write.
const HOSTILE = '<img src=x onerror="window.__kilnInjected=1"><script>window.__kilnInjected=2</script>' +
  '<b onmouseover="window.__kilnInjected=3">bold?</b>';

function launchBrowser() {
  return chromium.launch({
    executablePath: chromiumPath,
    headless: true,
    // A container has no user namespaces for the sandbox and a small /dev/shm.
    args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu', '--no-first-run',
      '--disable-background-networking', '--disable-component-update'],
  });
}

// A page that records the chat requests it sends and any script error or
// Content-Security-Policy violation of its own.
async function openPage(browser, url) {
  const page = await browser.newPage({ viewport: { width: 1280, height: 820 } });
  const record = { chatRequests: [], problems: [] };
  page.on('request', (request) => {
    if (request.url().endsWith('/v1/chat/completions')) {
      record.chatRequests.push({ body: JSON.parse(request.postData()), headers: request.headers() });
    }
  });
  page.on('pageerror', (error) => record.problems.push(`page error: ${error.message}`));
  page.on('console', (message) => {
    // A refused API call (401, 400) is logged by the browser itself; only
    // the page's own faults count.
    if (message.type() === 'error' && !/Failed to load resource/.test(message.text())) {
      record.problems.push(`console: ${message.text()}`);
    }
  });
  await page.goto(url);
  return { page, record };
}

// Sends `text` from the composer and waits for the reply to end; returns
// the reply's element.
async function sendMessage(page, text) {
  const before = await page.locator('.message.assistant, .message.error').count();
  await page.fill('#prompt', text);
  await page.press('#prompt', 'Enter');
  return waitForReply(page, before);
}

async function waitForReply(page, before) {
  const reply = page.locator('#messages > .message:not(.user)').nth(before);
  await reply.waitFor();
  await page.waitForFunction((n) => {
    const node = document.querySelectorAll('#messages > .message:not(.user)')[n];
    return node && node.dataset.finish;
  }, before, { timeout: 60000 });
  return reply;
}

// Counts how many times each reply's text changed, to see it stream in.
function watchContentUpdates(page) {
  return page.evaluate(() => {
    window.__kilnUpdates = 0;
    new MutationObserver((records) => {
      for (const r of records) {
        const target = r.target.nodeType === Node.TEXT_NODE ? r.target.parentElement : r.target;
        if (target && target.classList && target.classList.contains('content') &&
            target.closest('.message.assistant')) window.__kilnUpdates += 1;
      }
    }).observe(document.getElementById('messages'), { subtree: true, childList: true, characterData: true });
  });
}

async function setSetting(page, selector, value) {
  await page.fill(selector, value);
  await page.locator(selector).dispatchEvent('change');
}

describe('the chat page of kiln serve', () => {
  let server;
  let browser;

  before(async () => {
    assert.ok(fs.existsSync(chromiumPath), `no browser at ${chromiumPath} (scripts/setup.sh installs chromium)`);
    [server, browser] = await Promise.all([startServer(['--api-key', API_KEY]), launchBrowser()]);
  });

  after(async () => {
    if (browser) await browser.close();
    if (server) {
      const code = await server.stop();
      assert.equal(code, 0, `kiln serve exited with ${code}:\n${server.log()}`);
      assert.doesNotMatch(server.log(), /ERROR: (Address|Leak)Sanitizer|runtime error:/);
    }
  });

  test('the page loads without the key, under a strict Content-Security-Policy; the API keeps needing it', async () => {
    for (const [file, type] of [['/', 'text/html'], ['/chat.js', 'text/javascript'], ['/chat.css', 'text/css'],
      ['/favicon.svg', 'image/svg+xml']]) {
      const response = await fetch(`${server.url}${file}`);
      assert.equal(response.status, 200, file);
      assert.ok(response.headers.get('content-type').startsWith(type), `${file}: ${response.headers.get('content-type')}`);
      const csp = response.headers.get('content-security-policy');
      assert.match(csp, /default-src 'none'/, file);
      assert.match(csp, /script-src 'self'(;|$)/, file);
      assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/, file);
      assert.equal(response.headers.get('x-content-type-options'), 'nosniff');
    }
    const html = await (await fetch(server.url)).text();
    assert.doesNotMatch(html, /<script(?![^>]*\bsrc=)[^>]*>/, 'the page has no inline script');
    assert.doesNotMatch(html, /\son[a-z]+=/, 'the page has no inline event handler');
    assert.equal((await fetch(`${server.url}/v1/models`)).status, 401);
    assert.equal((await fetch(`${server.url}/v1/chat/completions`, { method: 'POST', body: '{}' })).status, 401);
    assert.equal((await fetch(`${server.url}/nope`)).status, 401, 'other paths stay behind the key');
    const models = await (await fetch(`${server.url}/v1/models`, { headers: { Authorization: `Bearer ${API_KEY}` } })).json();
    assert.equal(models.data[0].max_model_len, 1024);
  });

  describe('a conversation', () => {
    let page;
    let record;

    before(async () => {
      ({ page, record } = await openPage(browser, server.url));
    });

    after(async () => {
      if (page) await page.close();
    });

    test('asks for the key, then shows the model and its context size', async () => {
      await page.locator('#model-name', { hasText: 'API key needed' }).waitFor();
      await setSetting(page, '#api-key', API_KEY);
      await page.locator('#model-name', { hasText: 'tiny-qwen2' }).waitFor();
      assert.equal(await page.textContent('#model-context'), 'context 1,024 tokens');
      assert.equal(await page.evaluate(() => localStorage.getItem('kiln.apiKey')), API_KEY);
    });

    test('streams a reply with the system prompt and sampling settings, and shows the token speed', async () => {
      await setSetting(page, '#system-prompt', 'You answer in one short line.');
      await setSetting(page, '#temperature', '0.3');
      await setSetting(page, '#top-p', '0.9');
      await setSetting(page, '#max-tokens', '24');
      await setSetting(page, '#seed', '7');
      await watchContentUpdates(page);
      const reply = await sendMessage(page, 'Tell me of the king');

      const sent = record.chatRequests.at(-1);
      assert.equal(sent.headers.authorization, `Bearer ${API_KEY}`);
      assert.deepEqual(sent.body.messages, [
        { role: 'system', content: 'You answer in one short line.' },
        { role: 'user', content: 'Tell me of the king' },
      ]);
      assert.equal(sent.body.model, 'tiny-qwen2');
      assert.equal(sent.body.stream, true);
      assert.deepEqual(sent.body.stream_options, { include_usage: true });
      assert.equal(sent.body.temperature, 0.3);
      assert.equal(sent.body.top_p, 0.9);
      assert.equal(sent.body.max_tokens, 24);
      assert.equal(sent.body.seed, 7);
      assert.equal(sent.body.response_format, undefined);

      const text = await reply.locator('.content').textContent();
      assert.ok(text.length > 0, 'the reply has text');
      assert.ok(await page.evaluate(() => window.__kilnUpdates) >= 2, 'the reply arrived in pieces');
      assert.ok(['stop', 'length'].includes(await reply.getAttribute('data-finish')));
      const meta = await reply.locator('.meta').textContent();
      assert.match(meta, /^\d+ tokens? · \d+\.\d tokens\/s · first token \d+ ms/);
      const tokens = Number(/^(\d+)/.exec(meta)[1]);
      assert.ok(tokens >= 1 && tokens <= 24, meta);
      assert.match(await page.textContent('#speed'), /^\d+\.\d tokens\/s$/);

      // The settings are kept for the next visit.
      assert.equal(await page.evaluate(() => JSON.parse(localStorage.getItem('kiln.settings')).seed), '7');
    });

    test('stops a long generation', async () => {
      // tiny-qwen2 ends its replies after a few dozen tokens, a few hundred
      // microseconds each: the request is made to ignore the end of text,
      // and the browser's downloads are slowed to a trickle (900 tokens take
      // over ten seconds to arrive), so that the reply is still coming in
      // when Stop is clicked, however loaded the machine.
      await page.route('**/v1/chat/completions', (route) => route.continue({
        postData: JSON.stringify({ ...JSON.parse(route.request().postData()), ignore_eos: true }),
      }), { times: 1 });
      const cdp = await page.context().newCDPSession(page);
      await cdp.send('Network.enable');
      await cdp.send('Network.emulateNetworkConditions',
        { offline: false, latency: 0, downloadThroughput: 16 * 1024, uploadThroughput: -1 });
      const failed = [];
      const onFailed = (request) => {
        if (request.url().endsWith('/v1/chat/completions')) failed.push(request.failure().errorText);
      };
      page.on('requestfailed', onFailed);
      await setSetting(page, '#max-tokens', '900');
      await setSetting(page, '#seed', '');
      const before = await page.locator('#messages > .message:not(.user)').count();
      await page.fill('#prompt', 'Now tell me a very long story');
      await page.click('#send');
      const streaming = page.locator('#messages > .message:not(.user)').nth(before);
      await streaming.locator('.content').filter({ hasText: /./ }).waitFor();
      assert.ok(await streaming.evaluate((node) => node.classList.contains('streaming')));
      await page.click('#stop');
      const reply = await waitForReply(page, before);
      await cdp.send('Network.emulateNetworkConditions', { offline: false, latency: 0, downloadThroughput: -1, uploadThroughput: -1 });
      await cdp.detach();
      assert.equal(await reply.getAttribute('data-finish'), 'stopped');
      const meta = await reply.locator('.meta').textContent();
      assert.match(meta, /· stopped$/);
      const tokens = Number(/^(\d+)/.exec(meta)[1]);
      assert.ok(tokens >= 1 && tokens < 900, `stopped after ${tokens} tokens`);
      assert.ok(await page.isVisible('#send'), 'the send button is back');
      assert.ok(await page.isHidden('#stop'));
      assert.ok((await reply.locator('.content').textContent()).length > 0, 'the text so far stays');
      // The browser cut the request (the server aborts a request whose
      // client is gone: tests/server/test_disconnect.py).
      page.off('requestfailed', onFailed);
      assert.deepEqual(failed, ['net::ERR_ABORTED']);
      assert.equal(record.chatRequests.at(-1).body.seed, undefined, 'an empty seed is not sent');
    });

    test('regenerates the last reply from the same conversation', async () => {
      await setSetting(page, '#max-tokens', '16');
      const repliesBefore = await page.locator('.message.assistant').count();
      const asked = record.chatRequests.at(-1).body.messages;
      const before = repliesBefore - 1;
      await page.click('#regenerate');
      await page.waitForFunction((n) => {
        const node = document.querySelectorAll('#messages > .message:not(.user)')[n];
        return node && !node.classList.contains('streaming') && node.dataset.finish && node.dataset.finish !== 'stopped';
      }, before, { timeout: 60000 });
      assert.equal(await page.locator('.message.assistant').count(), repliesBefore, 'the reply was replaced, not added');
      const sent = record.chatRequests.at(-1).body;
      assert.deepEqual(sent.messages, asked, 'the same conversation, without the old reply');
      assert.equal(sent.max_tokens, 16);
      assert.ok(['stop', 'length'].includes(await page.locator('.message.assistant').last().getAttribute('data-finish')));
    });

    test('JSON-schema mode sends the schema as response_format and the reply holds it', async () => {
      const schema = {
        type: 'object',
        properties: { answer: { type: 'string', maxLength: 12 }, sure: { type: 'boolean' } },
        required: ['answer', 'sure'],
        additionalProperties: false,
      };
      await page.check('#json-mode');
      await setSetting(page, '#json-schema', JSON.stringify(schema, null, 2));
      await setSetting(page, '#max-tokens', '200');
      await setSetting(page, '#seed', '11');
      const reply = await sendMessage(page, 'Answer in JSON');
      const sent = record.chatRequests.at(-1).body;
      assert.equal(sent.seed, 11);
      assert.deepEqual(sent.response_format, {
        type: 'json_schema',
        json_schema: { name: 'response', schema, strict: true },
      });
      const text = await reply.locator('.content').textContent();
      const finish = await reply.getAttribute('data-finish');
      assert.equal(finish, 'stop', `the reply ended with ${finish}: ${text}`);
      const parsed = JSON.parse(text);
      assert.deepEqual(Object.keys(parsed).sort(), ['answer', 'sure']);
      assert.equal(typeof parsed.answer, 'string');
      assert.ok(parsed.answer.length <= 12, parsed.answer);
      assert.equal(typeof parsed.sure, 'boolean');
      assert.match(await reply.locator('.meta').textContent(), /· valid JSON$/);
    });

    test('keeps a screenshot and ran no faulty script', async () => {
      fs.mkdirSync(artifacts, { recursive: true });
      await page.screenshot({ path: path.join(artifacts, 'chat.png') });
      assert.deepEqual(record.problems, []);
    });

    test('an unreadable schema is named, and nothing is sent', async () => {
      const sentBefore = record.chatRequests.length;
      const messagesBefore = await page.locator('#messages > .message').count();
      await setSetting(page, '#json-schema', '{"type": ');
      await page.fill('#prompt', 'again');
      await page.press('#prompt', 'Enter');
      await page.locator('#settings-error', { hasText: 'JSON schema: not valid JSON' }).waitFor();
      assert.equal(record.chatRequests.length, sentBefore);
      assert.equal(await page.locator('#messages > .message').count(), messagesBefore);
      assert.equal(await page.inputValue('#prompt'), 'again', 'the message is kept to send again');
      await setSetting(page, '#max-tokens', '1.5');
      await page.click('#regenerate');
      await page.locator('#settings-error', { hasText: 'max_tokens: "1.5" is not an integer' }).waitFor();
      assert.equal(record.chatRequests.length, sentBefore);
      assert.deepEqual(record.problems, []);
    });
  });

  test('model output, the model name and settings full of markup stay text, and no script runs', async () => {
    const context = await browser.newContext({ viewport: { width: 1100, height: 700 } });
    const page = await context.newPage();
    const problems = [];
    page.on('pageerror', (error) => problems.push(error.message));
    await context.addInitScript((key) => localStorage.setItem('kiln.apiKey', key), API_KEY);
    // The first answer lacks the context size, as while the model loads.
    let modelAnswers = 0;
    await page.route('**/v1/models', (route) => {
      const model = { id: HOSTILE, object: 'model' };
      if (modelAnswers++ > 0) model.max_model_len = 64;
      return route.fulfill({ status: 200, contentType: 'application/json', body: JSON.stringify({ object: 'list', data: [model] }) });
    });
    // The reply streams the markup in pieces, as a model would write it.
    const pieces = HOSTILE.match(/.{1,7}/gs);
    const events = pieces.map((piece, i) => ({
      id: 'chatcmpl-x', object: 'chat.completion.chunk', created: 0, model: 'm',
      choices: [{ index: 0, delta: i === 0 ? { role: 'assistant', content: piece } : { content: piece }, finish_reason: null }],
    }));
    events.push({ id: 'chatcmpl-x', object: 'chat.completion.chunk', created: 0, model: 'm',
      choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] });
    events.push({ id: 'chatcmpl-x', object: 'chat.completion.chunk', created: 0, model: 'm', choices: [],
      usage: { prompt_tokens: 3, completion_tokens: pieces.length, total_tokens: 3 + pieces.length } });
    const sse = events.map((e) => `data: ${JSON.stringify(e)}\n\n`).join('') + 'data: [DONE]\n\n';
    await page.route('**/v1/chat/completions', (route) => route.fulfill({ status: 200, contentType: 'text/event-stream', body: sse }));
    await page.goto(server.url);

    await page.locator('#model-name', { hasText: 'img' }).waitFor();
    await page.locator('#model-context', { hasText: 'context 64 tokens' }).waitFor({ timeout: 10000 });
    await setSetting(page, '#system-prompt', HOSTILE);
    const reply = await sendMessage(page, HOSTILE);
    assert.equal(await reply.getAttribute('data-finish'), 'stop');
    assert.equal(await reply.locator('.content').textContent(), HOSTILE);
    assert.equal(await page.locator('.message.user .content').textContent(), HOSTILE);
    assert.equal(await page.textContent('#model-name'), HOSTILE);
    assert.equal(await reply.locator('.role').textContent(), HOSTILE);
    await page.hover('.message.assistant .content');
    assert.equal(await page.locator('body img:not(.brand img), #messages script, #messages b, .topbar b').count(), 0,
      'no element was made from the text');
    assert.equal(await page.evaluate(() => window.__kilnInjected), undefined, 'no injected script ran');
    assert.deepEqual(problems, []);
    await context.close();
  });
});
