// kiln's chat page: talks to the server it came from through the OpenAI API
// (/v1/models, /v1/chat/completions streamed as server-sent events).
// Everything the model writes, and every setting, reaches the page as text
// (textContent), never as markup; the server's Content-Security-Policy
// allows no inline script besides.
'use strict';

(() => {
  const $ = (id) => document.getElementById(id);
  const ui = {
    modelName: $('model-name'),
    modelContext: $('model-context'),
    speed: $('speed'),
    toggleSettings: $('toggle-settings'),
    settings: $('settings'),
    messages: $('messages'),
    emptyHint: $('empty-hint'),
    composer: $('composer'),
    prompt: $('prompt'),
    status: $('status'),
    newChat: $('new-chat'),
    regenerate: $('regenerate'),
    stop: $('stop'),
    send: $('send'),
    apiKey: $('api-key'),
    systemPrompt: $('system-prompt'),
    temperature: $('temperature'),
    topP: $('top-p'),
    maxTokens: $('max-tokens'),
    seed: $('seed'),
    jsonMode: $('json-mode'),
    jsonSchemaField: $('json-schema-field'),
    jsonSchema: $('json-schema'),
    settingsError: $('settings-error'),
  };

  const DEFAULT_SCHEMA = JSON.stringify({
    type: 'object',
    properties: {
      answer: { type: 'string' },
      confidence: { type: 'number', minimum: 0, maximum: 1 },
    },
    required: ['answer', 'confidence'],
    additionalProperties: false,
  }, null, 2);

  // ---- storage: the key and the settings survive a reload ----------------

  const KEY_STORAGE = 'kiln.apiKey';
  const SETTINGS_STORAGE = 'kiln.settings';
  const SETTING_FIELDS = ['systemPrompt', 'temperature', 'topP', 'maxTokens', 'seed', 'jsonSchema'];

  // localStorage throws where storage is disabled; the page still works.
  function load(name) {
    try { return window.localStorage.getItem(name); } catch (e) { return null; }
  }
  function save(name, value) {
    try { window.localStorage.setItem(name, value); } catch (e) { /* not kept */ }
  }

  function restoreSettings() {
    ui.apiKey.value = load(KEY_STORAGE) || '';
    ui.jsonSchema.value = DEFAULT_SCHEMA;
    let saved = null;
    try { saved = JSON.parse(load(SETTINGS_STORAGE) || 'null'); } catch (e) { saved = null; }
    if (saved && typeof saved === 'object') {
      for (const field of SETTING_FIELDS) {
        if (typeof saved[field] === 'string') ui[field].value = saved[field];
      }
      ui.jsonMode.checked = saved.jsonMode === true;
    }
    showSchemaField();
  }

  function saveSettings() {
    const settings = { jsonMode: ui.jsonMode.checked };
    for (const field of SETTING_FIELDS) settings[field] = ui[field].value;
    save(SETTINGS_STORAGE, JSON.stringify(settings));
  }

  function showSchemaField() {
    ui.jsonSchemaField.hidden = !ui.jsonMode.checked;
  }

  function authHeaders() {
    const key = ui.apiKey.value.trim();
    return key ? { Authorization: `Bearer ${key}` } : {};
  }

  // ---- the model: name and context size from /v1/models ------------------

  let modelId = null;
  // While the server still loads the model, /v1/models names it without its
  // context size: asked again a few times.
  let contextRetries = 30;

  async function loadModel() {
    if (modelId === null) ui.modelName.textContent = 'connecting…';
    try {
      const response = await fetch('/v1/models', { headers: authHeaders() });
      if (!response.ok) {
        modelId = null;
        ui.modelContext.textContent = '';
        ui.modelName.textContent = response.status === 401 ? 'API key needed' : `no model (HTTP ${response.status})`;
        if (response.status === 401) setStatus('Enter the API key in the settings.', 'error');
        return;
      }
      const body = await response.json();
      const model = body && Array.isArray(body.data) ? body.data[0] : null;
      if (!model || typeof model.id !== 'string') {
        modelId = null;
        ui.modelContext.textContent = '';
        ui.modelName.textContent = 'no model';
        return;
      }
      modelId = model.id;
      ui.modelName.textContent = model.id;
      ui.modelName.title = model.id;
      const context = model.max_model_len;
      ui.modelContext.textContent = Number.isFinite(context) ? `context ${context.toLocaleString('en-US')} tokens` : '';
      if (!Number.isFinite(context) && contextRetries > 0) {
        contextRetries -= 1;
        setTimeout(loadModel, 2000);
      }
      if (ui.status.dataset.kind === 'error') setStatus('');
    } catch (e) {
      modelId = null;
      ui.modelContext.textContent = '';
      ui.modelName.textContent = 'server unreachable';
    }
  }

  // ---- the conversation ---------------------------------------------------

  // [{role, content, node}] in order; node is the message's element.
  const history = [];
  let generation = null;  // {controller, entry} while a reply streams

  function setStatus(text, kind) {
    ui.status.textContent = text;
    ui.status.dataset.kind = kind || '';
  }

  function nearBottom() {
    const m = ui.messages;
    return m.scrollHeight - m.scrollTop - m.clientHeight < 80;
  }

  function scrollToEnd() {
    ui.messages.scrollTop = ui.messages.scrollHeight;
  }

  // A message element: role label, text, a line of facts below.
  function addMessageNode(role, label) {
    ui.emptyHint.hidden = true;
    const node = document.createElement('article');
    node.className = `message ${role}`;
    const head = document.createElement('div');
    head.className = 'role';
    head.textContent = label;
    const reasoning = document.createElement('div');
    reasoning.className = 'reasoning';
    reasoning.hidden = true;
    const content = document.createElement('div');
    content.className = 'content';
    const meta = document.createElement('div');
    meta.className = 'meta';
    node.append(head, reasoning, content, meta);
    ui.messages.append(node);
    scrollToEnd();
    return node;
  }

  function part(node, name) {
    return node.querySelector(`.${name}`);
  }

  function addUserMessage(text) {
    const node = addMessageNode('user', 'You');
    part(node, 'content').textContent = text;
    history.push({ role: 'user', content: text, node });
  }

  function updateButtons() {
    const busy = generation !== null;
    ui.send.disabled = busy;
    ui.stop.hidden = !busy;
    ui.send.hidden = busy;
    ui.regenerate.disabled = busy || history.length === 0;
    ui.newChat.disabled = busy || history.length === 0;
  }

  // The request's sampling settings and response format; throws an Error
  // naming the setting that is not valid.
  function requestOptions() {
    const options = {};
    const number = (input, name, integer) => {
      const text = input.value.trim();
      if (text === '') return;
      const value = Number(text);
      if (!Number.isFinite(value) || (integer && !Number.isInteger(value))) {
        throw new Error(`${name}: "${text}" is not ${integer ? 'an integer' : 'a number'}`);
      }
      options[name] = value;
    };
    number(ui.temperature, 'temperature', false);
    number(ui.topP, 'top_p', false);
    number(ui.maxTokens, 'max_tokens', true);
    number(ui.seed, 'seed', true);
    if (ui.jsonMode.checked) {
      let schema;
      try {
        schema = JSON.parse(ui.jsonSchema.value);
      } catch (e) {
        throw new Error(`JSON schema: not valid JSON (${e.message})`);
      }
      if (schema === null || typeof schema !== 'object' || Array.isArray(schema)) {
        throw new Error('JSON schema: must be a JSON object');
      }
      options.response_format = { type: 'json_schema', json_schema: { name: 'response', schema, strict: true } };
    }
    return options;
  }

  function conversation() {
    const messages = [];
    const system = ui.systemPrompt.value;
    if (system.trim() !== '') messages.push({ role: 'system', content: system });
    for (const entry of history) {
      if (entry.role === 'user' || entry.role === 'assistant') messages.push({ role: entry.role, content: entry.content });
    }
    return messages;
  }

  // Splits a server-sent event stream into the data of each event.
  class SseReader {
    constructor() { this.buffer = ''; }
    // Returns the data of the events completed by `text`.
    push(text) {
      this.buffer += text.replace(/\r\n?/g, '\n');
      const events = [];
      let end;
      while ((end = this.buffer.indexOf('\n\n')) >= 0) {
        const block = this.buffer.slice(0, end);
        this.buffer = this.buffer.slice(end + 2);
        const data = block.split('\n').filter((line) => line.startsWith('data:'))
          .map((line) => line.slice(line.startsWith('data: ') ? 6 : 5)).join('\n');
        if (data !== '') events.push(data);
      }
      return events;
    }
  }

  function formatSpeed(stats) {
    const parts = [`${stats.tokens} token${stats.tokens === 1 ? '' : 's'}`];
    if (stats.tokensPerSecond !== null) parts.push(`${stats.tokensPerSecond.toFixed(1)} tokens/s`);
    if (stats.firstTokenMs !== null) parts.push(`first token ${Math.round(stats.firstTokenMs)} ms`);
    return parts.join(' · ');
  }

  // Decode speed: the tokens after the first over the time they took (the
  // first token's wait is the prompt's, shown apart); with one token, over
  // the whole request.
  function speedOf(tokens, start, first, last) {
    if (tokens <= 0 || first === null) return null;
    if (tokens > 1 && last > first) return (tokens - 1) * 1000 / (last - first);
    return last > start ? tokens * 1000 / (last - start) : null;
  }

  // The request options, or null after naming the setting that is wrong.
  function checkedOptions() {
    ui.settingsError.textContent = '';
    try {
      return requestOptions();
    } catch (e) {
      ui.settingsError.textContent = e.message;
      ui.settings.hidden = false;
      ui.toggleSettings.setAttribute('aria-expanded', 'true');
      return null;
    }
  }

  async function generate(options) {
    saveSettings();
    const body = {
      messages: conversation(),
      stream: true,
      stream_options: { include_usage: true },
      ...options,
    };
    if (modelId !== null) body.model = modelId;

    const node = addMessageNode('assistant', modelId || 'assistant');
    node.classList.add('streaming');
    const entry = { role: 'assistant', content: '', node };
    history.push(entry);
    const controller = new AbortController();
    generation = { controller, entry };
    updateButtons();
    setStatus('generating…');

    const content = part(node, 'content');
    const reasoning = part(node, 'reasoning');
    const meta = part(node, 'meta');
    const start = performance.now();
    let first = null;
    let last = start;
    let chunks = 0;
    let usageTokens = null;
    let finishReason = null;
    let ending = null;  // why the reply ended, when not by the model

    const showStats = () => {
      const tokens = usageTokens !== null ? usageTokens : chunks;
      const stats = {
        tokens,
        tokensPerSecond: speedOf(tokens, start, first, last),
        firstTokenMs: first === null ? null : first - start,
      };
      const text = formatSpeed(stats);
      ui.speed.textContent = stats.tokensPerSecond === null ? '' : `${stats.tokensPerSecond.toFixed(1)} tokens/s`;
      return text;
    };

    try {
      const response = await fetch('/v1/chat/completions', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', ...authHeaders() },
        body: JSON.stringify(body),
        signal: controller.signal,
      });
      if (!response.ok) throw new Error(await errorMessage(response));
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      const sse = new SseReader();
      let done = false;
      while (!done) {
        const { value, done: streamDone } = await reader.read();
        if (streamDone) break;
        for (const data of sse.push(decoder.decode(value, { stream: true }))) {
          if (data === '[DONE]') { done = true; break; }
          let chunk;
          try { chunk = JSON.parse(data); } catch (e) { throw new Error(`the server sent an event that is not JSON: ${data.slice(0, 200)}`); }
          if (chunk.error) throw new Error(chunk.error.message || 'the server reported an error');
          if (chunk.usage && Number.isFinite(chunk.usage.completion_tokens)) usageTokens = chunk.usage.completion_tokens;
          const choice = Array.isArray(chunk.choices) ? chunk.choices[0] : null;
          if (!choice) continue;
          const delta = choice.delta || {};
          const wasNearBottom = nearBottom();
          if (typeof delta.reasoning_content === 'string' && delta.reasoning_content !== '') {
            reasoning.hidden = false;
            reasoning.textContent += delta.reasoning_content;
          }
          if (typeof delta.content === 'string' && delta.content !== '') {
            entry.content += delta.content;
            content.textContent = entry.content;
          }
          if (delta.content || delta.reasoning_content) {
            const now = performance.now();
            if (first === null) first = now;
            last = now;
            chunks += 1;
          }
          if (choice.finish_reason) finishReason = choice.finish_reason;
          meta.textContent = showStats();
          if (wasNearBottom) scrollToEnd();
        }
      }
      if (!done && finishReason === null) ending = 'the stream ended early';
    } catch (e) {
      if (e.name === 'AbortError') {
        ending = 'stopped';
      } else {
        node.classList.add('failed');
        ending = e.message;
      }
    } finally {
      node.classList.remove('streaming');
      generation = null;
    }

    const facts = chunks > 0 || usageTokens !== null ? [showStats()] : [];
    if (finishReason) facts.push(`finish: ${finishReason}`);
    if (ending) facts.push(ending);
    if (ui.jsonMode.checked && ending === null) facts.push(isJson(entry.content) ? 'valid JSON' : 'not valid JSON');
    meta.textContent = facts.join(' · ');
    node.dataset.finish = ending === 'stopped' ? 'stopped' : (finishReason || 'error');
    if (node.classList.contains('failed') && entry.content === '') {
      // Nothing came back: the entry is an error, not part of the conversation.
      entry.role = 'error';
      part(node, 'role').textContent = 'error';
      node.classList.add('error');
    }
    setStatus('');
    updateButtons();
    ui.prompt.focus();
  }

  function isJson(text) {
    try { JSON.parse(text); return true; } catch (e) { return false; }
  }

  // The message of an OpenAI error body, else the status.
  async function errorMessage(response) {
    let text = '';
    try { text = await response.text(); } catch (e) { text = ''; }
    try {
      const body = JSON.parse(text);
      if (body && body.error && typeof body.error.message === 'string') {
        const hint = response.status === 401 ? ' (set the API key in the settings)' : '';
        return `HTTP ${response.status}: ${body.error.message}${hint}`;
      }
    } catch (e) { /* not JSON */ }
    return `HTTP ${response.status}${text ? `: ${text.slice(0, 300)}` : ''}`;
  }

  function send() {
    if (generation !== null) return;
    const text = ui.prompt.value;
    if (text.trim() === '') return;
    const options = checkedOptions();
    if (options === null) return;
    ui.prompt.value = '';
    addUserMessage(text);
    generate(options);
  }

  // Drops the last reply (or error) and asks again.
  function regenerate() {
    if (generation !== null || history.length === 0) return;
    const options = checkedOptions();
    if (options === null) return;
    while (history.length > 0 && history[history.length - 1].role !== 'user') {
      history.pop().node.remove();
    }
    generate(options);
  }

  function newChat() {
    if (generation !== null) return;
    for (const entry of history) entry.node.remove();
    history.length = 0;
    ui.emptyHint.hidden = false;
    ui.speed.textContent = '';
    setStatus('');
    updateButtons();
  }

  // ---- wiring -------------------------------------------------------------

  ui.composer.addEventListener('submit', (event) => { event.preventDefault(); send(); });
  ui.prompt.addEventListener('keydown', (event) => {
    if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      send();
    }
  });
  ui.stop.addEventListener('click', () => { if (generation) generation.controller.abort(); });
  ui.regenerate.addEventListener('click', regenerate);
  ui.newChat.addEventListener('click', newChat);
  ui.toggleSettings.addEventListener('click', () => {
    ui.settings.hidden = !ui.settings.hidden;
    ui.toggleSettings.setAttribute('aria-expanded', String(!ui.settings.hidden));
  });
  ui.apiKey.addEventListener('change', () => {
    save(KEY_STORAGE, ui.apiKey.value.trim());
    loadModel();
  });
  ui.jsonMode.addEventListener('change', () => { showSchemaField(); saveSettings(); });
  for (const field of SETTING_FIELDS) ui[field].addEventListener('change', saveSettings);

  restoreSettings();
  // On a narrow screen the settings open on demand, leaving the room to the chat.
  if (window.matchMedia('(max-width: 760px)').matches) {
    ui.settings.hidden = true;
    ui.toggleSettings.setAttribute('aria-expanded', 'false');
  }
  updateButtons();
  loadModel();
})();
