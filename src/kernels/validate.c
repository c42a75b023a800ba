/* validate.c — the row validators of the trait table (validate_row): ggml_validate_row_data's rules
 * (ggml-quants.c) per type: F32/F16/BF16 values and every block's F32 or F16 scales (d, and dmin or m
 * where the block has one) must be neither inf nor NaN; MXFP4's E8M0 scale must not be 0xff. Quants themselves
 * are never invalid. Also the
 * row loop over a tensor and the wording of a finding. */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>

#include "kernels/blocks.h"
#include "kernels/helpers_scalar.h"
#include "kernels/protos.h"

static int fault_at(struct loom_row_fault *f, int64_t index, const char *field, const char *what)
{
    f->index = index;
    f->field = field;
    f->what = what;
    return 0;
}

/* "inf", "nan" or NULL for a finite F16 (exponent bits all ones: inf with a zero mantissa, else NaN) */
static const char *f16_fault(uint16_t h)
{
    if ((h & 0x7c00) != 0x7c00)
        return 0;
    return h & 0x03ff ? "nan" : "inf";
}

static const char *f32_fault(float x)
{
    return isinf(x) ? "inf" : isnan(x) ? "nan" : 0;
}

/* Index of the first of x[n] whose bits under mask are all ones (an all-ones exponent), or n. Whole
 * chunks are tested branch-free first, in a fixed-length loop the compiler vectorizes at -O2, so valid
 * data streams at memory speed; only a chunk with a hit (and the tail) is searched element by element. */
#define VALIDATE_CHUNK 256
static int64_t first_all_ones16(const uint16_t *x, int64_t n, uint16_t mask)
{
    int64_t i = 0;
    for (; i + VALIDATE_CHUNK <= n; i += VALIDATE_CHUNK) {
        int hit = 0;
        for (int j = 0; j < VALIDATE_CHUNK; j++)
            hit |= (x[i + j] & mask) == mask;
        if (hit)
            break;
    }
    for (; i < n; i++)
        if ((x[i] & mask) == mask)
            return i;
    return n;
}

static int64_t first_all_ones32(const uint32_t *x, int64_t n, uint32_t mask)
{
    int64_t i = 0;
    for (; i + VALIDATE_CHUNK <= n; i += VALIDATE_CHUNK) {
        int hit = 0;
        for (int j = 0; j < VALIDATE_CHUNK; j++)
            hit |= (x[i + j] & mask) == mask;
        if (hit)
            break;
    }
    for (; i < n; i++)
        if ((x[i] & mask) == mask)
            return i;
    return n;
}

int loom_f32_validate_row(const void *row, int64_t n, struct loom_row_fault *fault)
{
    int64_t i = first_all_ones32(row, n, 0x7f800000u);
    if (i == n)
        return 1;
    float x;
    memcpy(&x, (const uint32_t *)row + i, sizeof x);
    return fault_at(fault, i, "value", f32_fault(x));
}

int loom_f16_validate_row(const void *row, int64_t n, struct loom_row_fault *fault)
{
    int64_t i = first_all_ones16(row, n, 0x7c00);
    return i == n ? 1 : fault_at(fault, i, "value", f16_fault(((const uint16_t *)row)[i]));
}

/* BF16 is the top half of an F32: all-ones exponent (0x7f80) with a zero mantissa is inf, else NaN. */
int loom_bf16_validate_row(const void *row, int64_t n, struct loom_row_fault *fault)
{
    int64_t i = first_all_ones16(row, n, 0x7f80);
    if (i == n)
        return 1;
    return fault_at(fault, i, "value", (((const uint16_t *)row)[i] & 0x7fff) > 0x7f80 ? "nan" : "inf");
}

int loom_q8_k_validate_row(const void *row, int64_t n_blocks, struct loom_row_fault *fault)
{
    const struct loom_block_q8_k *b = row;
    for (int64_t i = 0; i < n_blocks; i++)
        if (f32_fault(b[i].d))
            return fault_at(fault, i, "scale d", f32_fault(b[i].d));
    return 1;
}

/* Blocks of `size` bytes with an F16 scale d at byte d_off and, when m_name is not NULL, a second F16
 * (dmin or m) at m_off; d is checked first, as ggml does. */
static int f16_scales(const void *row, int64_t n_blocks, size_t size, size_t d_off, size_t m_off, const char *m_name,
                      struct loom_row_fault *fault)
{
    const uint8_t *p = row;
    for (int64_t i = 0; i < n_blocks; i++, p += size) {
        uint16_t d, m = 0;
        memcpy(&d, p + d_off, sizeof d);
        if (m_name)
            memcpy(&m, p + m_off, sizeof m);
        if (f16_fault(d))
            return fault_at(fault, i, "scale d", f16_fault(d));
        if (f16_fault(m))
            return fault_at(fault, i, m_name, f16_fault(m));
    }
    return 1;
}

#define F16_D(fn, block)                                                                                           \
    int fn(const void *row, int64_t n_blocks, struct loom_row_fault *fault)                                        \
    {                                                                                                              \
        return f16_scales(row, n_blocks, sizeof(struct block), offsetof(struct block, d), 0, 0, fault);           \
    }
#define F16_DM(fn, block, m, m_name)                                                                               \
    int fn(const void *row, int64_t n_blocks, struct loom_row_fault *fault)                                        \
    {                                                                                                              \
        return f16_scales(row, n_blocks, sizeof(struct block), offsetof(struct block, d), offsetof(struct block, m), \
                          m_name, fault);                                                                          \
    }

F16_D(loom_q4_0_validate_row, loom_block_q4_0)
F16_DM(loom_q4_1_validate_row, loom_block_q4_1, m, "minimum m")
F16_D(loom_q5_0_validate_row, loom_block_q5_0)
F16_DM(loom_q5_1_validate_row, loom_block_q5_1, m, "minimum m")
F16_D(loom_q8_0_validate_row, loom_block_q8_0)
F16_DM(loom_q2_k_validate_row, loom_block_q2_k, dmin, "scale dmin")
F16_D(loom_q3_k_validate_row, loom_block_q3_k)
F16_DM(loom_q4_k_validate_row, loom_block_q4_k, dmin, "scale dmin")
F16_DM(loom_q5_k_validate_row, loom_block_q5_k, dmin, "scale dmin")
F16_D(loom_q6_k_validate_row, loom_block_q6_k)
F16_D(loom_iq4_nl_validate_row, loom_block_iq4_nl)
F16_D(loom_iq4_xs_validate_row, loom_block_iq4_xs)
F16_D(loom_iq2_xxs_validate_row, loom_block_iq2_xxs)
F16_D(loom_iq2_xs_validate_row, loom_block_iq2_xs)
F16_D(loom_iq2_s_validate_row, loom_block_iq2_s)
F16_D(loom_iq3_xxs_validate_row, loom_block_iq3_xxs)
F16_D(loom_iq3_s_validate_row, loom_block_iq3_s)
F16_D(loom_iq1_s_validate_row, loom_block_iq1_s)
F16_D(loom_tq1_0_validate_row, loom_block_tq1_0)
F16_D(loom_tq2_0_validate_row, loom_block_tq2_0)

/* IQ1_M has no d field: its F16 scale d is the top nibbles of the four little-endian scale words. */
int loom_iq1_m_validate_row(const void *row, int64_t n_blocks, struct loom_row_fault *fault)
{
    const struct loom_block_iq1_m *b = row;
    for (int64_t i = 0; i < n_blocks; i++) {
        const uint8_t *s = b[i].scales;
        uint16_t d = (uint16_t)(s[1] >> 4 | (s[3] & 0xf0) | (s[5] >> 4) << 8 | (s[7] & 0xf0) << 8);
        if (f16_fault(d))
            return fault_at(fault, i, "scale d", f16_fault(d));
    }
    return 1;
}

/* MXFP4's E8M0 scale e is invalid only as 0xff, the format's NaN code. */
int loom_mxfp4_validate_row(const void *row, int64_t n_blocks, struct loom_row_fault *fault)
{
    const struct loom_block_mxfp4 *b = row;
    for (int64_t i = 0; i < n_blocks; i++)
        if (b[i].e == 0xff)
            return fault_at(fault, i, "scale e", "0xff (the E8M0 NaN code)");
    return 1;
}

int64_t loom_type_validate_rows(uint32_t type, const void *data, int64_t n, int64_t n_rows,
                                struct loom_row_fault *fault)
{
    const struct loom_type_traits *tr = loom_type_traits(type);
    if (!tr || !tr->validate_row) {
        fault_at(fault, 0, "type", "without a validation rule");
        return 0;
    }
    size_t row_bytes = loom_type_row_bytes(type, n);
    for (int64_t r = 0; r < n_rows; r++)
        if (!tr->validate_row((const uint8_t *)data + (size_t)r * row_bytes, n / tr->block_size, fault))
            return r;
    return -1;
}

void loom_row_where(uint32_t n_dims, int64_t ne1, int64_t row, char *buf, size_t cap)
{
    if (n_dims >= 3 && ne1 > 0)
        snprintf(buf, cap, "expert %" PRId64 " row %" PRId64, row / ne1, row % ne1);
    else
        snprintf(buf, cap, "row %" PRId64, row);
}

void loom_row_fault_describe(uint32_t type, const struct loom_row_fault *fault, char *buf, size_t cap)
{
    const struct loom_type_traits *tr = loom_type_traits(type);
    if (!strcmp(fault->field, "type"))
        snprintf(buf, cap, "type %s has no validation rule (ggml_validate_row_data rejects it)", tr ? tr->name : "?");
    else if (!strcmp(fault->field, "value"))
        snprintf(buf, cap, "%s element %" PRId64 " is %s", tr->name, fault->index, fault->what);
    else
        snprintf(buf, cap, "%s block %" PRId64 " %s is %s", tr->name, fault->index, fault->field, fault->what);
}
