#!/usr/bin/env bash
# `make run`: serves a model with `kiln serve` on 127.0.0.1 and, once /health
# says it is loaded, prints a curl command that asks it something. Ctrl-C
# stops the server gracefully.
# Usage: scripts/serve-demo.sh [BUILD_DIR] [MODEL] [PORT]
set -euo pipefail
cd "$(dirname "$0")/.."

build=${1:-build}
model=${2:-../shared/models/tiny-qwen2}
port=${3:-8000}
host=127.0.0.1
url="http://$host:$port"

"$build/bin/kiln" serve -m "$model" --host "$host" --port "$port" &
server=$!
# Ctrl-C reaches the server too (same process group); either way it stops
# gracefully, and this script waits for it.
trap 'kill -TERM "$server" 2>/dev/null || true' INT TERM

until curl -fs "$url/health" >/dev/null 2>&1; do
  if ! kill -0 "$server" 2>/dev/null; then
    wait "$server"
    exit $?
  fi
  sleep 0.2
done

name=$(curl -fs "$url/v1/models" | sed -n 's/.*"id":"\([^"]*\)".*/\1/p')
cat <<MESSAGE

kiln is serving "$name" at $url/v1 (OpenAI API). Ask it something:

  curl $url/v1/chat/completions -H 'Content-Type: application/json' \\
    -d '{"model": "$name", "messages": [{"role": "user", "content": "Tell me a story."}], "max_tokens": 64}'

Streaming: add "stream": true. Metrics: curl $url/metrics. Ctrl-C stops the server.

MESSAGE

set +e
wait "$server"
status=$?
# A signal may end the first wait before the server has finished stopping.
while kill -0 "$server" 2>/dev/null; do
  wait "$server"
  status=$?
done
exit $status
