/* sample.h — inside loom: the penalty stage of the sampler chain (include/loom.h, "Text: sampler chain"), exposed
 * for its unit test. */
#ifndef LOOM_SAMPLE_H
#define LOOM_SAMPLE_H

#include "loom.h"

/* The penalty stage on one logit whose token occurs count (>= 1) times in the window (llama.cpp
 * src/llama-sampler.cpp, penalties): logit / repeat if logit > 0 else logit * repeat, then minus
 * count * frequency + presence. Returns logit unchanged when count is 0 or the window is 0. */
float loom_sampler_penalize(const struct loom_sampler_params *p, float logit, int count);

#endif
