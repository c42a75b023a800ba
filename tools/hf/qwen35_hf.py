#!/usr/bin/python3
"""qwen35_hf.py — small synthetic Hugging Face checkpoints of the Qwen3.5 families (dense Qwen3_5*, MoE
Qwen3_5Moe*), and their conversion to GGUF by llama.cpp's own converter (the reference bundle's
convert_hf_to_gguf.py), so loom is tested on files made the way users make them.

  qwen35_hf.py list                                  the variants, one per line
  qwen35_hf.py checkpoint VARIANT DIR [--seed N]     write the checkpoint (config.json, model*.safetensors,
                                                     tokenizer.json, tokenizer_config.json) into DIR
  qwen35_hf.py convert VARIANT OUT.gguf [--seed N] [--keep DIR]
                                                     checkpoint in a temporary folder (or DIR), then the converter
  qwen35_hf.py version                               the tooling's identity (a checksum of its files), for stamps

Needs /usr/bin/python3 with Debian's python3-numpy (the checkpoint) and python3-torch (the converter imports
torch; scripts/setup.sh installs it), and the reference source in $LOOM_REF/src (default ~/.cache/loom/ref/src).
The converter also imports modules that are not packaged for Debian; tools/hf/standins/ holds minimal stand-ins,
put first on its PYTHONPATH, only as far as its code paths for these models go:
  transformers  AutoConfig (fails, so the converter reads config.json itself) and AutoTokenizer (a byte-level
                BPE over tokenizer.json: vocab, added tokens, encode/decode), see standins/transformers;
  tqdm          the progress bar of gguf-py's writer (silent);
and Debian's torch 1.13 lacks torch.float8_e4m3fn / float8_e5m2, which the converter names in its dtype tables:
the launcher sets placeholders for them (no checkpoint here holds FP8 tensors).
The converter identifies the pre-tokenizer by hashing the ids its tokenizer gives for a fixed text (chkhsh);
a synthetic vocabulary of a few hundred tokens cannot give the ids of the published Qwen3.5 tokenizer, so the
launcher here registers this vocabulary's hash (SYNTH_CHKHSH) as `qwen35`, as convert_hf_to_gguf_update.py
registers a new model's hash; every other hash takes the converter's own table.

Weights are random and well-conditioned (../shared/REFERENCE.md, "Synthetic models must be well-conditioned"):
depth-scaled residual branches, a shared low-rank residual basis, correlated DeltaNet q/k, a current-token conv
tap, A ~ U(1, 16), dt log-uniform in [1e-3, 0.1], an output norm with 60% negative channels for tied heads. They
are written in the Hugging Face layout (zero-centred RMSNorm weights, A_log, dt_bias, conv1d [C, 1, K], value
heads grouped by key head, query and gate rows interleaved per attention head), which the converter turns into
the GGUF layout (1 + w norms, ssm_a = -exp(A_log), value heads tiled, ...).
"""
import argparse
import ast
import hashlib
import json
import os
import runpy
import shutil
import subprocess
import sys
import tempfile

import numpy as np

sys.dont_write_bytecode = True  # the stand-ins and the converter leave no __pycache__ behind

HERE = os.path.dirname(os.path.abspath(__file__))
STANDINS = os.path.join(HERE, "standins")

# sha256 of str(ids) of the converter's check text under this tooling's synthetic tokenizer (see the header).
SYNTH_CHKHSH = "c1171603bd88e199238aed3690849a8c3a2bf9bdd24c64a2c9e42d80d6b8e3f9"

# ---- variants -----------------------------------------------------------------------------------------------

BASE = dict(
    hidden=128, ff=256, n_head=4, n_kv=2, head_dim=64, k_heads=2, v_heads=4, lin_dim=32, conv=4, layers=4,
    interval=4, layer_types=True, vocab_size=320, ctx=4096, eps=1e-6, theta=1e7, prf=0.25, sections=[3, 3, 2],
    form="cond", tied=True, mtp=0, qkvz=False, outtype="f16", flags=[], moe=None, shards=1,
)
MOE = dict(experts=8, used=2, ff_exp=64, ff_shexp=128, fused=False)

# name -> (what it covers, overrides of BASE)
VARIANTS = {
    "dense-tied": ("Qwen3_5ForConditionalGeneration (text_config), tied head (no lm_head, as the 0.8B), "
                   "2 key / 4 value heads (value heads reordered), layer_types, --no-mtp, F16",
                   dict()),
    "dense-untied": ("Qwen3_5ForCausalLM (flat config), lm_head, 4 key = 4 value heads, no layer_types "
                     "(full_attention_interval only), no mrope_section (the converter's default), BF16",
                     dict(form="causal", tied=False, k_heads=4, layer_types=False, sections=None, outtype="bf16")),
    "dense-mtp": ("MTP block (mtp_num_hidden_layers 1, mtp.* tensors: a nextn layer after 8 layers), F32",
                  dict(layers=8, mtp=1, outtype="f32")),
    "dense-interval2": ("layer_types with full_attention_interval 2 (attention every 2nd layer), F16",
                        dict(interval=2)),
    "dense-qkvz": ("fused linear-attention projection in_proj_qkvz (Qwen3-Next layout, 2 key = 2 value heads), "
                   "F16", dict(form="causal", v_heads=2, qkvz=True)),
    "dense-q8_0": ("--outtype q8_0 (the converter's own Q8_0 quantization)", dict(outtype="q8_0")),
    "dense-fuse-qkv": ("--fuse-qkv: the attention layers' q/k/v fused into attn_qkv, F16",
                       dict(flags=["--fuse-qkv"])),
    "dense-irregular": ("layer_types that no full_attention_interval describes (attention at layers 1, 2, 5)",
                        dict(layers=6, layer_types=["linear_attention", "full_attention", "full_attention",
                                                    "linear_attention", "linear_attention", "full_attention"])),
    "moe": ("Qwen3_5MoeForConditionalGeneration: 8 experts (one tensor per expert), 2 used, shared expert and "
            "its gate, router; untied; MTP block with a MoE FFN; two safetensors shards with an index, F16",
            dict(moe=dict(MOE), tied=False, mtp=1, shards=2)),
    "moe-fused": ("Qwen3_5MoeForCausalLM with fused 3-D expert tensors (experts.gate_up_proj / down_proj), "
                  "converted with --fuse-gate-up-exps (ffn_gate_up_exps), tied, BF16",
                  dict(moe=dict(MOE, fused=True), form="causal", outtype="bf16", flags=["--fuse-gate-up-exps"])),
    "moe-fuse-qkv": ("--fuse-qkv on the MoE model (attn_qkv in the attention layers and the MTP block), untied, "
                     "Q8_0", dict(moe=dict(MOE), tied=False, mtp=1, outtype="q8_0", flags=["--fuse-qkv"])),
}


def variant(name):
    if name not in VARIANTS:
        sys.exit(f"qwen35_hf: unknown variant '{name}' (expected one of: {', '.join(VARIANTS)})")
    return dict(BASE, **VARIANTS[name][1])


def layer_types(P):
    if isinstance(P["layer_types"], list):
        return P["layer_types"]
    return ["full_attention" if (i + 1) % P["interval"] == 0 else "linear_attention" for i in range(P["layers"])]


# ---- tokenizer: byte-level BPE of a few hundred tokens ------------------------------------------------------

sys.path.insert(0, STANDINS)
from transformers import bytes_to_unicode, pre_tokenize  # noqa: E402  (the stand-in's, shared with encode)

CORPUS = (
    "The quick brown fox jumps over the lazy dog. A model reads the tokens of a prompt and writes the next one; "
    "then it reads that one too. Weights in this file are random, so the text it writes means nothing, "
    "but every number in it is computed the same way by both engines that read it. "
    "Tests run in seconds on small files: there are four layers, three of them recurrent and one with attention. "
    "We've checked that it's there, and they're sure they'll see what I'd like to see.\n\n"
    "def main():\n    return 0\n"
)
N_MERGES = 48
ADDED = [("<|endoftext|>", True), ("<|im_start|>", True), ("<|im_end|>", True), ("<think>", False),
         ("</think>", False), ("<tool_call>", False), ("</tool_call>", False)]
CHAT_TEMPLATE = (
    "{%- for m in messages %}{{- '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' }}"
    "{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


def train_merges(n):
    """The n most frequent adjacent pairs merged in turn over CORPUS (ties: the smaller pair string)."""
    b2u = bytes_to_unicode()
    words = {}
    for piece in pre_tokenize(CORPUS):
        w = tuple(b2u[b] for b in piece.encode("utf-8"))
        words[w] = words.get(w, 0) + 1
    merges = []
    for _ in range(n):
        counts = {}
        for w, c in words.items():
            for p in zip(w, w[1:]):
                counts[p] = counts.get(p, 0) + c
        if not counts:
            break
        best = min(counts, key=lambda p: (-counts[p], p))
        merges.append(best)
        merged = {}
        for w, c in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    out.append(w[i] + w[i + 1])
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            merged[tuple(out)] = merged.get(tuple(out), 0) + c
        words = merged
    return merges


def write_tokenizer(d, vocab_size):
    b2u = bytes_to_unicode()
    printable = [b for b in range(256) if b2u[b] == chr(b)]
    order = printable + [b for b in range(256) if b2u[b] != chr(b)]  # GPT-2 order: printable bytes first
    vocab = {b2u[b]: i for i, b in enumerate(order)}
    merges = train_merges(N_MERGES)
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    added = []
    for content, special in ADDED:
        added.append(dict(id=len(vocab) + len(added), content=content, single_word=False, lstrip=False,
                          rstrip=False, normalized=False, special=special))
    n_tok = len(vocab) + len(added)
    assert n_tok <= vocab_size, f"{n_tok} tokens do not fit vocab_size {vocab_size}"
    tj = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": True},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": [list(m) for m in merges]},
    }
    with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tj, f, ensure_ascii=False, indent=1)
    tc = {
        "add_bos_token": False, "add_prefix_space": False, "bos_token": None, "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>", "unk_token": None, "errors": "replace", "model_max_length": 4096,
        "split_special_tokens": False, "tokenizer_class": "Qwen2Tokenizer", "chat_template": CHAT_TEMPLATE,
        "added_tokens_decoder": {str(t["id"]): {k: v for k, v in t.items() if k != "id"} for t in added},
    }
    with open(os.path.join(d, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(tc, f, ensure_ascii=False, indent=1)
    return n_tok


# ---- config.json ----------------------------------------------------------------------------------------------

def text_config(P):
    moe = P["moe"]
    tc = {
        "model_type": "qwen3_5_moe_text" if moe else "qwen3_5_text",
        "hidden_size": P["hidden"], "num_hidden_layers": P["layers"], "num_attention_heads": P["n_head"],
        "num_key_value_heads": P["n_kv"], "head_dim": P["head_dim"], "hidden_act": "silu",
        "attention_bias": False, "attention_dropout": 0.0, "attn_output_gate": True,
        "linear_conv_kernel_dim": P["conv"], "linear_key_head_dim": P["lin_dim"],
        "linear_value_head_dim": P["lin_dim"], "linear_num_key_heads": P["k_heads"],
        "linear_num_value_heads": P["v_heads"], "full_attention_interval": P["interval"],
        "max_position_embeddings": P["ctx"], "rms_norm_eps": P["eps"], "vocab_size": P["vocab_size"],
        "initializer_range": 0.02, "use_cache": True, "dtype": "bfloat16", "eos_token_id": None,
        "tie_word_embeddings": P["tied"], "mtp_num_hidden_layers": P["mtp"], "mtp_use_dedicated_embeddings": False,
    }
    if P["layer_types"]:
        tc["layer_types"] = layer_types(P)
    rope = {"rope_type": "default", "rope_theta": P["theta"], "partial_rotary_factor": P["prf"],
            "mrope_interleaved": True}
    if P["sections"] is not None:
        rope["mrope_section"] = list(P["sections"])
    tc["rope_parameters"] = rope
    if moe:
        tc.update(num_experts=moe["experts"], num_experts_per_tok=moe["used"], moe_intermediate_size=moe["ff_exp"],
                  shared_expert_intermediate_size=moe["ff_shexp"], router_aux_loss_coef=0.001,
                  output_router_logits=False)
    else:
        tc["intermediate_size"] = P["ff"]
    return tc


def write_config(d, P, eos_id):
    tc = text_config(P)
    tc["eos_token_id"] = eos_id
    arch = "Qwen3_5Moe" if P["moe"] else "Qwen3_5"
    if P["form"] == "cond":
        cfg = {"architectures": [arch + "ForConditionalGeneration"],
               "model_type": "qwen3_5_moe" if P["moe"] else "qwen3_5",
               "text_config": tc, "tie_word_embeddings": P["tied"], "transformers_version": "4.57.0.dev0",
               "vision_config": {"model_type": "qwen3_5", "depth": 2, "hidden_size": 64, "out_hidden_size":
                                 P["hidden"], "num_heads": 2, "patch_size": 16, "spatial_merge_size": 2}}
    else:
        cfg = dict(tc, architectures=[arch + "ForCausalLM"], transformers_version="4.57.0.dev0")
    with open(os.path.join(d, "config.json"), "w", encoding="utf-8") as f:
        json.dump(cfg, f, indent=1)


# ---- weights --------------------------------------------------------------------------------------------------

class Init:
    """The well-conditioned initialisation (see the header), in Hugging Face shapes (out, in)."""

    def __init__(self, P, seed):
        self.rng = np.random.default_rng(seed)
        self.E, L = P["hidden"], P["layers"]
        self.out_gain = 1.0 / np.sqrt(2.0 * L)
        k = max(int(round(0.1 * self.E)), 1)
        p = np.full(self.E, 0.1)
        p[:k] = 1.0
        self.prof = p * np.sqrt(self.E / (p ** 2).sum())
        self.B = np.linalg.qr(self.rng.standard_normal((self.E, self.E)))[0]
        self.c_in = np.sqrt(self.E / (self.prof ** 4).sum())

    def lin_in(self, n_out, gain=1.0):  # reads the normalised residual stream
        G = self.rng.standard_normal((n_out, self.E))
        return (G * (self.prof * self.c_in * gain / np.sqrt(self.E))) @ self.B.T

    def lin_out(self, n_in, gain):  # writes the residual stream
        H = self.rng.standard_normal((self.E, n_in)) * (gain / np.sqrt(n_in))
        return self.B @ (H * self.prof[:, None])

    def norm(self, n, jitter=0.1):  # the GGUF-side weight (about 1); Hugging Face stores it minus 1
        return 1.0 + jitter * self.rng.standard_normal(n)

    def embeddings(self, n_vocab, n_tok, rms=0.3):
        e = self.rng.standard_normal((n_vocab, self.E))
        e[:n_tok] = (e[:n_tok] * self.prof) @ self.B.T * rms
        e[n_tok:] *= 0.1 * rms  # rows no tokenizer token uses
        return e


def linear_attention(I, P, pre, T):
    HK, HV, D, K = P["k_heads"], P["v_heads"], P["lin_dim"], P["conv"]
    key, val = HK * D, HV * D
    rho, rc = 0.9, np.sqrt(1 - 0.81)
    qkv = I.lin_in(2 * key + val)
    qkv[key:2 * key] = rho * qkv[:key] + rc * qkv[key:2 * key]  # k correlated with q
    z = I.lin_in(val)
    if P["qkvz"]:  # Qwen3-Next layout: per key head [q_h, k_h, v_group, z_group]
        r = HV // HK
        q, k, v = qkv[:key], qkv[key:2 * key], qkv[2 * key:]
        rows = []
        for h in range(HK):
            rows += [q[h * D:(h + 1) * D], k[h * D:(h + 1) * D], v[h * r * D:(h + 1) * r * D],
                     z[h * r * D:(h + 1) * r * D]]
        T[pre + "in_proj_qkvz.weight"] = np.concatenate(rows)
    else:
        T[pre + "in_proj_qkv.weight"] = qkv
        T[pre + "in_proj_z.weight"] = z
    T[pre + "in_proj_b.weight"] = I.lin_in(HV)
    T[pre + "in_proj_a.weight"] = I.lin_in(HV)
    conv = I.rng.uniform(-0.5, 0.5, size=(2 * key + val, K))
    conv[key:2 * key] = rho * conv[:key] + rc * conv[key:2 * key]
    conv[:, K - 1] += 1.0  # the current token's tap
    T[pre + "conv1d.weight"] = conv[:, None, :]
    dt = np.exp(I.rng.uniform(np.log(1e-3), np.log(1e-1), size=HV))
    T[pre + "dt_bias"] = (dt + np.log(-np.expm1(-dt))).astype(np.float32)  # inverse softplus
    T[pre + "A_log"] = np.log(I.rng.uniform(1.0, 16.0, size=HV)).astype(np.float32)
    T[pre + "norm.weight"] = I.norm(D)  # RMSNormGated: stored as is
    T[pre + "out_proj.weight"] = I.lin_out(val, I.out_gain)


def attention(I, P, pre, T):
    NH, NKV, HD = P["n_head"], P["n_kv"], P["head_dim"]
    T[pre + "q_proj.weight"] = I.lin_in(2 * NH * HD)  # per head: HD query rows, then HD gate rows
    T[pre + "k_proj.weight"] = I.lin_in(NKV * HD)
    T[pre + "v_proj.weight"] = I.lin_in(NKV * HD)
    T[pre + "o_proj.weight"] = I.lin_out(NH * HD, 2.0 * I.out_gain)
    T[pre + "q_norm.weight"] = I.norm(HD) - 1
    T[pre + "k_norm.weight"] = I.norm(HD) - 1


def mlp(I, P, pre, T):
    moe = P["moe"]
    if not moe:
        T[pre + "gate_proj.weight"] = I.lin_in(P["ff"])
        T[pre + "up_proj.weight"] = I.lin_in(P["ff"])
        T[pre + "down_proj.weight"] = I.lin_out(P["ff"], I.out_gain)
        return
    NE, FE, FS = moe["experts"], moe["ff_exp"], moe["ff_shexp"]
    T[pre + "gate.weight"] = I.lin_in(NE)
    gate = [I.lin_in(FE) for _ in range(NE)]
    up = [I.lin_in(FE) for _ in range(NE)]
    down = [I.lin_out(FE, I.out_gain) for _ in range(NE)]
    if moe["fused"]:  # transformers 5 layout: [experts, 2 * ff, hidden] and [experts, hidden, ff]
        T[pre + "experts.gate_up_proj"] = np.stack([np.concatenate([g, u]) for g, u in zip(gate, up)])
        T[pre + "experts.down_proj"] = np.stack(down)
    else:
        for e in range(NE):
            T[pre + f"experts.{e}.gate_proj.weight"] = gate[e]
            T[pre + f"experts.{e}.up_proj.weight"] = up[e]
            T[pre + f"experts.{e}.down_proj.weight"] = down[e]
    T[pre + "shared_expert.gate_proj.weight"] = I.lin_in(FS)
    T[pre + "shared_expert.up_proj.weight"] = I.lin_in(FS)
    T[pre + "shared_expert.down_proj.weight"] = I.lin_out(FS, I.out_gain)
    T[pre + "shared_expert_gate.weight"] = I.lin_in(1)


def decoder_layer(I, P, pre, kind, T):
    T[pre + "input_layernorm.weight"] = I.norm(P["hidden"]) - 1
    if kind == "linear_attention":
        linear_attention(I, P, pre + "linear_attn.", T)
    else:
        attention(I, P, pre + "self_attn.", T)
    T[pre + "post_attention_layernorm.weight"] = I.norm(P["hidden"]) - 1
    mlp(I, P, pre + "mlp.", T)


def weights(P, n_tok, seed):
    """Every tensor by its Hugging Face name, as float64 arrays."""
    I, T, E = Init(P, seed), {}, P["hidden"]
    model = "model.language_model." if P["form"] == "cond" else "model."
    T[model + "embed_tokens.weight"] = I.embeddings(P["vocab_size"], n_tok)
    for il, kind in enumerate(layer_types(P)):
        decoder_layer(I, P, f"{model}layers.{il}.", kind, T)
    out_norm = I.norm(E, 0.1)
    if P["tied"]:  # 60% negative channels: a tied head would otherwise favour the current token
        out_norm[I.rng.permutation(E)[:int(round(0.6 * E))]] *= -1
    else:
        T["lm_head.weight"] = I.lin_in(P["vocab_size"], 3.0)
    T[model + "norm.weight"] = out_norm - 1
    for j in range(P["mtp"]):  # the MTP block: a full-attention layer after fc([norm(embedding); norm(hidden)])
        decoder_layer(I, P, f"mtp.layers.{j}.", "full_attention", T)
    if P["mtp"]:
        T["mtp.fc.weight"] = np.concatenate([I.lin_in(E), I.lin_in(E)], axis=1) / np.sqrt(2.0)
        for n in ("pre_fc_norm_embedding", "pre_fc_norm_hidden", "norm"):
            T[f"mtp.{n}.weight"] = I.norm(E) - 1
    return T


def bf16_bytes(a):
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype("<u2").tobytes()  # round to nearest even


def write_safetensors(path, tensors):
    """safetensors: 8-byte little-endian header length, a JSON header (name -> dtype, shape, data_offsets),
    padded with spaces to 8 bytes, then the raw little-endian data. BF16 unless the array is float32."""
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name in sorted(tensors):
        a = tensors[name]
        data, dtype = (np.ascontiguousarray(a, "<f4").tobytes(), "F32") if a.dtype == np.float32 \
            else (bf16_bytes(a), "BF16")
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(len(h).to_bytes(8, "little"))
        f.write(h)
        for b in blobs:
            f.write(b)


def write_checkpoint(name, d, seed):
    P = variant(name)
    os.makedirs(d, exist_ok=True)
    n_tok = write_tokenizer(d, P["vocab_size"])
    eos = n_tok - len(ADDED) + [a[0] for a in ADDED].index("<|im_end|>")
    write_config(d, P, eos)
    T = weights(P, n_tok, seed)
    names = sorted(T)
    if P["shards"] == 1:
        write_safetensors(os.path.join(d, "model.safetensors"), T)
        return
    n = P["shards"]
    parts = [names[i * len(names) // n:(i + 1) * len(names) // n] for i in range(n)]
    weight_map = {}
    for i, part in enumerate(parts):
        fname = f"model-{i + 1:05d}-of-{n:05d}.safetensors"
        write_safetensors(os.path.join(d, fname), {k: T[k] for k in part})
        weight_map.update({k: fname for k in part})
    with open(os.path.join(d, "model.safetensors.index.json"), "w", encoding="utf-8") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f, indent=1)


# ---- the converter --------------------------------------------------------------------------------------------

def ref_src():
    cache = os.environ.get("LOOM_CACHE") or os.path.expanduser("~/.cache/loom")
    return os.path.join(os.environ.get("LOOM_REF") or os.path.join(cache, "ref"), "src")


def check_text(src):
    """The converter's pre-tokenizer check text, read from its source (get_vocab_base_pre's `chktxt`)."""
    with open(os.path.join(src, "conversion", "base.py"), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "get_vocab_base_pre":
            for st in ast.walk(node):
                if isinstance(st, ast.Assign) and any(getattr(t, "id", "") == "chktxt" for t in st.targets):
                    return ast.literal_eval(st.value)
    raise RuntimeError("qwen35_hf: chktxt not found in the converter's get_vocab_base_pre")


def run_converter(argv):
    """In this process (started with the stand-ins on PYTHONPATH): register the synthetic tokenizer's hash as
    qwen35, then run convert_hf_to_gguf.py as __main__ with argv."""
    src = ref_src()
    sys.path[:0] = [src, os.path.join(src, "gguf-py")]
    import torch
    for name in ("float8_e4m3fn", "float8_e5m2"):  # named in the converter's dtype tables; torch < 2.1 lacks them
        if not hasattr(torch, name):
            setattr(torch, name, f"torch.{name} (absent in torch {torch.__version__})")
    from conversion.base import TextModel
    text, converter_pre = check_text(src), TextModel.get_vocab_base_pre

    def get_vocab_base_pre(self, tokenizer):
        chkhsh = hashlib.sha256(str(tokenizer.encode(text)).encode()).hexdigest()
        if chkhsh == SYNTH_CHKHSH:
            return "qwen35"
        return converter_pre(self, tokenizer)

    TextModel.get_vocab_base_pre = get_vocab_base_pre
    sys.argv = [os.path.join(src, "convert_hf_to_gguf.py")] + argv
    runpy.run_path(sys.argv[0], run_name="__main__")


def convert(name, out, seed, keep):
    P = variant(name)
    tmp = None if keep else tempfile.mkdtemp(prefix="loom-hf-")
    d = keep or os.path.join(tmp, f"Qwen3.5-synth-{name}")  # the converter names the model after the folder
    try:
        if keep and os.path.isdir(d):
            shutil.rmtree(d)
        write_checkpoint(name, d, seed)
        env = dict(os.environ, PYTHONPATH=STANDINS, PYTHONDONTWRITEBYTECODE="1")
        args = [d, "--outfile", out, "--outtype", P["outtype"]] + P["flags"]
        if not P["mtp"]:
            args.append("--no-mtp")
        cmd = ["/usr/bin/python3", os.path.abspath(__file__), "run-converter"] + args
        r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0 or not os.path.isfile(out):
            sys.stderr.write(r.stdout[-6000:])
            sys.exit(f"qwen35_hf: the converter failed on variant {name} (exit {r.returncode})")
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)


def version():
    h = hashlib.sha256()
    for root, dirs, files in sorted(os.walk(HERE)):
        dirs[:] = sorted(x for x in dirs if x != "__pycache__")
        for f in sorted(files):
            if f.endswith(".py"):
                with open(os.path.join(root, f), "rb") as fh:
                    h.update(f.encode() + b"\0" + fh.read())
    return h.hexdigest()[:16]


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "run-converter":
        return run_converter(sys.argv[2:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("list")
    sub.add_parser("version")
    c = sub.add_parser("checkpoint")
    c.add_argument("variant")
    c.add_argument("dir")
    c.add_argument("--seed", type=int, default=1234)
    v = sub.add_parser("convert")
    v.add_argument("variant")
    v.add_argument("out")
    v.add_argument("--seed", type=int, default=1234)
    v.add_argument("--keep", default=None, help="write the checkpoint into this folder and keep it")
    a = ap.parse_args()
    if a.cmd == "list":
        for n, (what, _) in VARIANTS.items():
            print(f"{n:16s} {what}")
    elif a.cmd == "version":
        print(version())
    elif a.cmd == "checkpoint":
        write_checkpoint(a.variant, a.dir, a.seed)
    else:
        convert(a.variant, a.out, a.seed, a.keep)


if __name__ == "__main__":
    main()
