/* default_model.h — the model `loom run` uses when no -m is given: a synthetic Qwen3.5-0.8B-geometry
 * model quantized to Q4_K_M, prepared once into $LOOM_CACHE/models and reused. */
#ifndef LOOM_CLI_DEFAULT_MODEL_H
#define LOOM_CLI_DEFAULT_MODEL_H

#include <stddef.h>

#include "loom.h"

/* Write into path[cap] the cached default model $LOOM_CACHE/models/qwen35-0.8b-synth-Q4_K_M.gguf
 * (LOOM_CACHE defaults to ~/.cache/loom). When missing, prepare it in a child process: synthesize the 0.8b
 * preset in F16 to a temporary file, quantize it with loom's quantizer, and rename the result into place;
 * progress goes to stderr. Returns LOOM_OK, LOOM_E_RANGE when cap is too small, LOOM_E_IO when a step fails
 * (the message names it), LOOM_E_CANCELLED when a signal (loom_cli_signals_install) stopped the preparation
 * (its temporary files removed). */
int loom_cli_default_model(char *path, size_t cap, loom_error *err);

/* Write into path[cap] the default vocabulary for synthetic models:
 * $LOOM_REF/src/models/ggml-vocab-qwen35.gguf (LOOM_REF defaults to ~/.cache/loom/ref).
 * Returns LOOM_OK or LOOM_E_RANGE when cap is too small. */
int loom_cli_default_vocab(char *path, size_t cap, loom_error *err);

#endif
