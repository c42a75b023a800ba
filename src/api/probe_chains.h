/* probe_chains.h — the body of a chain probe (probe.h), written once and instantiated per instruction set and
 * operation: LOOM_PROBE_CHAINS independent accumulators, each stepped iters times, then combined and reduced to
 * a scalar. Twelve named accumulators, not an array (which the compiler would keep in memory), each starting
 * from a distinct value (equal chains the compiler would merge). Define before including, all undefined after:
 *   CHAINS_FN         the function's name          CHAINS_RESULT   its result type
 *   CHAINS_VEC        the vector type              CHAINS_INIT(k)  accumulator k's starting vector (k = 0..11)
 *   CHAINS_STEP(a)    one step of a chain          CHAINS_COMBINE(a, b)  two accumulators into one
 *   CHAINS_REDUCE(v)  the last vector to the result */
CHAINS_RESULT CHAINS_FN(int64_t iters)
{
    CHAINS_VEC a0 = CHAINS_INIT(0), a1 = CHAINS_INIT(1), a2 = CHAINS_INIT(2), a3 = CHAINS_INIT(3);
    CHAINS_VEC a4 = CHAINS_INIT(4), a5 = CHAINS_INIT(5), a6 = CHAINS_INIT(6), a7 = CHAINS_INIT(7);
    CHAINS_VEC a8 = CHAINS_INIT(8), a9 = CHAINS_INIT(9), a10 = CHAINS_INIT(10), a11 = CHAINS_INIT(11);
    for (int64_t it = 0; it < iters; it++) {
        a0 = CHAINS_STEP(a0), a1 = CHAINS_STEP(a1), a2 = CHAINS_STEP(a2), a3 = CHAINS_STEP(a3);
        a4 = CHAINS_STEP(a4), a5 = CHAINS_STEP(a5), a6 = CHAINS_STEP(a6), a7 = CHAINS_STEP(a7);
        a8 = CHAINS_STEP(a8), a9 = CHAINS_STEP(a9), a10 = CHAINS_STEP(a10), a11 = CHAINS_STEP(a11);
    }
    a0 = CHAINS_COMBINE(CHAINS_COMBINE(a0, a1), CHAINS_COMBINE(a2, a3));
    a4 = CHAINS_COMBINE(CHAINS_COMBINE(a4, a5), CHAINS_COMBINE(a6, a7));
    a8 = CHAINS_COMBINE(CHAINS_COMBINE(a8, a9), CHAINS_COMBINE(a10, a11));
    return CHAINS_REDUCE(CHAINS_COMBINE(CHAINS_COMBINE(a0, a4), a8));
}

#undef CHAINS_FN
#undef CHAINS_RESULT
#undef CHAINS_VEC
#undef CHAINS_INIT
#undef CHAINS_STEP
#undef CHAINS_COMBINE
#undef CHAINS_REDUCE
