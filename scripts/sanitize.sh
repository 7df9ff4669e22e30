#!/usr/bin/env bash
# Sanitizer builds of the targets that need them; filled in as they arrive.
set -euo pipefail
echo "sanitize: nothing yet"
