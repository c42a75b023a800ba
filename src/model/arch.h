/* arch.h — the architecture interface: what an architecture declares (admission of its hyper-parameters,
 * its layer plan, the weight table of each layer kind, the state owners of each layer kind) and the sizes
 * derived from its hyper-parameters once, at admission (struct loom_geometry). Its circuits live in the
 * runtime (struct loom_circuits, runtime/session.h). The instances: qwen35 (src/model/arch_qwen35.c) and
 * qwen35moe (arch_qwen35moe.c), sharing arch_qwen35_common.c; loom_arch_admit picks the instance that
 * general.architecture names. */
#ifndef LOOM_MODEL_ARCH_H
#define LOOM_MODEL_ARCH_H

#include <stddef.h>
#include <stdint.h>

#include "gguf/gguf.h"
#include "loom.h"

struct loom_hparams;

/* What a layer runs, and so which weights and state owners it has. */
enum loom_layer_kind { LOOM_LAYER_RECURRENT = 0, LOOM_LAYER_ATTENTION = 1, LOOM_LAYER_KINDS };

/* The persistent state a sequence keeps per layer: the Gated DeltaNet conv state and recurrent matrices
 * (fixed size, double buffered by the session), and the K and V rows of the KV cache (one row per
 * position: K position-major, V transposed, position-minor, as the reference stores them). */
enum loom_owner_kind { LOOM_OWNER_CONV = 0, LOOM_OWNER_RECURRENT = 1, LOOM_OWNER_K = 2, LOOM_OWNER_V = 3,
                       LOOM_OWNER_KINDS };

/* Shape of one state owner of one layer, outermost first. A K/V owner grows along its position axis
 * (shape there: 0, n_ctx in a session); pos_axis is -1 for fixed-size owners. bytes: the whole owner when
 * fixed-size, one position when positional. */
struct loom_owner_shape {
    uint32_t dtype; /* LOOM_TYPE_F32 or LOOM_TYPE_F16 */
    int pos_axis;
    int64_t shape[3];
    uint64_t bytes;
};

/* The circuits' per-token scratch widths (floats per token of each scratch buffer, runtime/session.h). */
struct loom_scratch_widths {
    uint64_t a, b, c, o; /* the four wide buffers: widest of what each layer kind's steps put there */
    uint64_t gates;      /* alpha, beta: one per recurrent value head */
    uint64_t rope;       /* n_rot cos/sin pairs */
    uint64_t head_dim;   /* one attention head's query as F16, per worker thread */
    uint64_t head_dim_v; /* one attention head's output, per worker thread */
    /* mixture of experts (0 in a dense model): the router's and the routed experts' buffers */
    uint64_t experts;    /* n_expert: router logits */
    uint64_t slots;      /* n_expert_used: experts per token (each a row of every expert buffer) */
    uint64_t expert_ff;  /* n_ff_exp: one routed expert's hidden width */
};

#define LOOM_ARCH_MAX_DIMS 24

/* Sizes derived from the hyper-parameters, computed once by the architecture's admission. */
struct loom_geometry {
    uint64_t conv_channels;   /* Gated DeltaNet conv1d channels (q | k | v): 2 * n_k_heads * head_dim + inner */
    uint64_t dim[LOOM_ARCH_MAX_DIMS]; /* the weight table's shape sizes, indexed by the instance's dim ids */
    struct loom_owner_shape owner[LOOM_OWNER_KINDS]; /* per owner kind, for one layer */
    uint64_t recurrent_state_bytes; /* per sequence: every fixed-size owner of every layer */
    uint64_t kv_bytes_per_token;    /* per sequence: every K/V owner, one position */
    struct loom_scratch_widths scratch;
};

/* One row of a layer's weight table: the tensor "blk.N.<name>", the layer kinds that have it, its shape
 * [ne0, ne1, ne2] as dim ids into geometry.dim (ne2 names a dimension of size 1 except for expert tensors),
 * whether it is an F32 vector (bound as const float *), a matrix of any admitted type (bound as struct
 * loom_weight, multiplied by loom_matmul) or a 3-D expert tensor [n_in, n_out, n_expert] of any admitted
 * type (bound as struct loom_experts), whether a file must have it, and where it is bound in struct
 * loom_layer. */
struct loom_weight_row {
    const char *name;
    uint8_t kinds;   /* bit (1 << kind) for each enum loom_layer_kind */
    uint8_t ne[3];
    uint8_t vector;  /* 1: F32 vector; 0: matrix (or experts) */
    uint8_t experts; /* 1: 3-D expert tensor (vector 0) */
    uint8_t required;
    size_t field;    /* offsetof(struct loom_layer, ...) */
};

/* An architecture instance (a const table). */
struct loom_arch {
    const char *name; /* general.architecture */
    /* Check every key and tensor of g (fail closed, naming the key or tensor, the expectation and the
     * finding), fill *hp and *geo. Allocates nothing. arch is this instance. */
    int (*admit)(const struct loom_arch *arch, const struct loom_gguf *g, struct loom_hparams *hp,
                 struct loom_geometry *geo, loom_error *err);
    /* Limits of loom's circuits beyond what admission checks (checked when loading to run). */
    int (*check_circuits)(const struct loom_hparams *hp, loom_error *err);
    /* The layer plan: the kind of layer il. */
    enum loom_layer_kind (*layer_kind)(const struct loom_hparams *hp, uint32_t il);
    /* The weight table, in admission order; matrices and vectors each in identity-digest order. */
    const struct loom_weight_row *weights;
    int n_weights;
    /* Per layer kind, the state owners it keeps, in state-file order. */
    struct {
        int n;
        enum loom_owner_kind kinds[2];
    } owners[LOOM_LAYER_KINDS];
    const void *variant; /* what the instance's functions read beyond this (the qwen35 family: struct
                          * loom_qwen35_variant, model/arch_qwen35_common.h) */
};

/* The instances. */
extern const struct loom_arch loom_arch_qwen35, loom_arch_qwen35moe;

/* The instance named name, or NULL. */
const struct loom_arch *loom_arch_find(struct loom_gguf_str name);

/* Admission of any supported architecture: read general.architecture, pick its instance (*arch) and run
 * its admission. An unknown name is LOOM_E_FORMAT naming the key, the supported names and the finding. */
int loom_arch_admit(const struct loom_gguf *g, const struct loom_arch **arch, struct loom_hparams *hp,
                    struct loom_geometry *geo, loom_error *err);

/* The per-sequence state totals of a layer plan: sums geo->owner over the owners of each layer's kind
 * into geo->recurrent_state_bytes and geo->kv_bytes_per_token. Nonzero when a total overflows 64 bits. */
int loom_geometry_state_totals(const struct loom_arch *arch, const struct loom_hparams *hp,
                               struct loom_geometry *geo);

/* Bytes one position of one layer's K owner takes in a K cache of element type `type` (F16: geo's K owner;
 * Q8_0: 34-byte blocks of 32 values per head row), or 0 when the type cannot hold the rows (Q8_0 needs a
 * head dimension that is a multiple of 32). Every K size (a session's owners, loom_model_describe) comes from
 * here. */
uint64_t loom_geometry_k_bytes(const struct loom_geometry *geo, enum loom_kv_type type);
/* loom_geometry_k_bytes summed over the layers whose kind keeps a K owner: one position of one sequence. */
uint64_t loom_geometry_k_bytes_per_token(const struct loom_arch *arch, const struct loom_hparams *hp,
                                         const struct loom_geometry *geo, enum loom_kv_type type);

/* Admission steps the instances share. A tensor of shape [ne0, ne1, ne2] (ne2 = 1: a matrix or vector; else
 * an expert tensor, whose error names the row width, rows per expert and expert_count), and type F32 when f32,
 * named in errors as name; expect_tensor also requires it to be present ("missing tensor 'NAME'"). */
int loom_arch_check_tensor(const struct loom_gguf_tensor *t, const char *name, uint64_t ne0, uint64_t ne1,
                           uint64_t ne2, int f32, loom_error *err);
int loom_arch_expect_tensor(const struct loom_gguf *g, const char *name, uint64_t ne0, uint64_t ne1, uint64_t ne2,
                            int f32, loom_error *err);
/* Every layer's tensors against the weight table rows of its kind, layer by layer in table order. */
int loom_arch_check_layer_tensors(const struct loom_arch *arch, const struct loom_gguf *g,
                                  const struct loom_hparams *hp, const struct loom_geometry *geo, loom_error *err);
/* Whether layer il of the plan has a weight table row named suffix (after "blk.N."). */
int loom_arch_layer_expects(const struct loom_arch *arch, const struct loom_hparams *hp, uint32_t il,
                            struct loom_gguf_str suffix);

#endif
