/* sample.h — choosing the next token from a logits row: the sampler chain (logit bias, repetition / presence /
 * frequency penalties over a window of accepted tokens, top-k, top-p, min-p, temperature, a seeded draw; greedy
 * when the temperature is 0). Only sampleable rows (inside the vocabulary, not UNUSED) are ever candidates. */
#ifndef LOOM_SAMPLE_H
#define LOOM_SAMPLE_H

#include <stdint.h>

/* Added to one row's logit before every other stage; -INFINITY bans the token. */
struct loom_logit_bias {
    int32_t id;
    float bias;
};

/* The stages run in llama.cpp's default order (common/common.h, common_params_sampling::samplers): logit bias,
 * penalties, top-k, top-p, min-p, temperature, draw. Zero-initialised fields beyond seed switch their stage off,
 * so `{temp, top_k, top_p, seed}` still describes the plain chain. */
struct loom_sampler_params {
    float temp;   /* <= 0: greedy (argmax of the biased, penalized logits) */
    int top_k;    /* 0: no limit */
    float top_p;  /* in [0, 1]; 1: no limit; 0: the argmax only */
    uint64_t seed;
    float min_p;             /* in [0, 1]; keep logits >= max + ln(min_p); 0: off */
    float repeat_penalty;    /* divides positive, multiplies non-positive logits of tokens in the window; 0, 1: off */
    int repeat_last_n;       /* the penalty window: the last N accepted tokens; 0: penalties off */
    float presence_penalty;  /* subtracted once from a logit whose token is in the window */
    float frequency_penalty; /* subtracted once per occurrence in the window */
    const struct loom_logit_bias *bias; /* [n_bias], copied by loom_sampler_new; ids repeat: biases add up */
    int n_bias;
};

struct loom_sampler;

/* n_rows: logits width; sampleable[n_rows]: 1 where a row may be chosen (must outlive the sampler).
 * Allocates its scratch once here; loom_sampler_sample and loom_sampler_accept never allocate. NULL on
 * allocation failure or an invalid parameter (a range above, a bias id outside [0, n_rows), a NaN, a bias of
 * +INFINITY, a window over 2^20). */
struct loom_sampler *loom_sampler_new(const struct loom_sampler_params *p, int n_rows, const uint8_t *sampleable);
void loom_sampler_free(struct loom_sampler *s);
/* Pick a token from logits[n_rows] (left unchanged); returns its id, or -1 when no row is sampleable. If every
 * sampleable logit is infinite or NaN after the bias and penalties, the greedy choice is returned. */
int32_t loom_sampler_sample(struct loom_sampler *s, const float *logits);
/* Tell the sampler that token was accepted (generated, or a prompt token): it enters the penalty window and the
 * oldest token leaves once the window holds repeat_last_n. Ids outside [0, n_rows) are ignored. */
void loom_sampler_accept(struct loom_sampler *s, int32_t token);
/* Empty the penalty window (a new conversation). The generator's state is kept. */
void loom_sampler_reset(struct loom_sampler *s);

/* The penalty stage on one logit whose token occurs count (>= 1) times in the window (llama.cpp
 * src/llama-sampler.cpp, penalties): logit / repeat if logit > 0 else logit * repeat, then minus
 * count * frequency + presence. Returns logit unchanged when count is 0 or the window is 0. */
float loom_sampler_penalize(const struct loom_sampler_params *p, float logit, int count);

#endif
