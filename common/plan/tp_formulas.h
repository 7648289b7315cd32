// Closed forms for Megatron tensor parallelism and sequence parallelism: parameters per rank,
// activation bytes per block and bytes sent per step, written from the papers (not from the
// code), so that the stages' measurements are checked against them.
//
// Shoeybi et al. 2019 (Megatron-LM, §3) and Korthikanti et al. 2022 ("Reducing Activation
// Recomputation in Large Transformer Models", §4, Table 2). The paper counts 16-bit bytes with
// dropout; this project trains in fp32 without dropout, so the equivalents below are derived for
// it, tensor by tensor (4 bytes per element):
//
//   activations kept per block       paper (16-bit, dropout)           this model (fp32)
//   no parallelism                   sbh(34 + 5as/h)                   sbh(64 + 4as/h) + 16sb
//   tensor parallel (TP)             sbh(10 + 24/t + 5as/(ht))         sbh(16 + 48/t + 4as/(ht)) + 16sb
//   TP + sequence parallel (SP)      sbh/t·(34 + 5as/h)                sbh/t·(64 + 4as/h) + 16sb/t
//
// Per token and block, this model keeps: the block input x, ln_1(x), res1 and ln_2(res1) (C each,
// replicated under TP, split by SP), four LayerNorm statistics (mean and rstd twice, 1 each),
// qkv (3C/t), atty (C/t), fc and GELU(fc) (4C/t each), and the softmax probabilities (a·s/t):
// 4h + 4 + (12h + as)/t floats, 16h + 16 + 4(12h + as)/t bytes, which is the TP row above (SP
// divides the first two terms by t too). Where the paper's replicated part
// is 10sbh (two LayerNorm inputs and outputs at 2 bytes, two 1-byte dropout masks), ours is
// 16sbh + 16sb: the same four tensors at 4 bytes, no masks, and the statistics the paper leaves out.
//
// Bytes sent per rank and step (ring factors of common/comm/process_group.h; S = 4·B·T·C, the
// bytes of one (B,T,C) activation):
//   per block  2 all_reduces forward (g after attn.c_proj and mlp.c_proj) and 2 backward (f before
//              c_attn and c_fc): 4 · 2(t-1)/t·S
//   embedding  g of the vocab-parallel lookup: 2(t-1)/t·S
//   head       f before the vocab-parallel LM head: 2(t-1)/t·S in the backward; the cross-entropy's
//              all_reduces of the row maxima (B·T floats) and of the sums of exponentials and the
//              target logit (2·B·T): 2(t-1)/t·4·3BT
//   TP total   (4L + 2)·2(t-1)/t·S + 2(t-1)/t·12BT
//   SP         the same: every all_reduce becomes a reduce_scatter plus an all_gather, (t-1)/t·S
//              each; plus, on a group of its own, the backward re-gather of ln_1 and ln_2 per
//              block (2L·(t-1)/t·S), and the all_reduce of the replicated parameters' gradients,
//              which each rank computed from its own rows only: 2(t-1)/t·4·Ψ_repl,
//              Ψ_repl = ctx·C + 6LC + 2C (wpe, the LayerNorms, the two c_proj biases per block).
//
// Collective calls per rank and step (latency: every call pays a start-up, whatever its size), read
// off the walk (common/nn: attention.cc, mlp.cc, gpt_embed_head.cc; unit_runner.cc). A group of
// one rank still counts each call (common/comm/process_group.cc), so these hold at t = 1 too,
// except the cross-entropy's, which a rank holding the whole vocabulary does not make:
//   per block  TP: g forward after attn.c_proj and mlp.c_proj, f backward before c_attn and c_fc:
//              4 all_reduces (f forward, g backward: identity, no call). SP: f and g each become
//              one collective both ways (all_gather / reduce_scatter): 8.
//   embedding  g: 1 (TP: forward all_reduce); SP: 2 (reduce_scatter forward, all_gather backward)
//   head       f before the LM head: 1 (TP: backward all_reduce); SP: 2. The cross-entropy runs
//              over the B·T rows in chunks of R = max(1, min(BT, ⌊2^22/(V/t)⌋)) rows (the logits
//              chunk of gpt_embed_head.cc; the CPU kernels' 2^22, a GPU's is 2^28), each with
//              2 all_reduces (row max, Σ exp and target logit) when t > 1: X = 2⌈BT/R⌉; at
//              t = 1 the row max and Σ exp are one pass and nothing is reduced: X = 0
//   TP total   4L + 2 + X
//   SP total   8L + 4 + X on the tp group, + 2L re-gathers (ln_1, ln_2, backward) + 1
//              all_reduce of the replicated gradients: 10L + 5 + X
//   full recomputation: each block's forward runs once more: + 2L (TP), + 4L (SP); with ZeRO-R
//              Pa (TP, t > 1) one all_gather per segment of k blocks: + ⌈L/k⌉.
//
// Glossary: s = T sequence, b = B batch, h = C channels, a = H heads, L layers, V vocab,
// ctx max T, t tensor-parallel ranks, Ψ_r parameters per rank, S bytes of a (B,T,C) f32 tensor.
#pragma once

#include <cstdint>

namespace llmp {

/// The model's dimensions the formulas need.
struct TpModelDims {
  int64_t V, ctx, L, C, H;
};

/// Ψ_r = VC/t + ctx·C + L·(12C²/t + 7C/t + 6C) + 2C: the sharded parameters (wte's V/t rows,
/// c_attn, c_fc and both c_proj weights, the column-parallel biases) plus the replicated ones.
double tp_params_per_rank(const TpModelDims& d, int t);

/// Ψ_repl = ctx·C + 6LC + 2C: the parameters every tensor-parallel rank holds whole.
double tp_replicated_params(const TpModelDims& d);

/// Activation bytes one block keeps for its backward (table above), B sequences of T tokens.
double tp_activation_bytes_per_block(const TpModelDims& d, int64_t B, int64_t T, int t,
                                     bool sequence_parallel);

/// Bytes a rank sends per training step over the tensor-parallel group (TP and SP alike):
/// (4L + 2)·2(t-1)/t·eBTC + 2(t-1)/t·12BT, e bytes per activation element (4 in fp32, 2 under
/// --precision bf16/fp16; the cross-entropy's row statistics stay fp32: 12BT).
double tp_bytes_per_step(const TpModelDims& d, int64_t B, int64_t T, int t, int e = 4);

/// What full recomputation adds to the tp group (TP and SP alike): each block's forward runs again
/// with its two g's (all_reduce, or SP's all_gather + reduce_scatter pairs): 4L·(t-1)/t·eBTC.
/// Selective recomputation adds nothing (attention's probabilities are local to a rank's heads).
double tp_recompute_bytes_per_step(const TpModelDims& d, int64_t B, int64_t T, int t, int e = 4);

/// Collective calls a rank makes per training step, summed over its groups (tp, re-gather,
/// replicated gradients, Pa's checkpoints), by the count above: 4L + 2 + X (TP) or
/// 10L + 5 + X (SP), X = 2⌈BT/R⌉ for t > 1 (0 at t = 1), R = max(1, min(BT, ⌊2^22/(V/t)⌋))
/// rows per cross-entropy chunk; plus 2L (TP) or 4L (SP) under full recomputation, and ⌈L/k⌉
/// with Pa (TP, full, t > 1), k = recompute_every. A count, not bytes.
double tp_collective_calls_per_step(const TpModelDims& d, int64_t B, int64_t T, int t,
                                    bool sequence_parallel, bool full_recompute = false,
                                    int recompute_every = 1, bool partition_checkpoints = false);

/// Sequence parallelism's backward re-gather of ln_1 and ln_2: 2L·(t-1)/t·eBTC.
double sp_regather_bytes_per_step(const TpModelDims& d, int64_t B, int64_t T, int t, int e = 4);

/// Sequence parallelism's all_reduce of the replicated gradients: 2(t-1)/t·e·Ψ_repl, e bytes per
/// gradient element (2 under mixed precision).
double sp_replicated_grad_bytes_per_step(const TpModelDims& d, int t, int e = 4);

}  // namespace llmp
