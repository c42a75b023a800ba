/* sample.h — choosing the next token from a logits row: greedy, or temperature + top-k + top-p with a
 * seeded generator. Only sampleable rows (inside the vocabulary, not UNUSED) are ever candidates. */
#ifndef LOOM_SAMPLE_H
#define LOOM_SAMPLE_H

#include <stdint.h>

struct loom_sampler_params {
    float temp;   /* <= 0: greedy */
    int top_k;    /* 0: no limit */
    float top_p;  /* 1: no limit */
    uint64_t seed;
};

struct loom_sampler;

/* n_rows: logits width; sampleable[n_rows]: 1 where a row may be chosen (must outlive the sampler).
 * Allocates its scratch once here; loom_sampler_sample never allocates. NULL on allocation failure. */
struct loom_sampler *loom_sampler_new(const struct loom_sampler_params *p, int n_rows, const uint8_t *sampleable);
void loom_sampler_free(struct loom_sampler *s);
/* Pick a token from logits[n_rows]; returns its id, or -1 when no row is sampleable. */
int32_t loom_sampler_sample(struct loom_sampler *s, const float *logits);

#endif
