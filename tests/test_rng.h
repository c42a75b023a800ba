/* test_rng.h — the tests' deterministic random numbers: one xorshift64 generator per test binary, seeded
 * with TEST_RNG_SEED (define it before including this header for a sequence of the test's own). */
#ifndef LOOM_TEST_RNG_H
#define LOOM_TEST_RNG_H

#include <stdint.h>

#ifndef TEST_RNG_SEED
#define TEST_RNG_SEED 0x9e3779b97f4a7c15ull
#endif

static uint64_t rng_state = TEST_RNG_SEED;

/* The next 64-bit state of the generator (xorshift64, shifts 13, 7, 17). */
static inline uint64_t rnd_next(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* 32 random bits (state bits 16..47). */
static inline uint32_t rnd_u32(void) { return (uint32_t)(rnd_next() >> 16); }

/* Uniform in [-1, 1), on a grid of 2^-31. */
static inline float rnd_f(void) { return (float)rnd_u32() / 2147483648.0f - 1.0f; }

#endif
