// Runs `kiln serve` for the OpenAI client tests: on a free loopback port, on
// tiny-qwen2, ready once /health says so, stopped with SIGTERM. The binary is
// $KILN_BIN (else build/bin/kiln) and the model $KILN_SHARED_DIR/models/tiny-qwen2
// (else ../shared beside the repository).
'use strict';

const { spawn } = require('node:child_process');
const path = require('node:path');

const repo = path.resolve(__dirname, '..', '..');
const shared = process.env.KILN_SHARED_DIR || path.join(path.dirname(repo), 'shared');
const kiln = process.env.KILN_BIN || path.join(repo, 'build', 'bin', 'kiln');
const tinyQwen2 = path.join(shared, 'models', 'tiny-qwen2');

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// Starts a server and resolves once it is ready: { url, port, log(), stop() }.
// stop() sends SIGTERM and resolves with the exit code.
async function startServer(extraArgs = []) {
  const args = ['serve', '-m', tinyQwen2, '--host', '127.0.0.1', '--port', '0', '--threads', '2', ...extraArgs];
  const child = spawn(kiln, args, { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, OMP_WAIT_POLICY: 'PASSIVE' } });
  let log = '';
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve(code === null ? signal : code)));
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`kiln serve did not start listening:\n${log}`)), 120000);
    child.stderr.on('data', (data) => {
      log += data.toString();
      const match = /listening on http:\/\/[^:]+:(\d+)/.exec(log);
      if (match) {
        clearTimeout(timer);
        resolve(Number(match[1]));
      }
    });
    child.on('exit', () => reject(new Error(`kiln serve exited:\n${log}`)));
  });
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 120000;
  for (;;) {
    try {
      const response = await fetch(`${url}/health`);
      if (response.status === 200) break;
    } catch (e) {
      // not accepting yet
    }
    if (Date.now() > deadline) throw new Error(`kiln serve was not ready:\n${log}`);
    await sleep(50);
  }
  return {
    url,
    port,
    log: () => log,
    async stop() {
      child.kill('SIGTERM');
      return exited;
    },
  };
}

module.exports = { startServer };
