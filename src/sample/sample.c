/* sample.c — the next token from a logits row: logit bias and penalties over a window of accepted tokens,
 * then greedy argmax, or top-k, top-p, min-p, temperature and a draw from a seeded xoshiro256** generator.
 * All scratch comes from loom_sampler_new; a step never allocates and never sorts the whole vocabulary. */
#include "sample/sample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/error.h"

/* Exact top-p without top-k: histogram the candidates' log-weights into K_BUCKETS buckets, keep whole
 * buckets above the one where the cumulative mass crosses p, and refine inside that bucket; only a small
 * final set (<= K_SORT_MAX, or after K_LEVELS refinements) is ever sorted. */
#define K_BUCKETS 256
#define K_LEVELS 6
#define K_SORT_MAX 64
/* Float logits put ~1e-7 relative error on probabilities: a prefix that reaches p within this counts. */
#define K_TOP_P_SLACK 1e-6
/* Longest penalty window accepted (llama.cpp's default is 64). */
#define K_WINDOW_MAX (1 << 20)

struct cand {
    float x;  /* biased, penalized logit */
    float w;  /* exp(x - max x), or exp((x - max x) / temp) for the draw */
    int32_t id;
};

struct loom_sampler {
    struct loom_sampler_params p;
    int n_rows;
    const uint8_t *sampleable;
    struct cand *cand; /* [n_rows] */
    float *bias;       /* [n_rows], NULL without logit bias */
    int32_t *count;    /* [n_rows] occurrences in the window, NULL when penalties are off */
    int32_t *window;   /* [repeat_last_n] ring of accepted tokens */
    int n_window;      /* tokens in the ring (<= repeat_last_n) */
    int head;          /* ring slot of the oldest token */
    double bucket_mass[K_BUCKETS];
    uint64_t rng[4];
};

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

/* xoshiro256** (Blackman & Vigna, 2018). */
static uint64_t rng_next(uint64_t *s)
{
    uint64_t result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

/* Uniform in [0, 1) with 53 random bits. */
static double rng_uniform(uint64_t *s)
{
    return (double)(rng_next(s) >> 11) * 0x1.0p-53;
}

/* Check p against n_rows; LOOM_OK, or LOOM_E_ARG naming the first parameter out of range. */
static int params_check(const struct loom_sampler_params *p, int n_rows, loom_error *err)
{
    if (isnan(p->temp))
        return loom_errorf(err, LOOM_E_ARG, "sampler temp: expected a number, found NaN");
    if (p->top_k < 0)
        return loom_errorf(err, LOOM_E_ARG, "sampler top_k: expected >= 0, found %d", p->top_k);
    if (!(p->top_p >= 0 && p->top_p <= 1) || !(p->min_p >= 0 && p->min_p <= 1))
        return loom_errorf(err, LOOM_E_ARG, "sampler top_p, min_p: expected in [0, 1], found %g, %g",
                           (double)p->top_p, (double)p->min_p);
    if (!(p->repeat_penalty >= 0) || !isfinite(p->repeat_penalty) || !isfinite(p->presence_penalty) ||
        !isfinite(p->frequency_penalty))
        return loom_errorf(err, LOOM_E_ARG, "sampler penalties: expected finite, repeat_penalty >= 0, found %g, %g, %g",
                           (double)p->repeat_penalty, (double)p->presence_penalty, (double)p->frequency_penalty);
    if (p->repeat_last_n < 0 || p->repeat_last_n > K_WINDOW_MAX)
        return loom_errorf(err, LOOM_E_ARG, "sampler repeat_last_n: expected in [0, %d], found %d", K_WINDOW_MAX,
                           p->repeat_last_n);
    if (p->n_bias < 0 || (p->n_bias > 0 && !p->bias))
        return loom_errorf(err, LOOM_E_ARG, "sampler bias: expected n_bias >= 0 entries, found %d%s", p->n_bias,
                           p->bias ? "" : " and NULL");
    for (int i = 0; i < p->n_bias; i++)
        if (p->bias[i].id < 0 || p->bias[i].id >= n_rows || isnan(p->bias[i].bias) || p->bias[i].bias == INFINITY)
            return loom_errorf(err, LOOM_E_ARG,
                               "sampler bias[%d]: expected an id in [0, %d) and a bias < +inf, found %d, %g", i,
                               n_rows, (int)p->bias[i].id, (double)p->bias[i].bias);
    return LOOM_OK;
}

static int penalties_on(const struct loom_sampler_params *p)
{
    return p->repeat_last_n > 0 &&
           ((p->repeat_penalty > 0 && p->repeat_penalty != 1) || p->presence_penalty != 0 || p->frequency_penalty != 0);
}

/* Allocate s's arrays for s->p and s->n_rows (bias zeroed, penalty counts zeroed). */
static int sampler_alloc(struct loom_sampler *s)
{
    s->cand = malloc((size_t)s->n_rows * sizeof *s->cand);
    int ok = s->cand != NULL;
    if (ok && s->p.n_bias > 0)
        ok = (s->bias = calloc((size_t)s->n_rows, sizeof *s->bias)) != NULL;
    if (ok && penalties_on(&s->p)) {
        s->count = calloc((size_t)s->n_rows, sizeof *s->count);
        s->window = malloc((size_t)s->p.repeat_last_n * sizeof *s->window);
        ok = s->count && s->window;
    }
    return ok ? LOOM_OK : LOOM_E_NOMEM;
}

struct loom_sampler *loom_sampler_new(const struct loom_sampler_params *p, int n_rows, const uint8_t *sampleable,
                                      loom_error *err)
{
    if (!p || n_rows <= 0 || !sampleable) {
        loom_errorf(err, LOOM_E_ARG, "sampler: expected parameters, n_rows > 0 and a mask, found %s, %d, %s",
                    p ? "params" : "NULL", n_rows, sampleable ? "a mask" : "NULL");
        return NULL;
    }
    if (params_check(p, n_rows, err) != LOOM_OK)
        return NULL;
    struct loom_sampler *s = calloc(1, sizeof *s);
    if (s) {
        s->p = *p;
        s->p.bias = NULL; /* the caller's array need not outlive the sampler */
        s->n_rows = n_rows;
        s->sampleable = sampleable;
    }
    if (!s || sampler_alloc(s) != LOOM_OK) {
        loom_sampler_free(s);
        loom_errorf(err, LOOM_E_NOMEM, "sampler: could not allocate the scratch of %d rows", n_rows);
        return NULL;
    }
    for (int i = 0; i < p->n_bias; i++)
        s->bias[p->bias[i].id] += p->bias[i].bias;
    loom_sampler_seed(s, p->seed);
    return s;
}

struct loom_sampler *loom_sampler_clone(const struct loom_sampler *s, loom_error *err)
{
    struct loom_sampler *c = malloc(sizeof *c);
    if (c) {
        *c = *s;
        c->cand = NULL;
        c->bias = NULL;
        c->count = NULL;
        c->window = NULL;
    }
    if (!c || sampler_alloc(c) != LOOM_OK) {
        loom_sampler_free(c);
        loom_errorf(err, LOOM_E_NOMEM, "sampler: could not allocate a copy of %d rows", s->n_rows);
        return NULL;
    }
    if (s->bias)
        memcpy(c->bias, s->bias, (size_t)s->n_rows * sizeof *c->bias);
    if (s->count) {
        memcpy(c->count, s->count, (size_t)s->n_rows * sizeof *c->count);
        memcpy(c->window, s->window, (size_t)s->p.repeat_last_n * sizeof *c->window);
    }
    return c;
}

void loom_sampler_seed(struct loom_sampler *s, uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        s->rng[i] = splitmix64(&seed);
}

void loom_sampler_free(struct loom_sampler *s)
{
    if (!s)
        return;
    free(s->cand);
    free(s->bias);
    free(s->count);
    free(s->window);
    free(s);
}

void loom_sampler_accept(struct loom_sampler *s, int32_t token)
{
    if (!s->count || token < 0 || token >= s->n_rows)
        return;
    int cap = s->p.repeat_last_n;
    if (s->n_window == cap) {
        s->count[s->window[s->head]]--;
        s->window[s->head] = token;
        s->head = (s->head + 1) % cap;
    } else {
        s->window[(s->head + s->n_window++) % cap] = token;
    }
    s->count[token]++;
}

void loom_sampler_reset(struct loom_sampler *s)
{
    if (!s->count)
        return;
    for (int i = 0; i < s->n_window; i++)
        s->count[s->window[(s->head + i) % s->p.repeat_last_n]] = 0;
    s->n_window = 0;
    s->head = 0;
}

float loom_sampler_penalize(const struct loom_sampler_params *p, float logit, int count)
{
    if (count <= 0 || p->repeat_last_n <= 0)
        return logit;
    float r = p->repeat_penalty > 0 ? p->repeat_penalty : 1.0f;
    logit = logit > 0 ? logit / r : logit * r;
    return logit - ((float)count * p->frequency_penalty + p->presence_penalty);
}

/* Row i's logit after the logit bias and the penalties. */
static float sampler_logit(const struct loom_sampler *s, const float *logits, int i)
{
    float x = logits[i];
    if (s->bias)
        x += s->bias[i];
    if (s->count && s->count[i])
        x = loom_sampler_penalize(&s->p, x, s->count[i]);
    return x;
}

/* Argmax of the adjusted logits over sampleable rows; NaN never wins; ties go to the lowest id. -1 when
 * nothing is sampleable. */
static int32_t sample_greedy(const struct loom_sampler *s, const float *logits)
{
    int32_t best = -1;
    float xb = 0;
    for (int i = 0; i < s->n_rows; i++) {
        if (!s->sampleable[i])
            continue;
        float x = sampler_logit(s, logits, i);
        if (best < 0 || x > xb || (isnan(xb) && !isnan(x))) {
            best = i;
            xb = x;
        }
    }
    return best;
}

/* Candidate order: larger x first, then lower id. */
static int cand_before(const struct cand *a, const struct cand *b)
{
    return a->x > b->x || (a->x == b->x && a->id < b->id);
}

/* Heap whose root is the candidate that comes last in candidate order. */
static void heap_sift_down(struct cand *h, size_t n, size_t i)
{
    struct cand v = h[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && cand_before(&h[c], &h[c + 1]))
            c++;
        if (!cand_before(&v, &h[c]))
            break;
        h[i] = h[c];
        i = c;
    }
    h[i] = v;
}

/* Sort c[n] into candidate order in place (heapsort: no allocation, n log n). */
static void cand_sort(struct cand *c, size_t n)
{
    for (size_t i = n / 2; i-- > 0;)
        heap_sift_down(c, n, i);
    for (size_t end = n; end > 1; end--) {
        struct cand t = c[0];
        c[0] = c[end - 1];
        c[end - 1] = t;
        heap_sift_down(c, end - 1, 0);
    }
}

/* Keep the best k of c[n] (k < n) in c[0..k), sorted. A heap of the k best so far; O(n log k). */
static void cand_top_k(struct cand *c, size_t n, size_t k)
{
    for (size_t i = k / 2; i-- > 0;)
        heap_sift_down(c, k, i);
    for (size_t i = k; i < n; i++) {
        if (cand_before(&c[i], &c[0])) {
            c[0] = c[i];
            heap_sift_down(c, k, 0);
        }
    }
    cand_sort(c, k);
}

/* Draw from c[0..n) by weight; total = the sum of their weights. */
static int32_t draw(struct loom_sampler *s, const struct cand *c, size_t n, double total)
{
    double r = rng_uniform(s->rng) * total, acc = 0;
    for (size_t i = 0; i < n; i++) {
        acc += c[i].w;
        if (r < acc)
            return c[i].id;
    }
    return c[n - 1].id;
}

static int bucket_of(float d, float lo, float scale)
{
    float k = (d - lo) * scale; /* monotone in d: equal logits share a bucket, larger logits never go later */
    if (!(k < (float)(K_BUCKETS - 1)))
        return K_BUCKETS - 1; /* also NaN, from infinite spreads when temp is tiny */
    return k <= 0 ? 0 : (int)k;
}

/* One refinement: bucket c[a..b) by d = xmax - x over [lo, lo + K_BUCKETS / scale), find the bucket where
 * acc plus the cumulative mass reaches need, and partition c[a..b) into [better buckets | that bucket |
 * dropped]. Updates *acc with the better buckets' mass, a/b to the crossing bucket, lo to its start. */
static void refine(struct loom_sampler *s, size_t *a, size_t *b, float xmax, float *lo, float scale, double need,
                   double *acc)
{
    struct cand *c = s->cand;
    for (int k = 0; k < K_BUCKETS; k++)
        s->bucket_mass[k] = 0;
    for (size_t i = *a; i < *b; i++)
        s->bucket_mass[bucket_of(xmax - c[i].x, *lo, scale)] += c[i].w;
    int cross = K_BUCKETS - 1;
    double cum = *acc;
    for (int k = 0; k < K_BUCKETS; k++) {
        if (cum + s->bucket_mass[k] >= need) {
            cross = k;
            break;
        }
        cum += s->bucket_mass[k];
    }
    size_t lt = *a, i = *a, gt = *b;
    while (i < gt) {
        int k = bucket_of(xmax - c[i].x, *lo, scale);
        struct cand t = c[i];
        if (k < cross) {
            c[i++] = c[lt];
            c[lt++] = t;
        } else if (k > cross) {
            c[i] = c[--gt];
            c[gt] = t;
        } else {
            i++;
        }
    }
    for (size_t j = *a; j < lt; j++)
        *acc += c[j].w;
    *a = lt;
    *b = gt;
    *lo += (float)cross / scale;
}

/* top_p < 1, no top-k: move the nucleus (the smallest prefix of the candidate order whose mass reaches
 * top_p of the total) to c[0..keep) in some order; returns keep. Weights are exp(x - xmax). */
static size_t nucleus_select(struct loom_sampler *s, size_t n, float xmax)
{
    struct cand *c = s->cand;
    double total = 0;
    float dmax = 0;
    for (size_t i = 0; i < n; i++) {
        c[i].w = expf(c[i].x - xmax);
        total += c[i].w;
        dmax = fmaxf(dmax, xmax - c[i].x);
    }
    double need = ((double)s->p.top_p - K_TOP_P_SLACK) * total, acc = 0;
    size_t a = 0, b = n;
    float lo = 0, width = dmax > 0 ? dmax * (1 + 1e-6f) : 1;
    for (int level = 0; level < K_LEVELS && b - a > K_SORT_MAX; level++) {
        float scale = (float)K_BUCKETS / width;
        refine(s, &a, &b, xmax, &lo, scale, need, &acc);
        width /= (float)K_BUCKETS;
    }
    cand_sort(c + a, b - a);
    size_t keep = a;
    while (keep < b && (keep == 0 || acc < need))
        acc += c[keep++].w;
    return keep;
}

/* Smallest prefix of the sorted c[n] whose weights reach top_p of their total (at least one). */
static size_t top_p_prefix(const struct cand *c, size_t n, double total, float p)
{
    double need = ((double)p - K_TOP_P_SLACK) * total, acc = 0;
    size_t keep = 0;
    while (keep < n && (keep == 0 || acc < need))
        acc += c[keep++].w;
    return keep;
}

/* min-p over c[0..n) (any order): keep x >= xmax + ln(min_p), as llama.cpp's min-p does on logits. */
static size_t min_p_filter(struct cand *c, size_t n, float xmax, float min_p)
{
    float lo = xmax + logf(min_p);
    size_t keep = 0;
    for (size_t i = 0; i < n; i++)
        if (c[i].x >= lo)
            c[keep++] = c[i];
    return keep;
}

/* Temperature weights exp((x - xmax) / temp) for c[0..n); returns their sum. xmax is among them. */
static double temper(struct cand *c, size_t n, float xmax, float temp)
{
    double total = 0;
    for (size_t i = 0; i < n; i++) {
        c[i].w = expf((c[i].x - xmax) / temp);
        total += c[i].w;
    }
    return total;
}

/* Gather the sampleable rows with finite adjusted logits into s->cand; returns their count, max in *xmax. */
static size_t gather(struct loom_sampler *s, const float *logits, float *xmax)
{
    size_t n = 0;
    float m = -INFINITY;
    for (int i = 0; i < s->n_rows; i++) {
        if (!s->sampleable[i])
            continue;
        float x = sampler_logit(s, logits, i);
        if (isfinite(x)) {
            s->cand[n++] = (struct cand){x, 0, i};
            m = x > m ? x : m;
        }
    }
    *xmax = m;
    return n;
}

int32_t loom_sampler_sample(struct loom_sampler *s, const float *logits)
{
    if (!(s->p.temp > 0))
        return sample_greedy(s, logits);
    float xmax;
    size_t n = gather(s, logits, &xmax);
    if (n == 0)
        return sample_greedy(s, logits); /* every sampleable logit is infinite or NaN */
    struct cand *c = s->cand;
    int sorted = 0;
    if (s->p.top_k > 0 && (size_t)s->p.top_k < n) {
        cand_top_k(c, n, (size_t)s->p.top_k);
        n = (size_t)s->p.top_k;
        sorted = 1;
    }
    if (s->p.top_p < 1.0f) {
        if (sorted) {
            double total = 0;
            for (size_t i = 0; i < n; i++)
                total += c[i].w = expf(c[i].x - xmax);
            n = top_p_prefix(c, n, total, s->p.top_p);
        } else {
            n = nucleus_select(s, n, xmax);
        }
    }
    if (s->p.min_p > 0)
        n = min_p_filter(c, n, xmax, s->p.min_p);
    return draw(s, c, n, temper(c, n, xmax, s->p.temp));
}

/* Whether logit a (row ia) ranks before logit b (row ib): larger first, ties to the lower row. */
static int ranks_before(float a, int32_t ia, float b, int32_t ib) { return a > b || (a == b && ia < ib); }

float loom_logprobs(const float *logits, int n_rows, const uint8_t *sampleable, int32_t id, int k, int32_t *top_ids,
                    float *top_lp)
{
    float xmax = -INFINITY;
    k = k < 0 ? 0 : k > LOOM_TOP_LOGPROBS_MAX ? LOOM_TOP_LOGPROBS_MAX : k;
    for (int i = 0; i < k; i++)
        top_ids[i] = -1, top_lp[i] = -INFINITY;
    for (int32_t r = 0; r < n_rows; r++) {
        if (!sampleable[r] || !(logits[r] > -INFINITY))
            continue;
        xmax = logits[r] > xmax ? logits[r] : xmax;
        int j = k; /* insert into the sorted top k */
        while (j > 0 && (top_ids[j - 1] < 0 || ranks_before(logits[r], r, top_lp[j - 1], top_ids[j - 1])))
            j--;
        if (j < k) {
            memmove(top_ids + j + 1, top_ids + j, sizeof *top_ids * (size_t)(k - j - 1));
            memmove(top_lp + j + 1, top_lp + j, sizeof *top_lp * (size_t)(k - j - 1));
            top_ids[j] = r, top_lp[j] = logits[r];
        }
    }
    double sum = 0;
    for (int32_t r = 0; r < n_rows; r++)
        if (sampleable[r] && logits[r] > -INFINITY)
            sum += exp((double)logits[r] - (double)xmax);
    double log_z = (double)xmax + log(sum);
    for (int i = 0; i < k && top_ids[i] >= 0; i++)
        top_lp[i] = (float)((double)top_lp[i] - log_z);
    if (id < 0 || id >= n_rows || !sampleable[id] || !(logits[id] > -INFINITY) || !(sum > 0))
        return -INFINITY;
    return (float)((double)logits[id] - log_z);
}
