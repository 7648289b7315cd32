// Closed forms for activation recomputation: the activation bytes a block keeps for its backward
// under each policy (common/nn/recompute.h), and the forward FLOPs recomputation adds per walk.
// Written from the model's tensor list, not from the code, so that what the walk measures
// (MemoryTracker bytes, the kernels' FLOP counter) is checked against them.
//
// Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models",
// Table 2, in 16-bit bytes with dropout, per block; this model keeps no dropout masks and no
// pre-softmax scores, keeps its four LayerNorm statistics in fp32, and stores activations in
// e bytes (4 in fp32; 2 in bf16/fp16 mixed precision, common/nn/f32_view.h):
//
//   policy            paper (16-bit)        this model, e = 4 (fp32)      e = 2 (bf16 / fp16)
//   none              sbh(34 + 5as/h)       sbh(64 + 4as/h) + 16sb        sbh(32 + 2as/h) + 16sb
//   selective         34sbh                 64sbh + 16sb                  32sbh + 16sb
//   full              2sbh                  4sbh                          2sbh
//   full, every k     -                     ⌈L/k⌉/L · 4sbh (average)      ⌈L/k⌉/L · 2sbh
//   full + Pa (TP)    -                     ⌈L/k⌉/L · 4sbh/t              ⌈L/k⌉/L · 2sbh/t
//   none, flash       -                     sbh(64 + 4a/h) + 16sb         sbh(32 + 4a/h) + 16sb
//
// The tensors per token and block (tp_formulas.h derives the same list under tensor parallelism):
// the block's output x_{l+1} (the next block's stored input), ln_1(x), res1 and ln_2(res1) (h each),
// qkv (3h), atty (h), fc and GELU(fc) (4h each): 16h elements of e bytes; mean and rstd of both
// LayerNorms: 4 fp32; the softmax probabilities of the a heads: a·s elements. Selective
// recomputation drops the last; flash attention keeps instead the fp32 log-sum-exp of each row
// (4a bytes per token); full recomputation keeps only the output (= the next input). With
// every k, a range of L blocks keeps the outputs that are inputs of checkpointed blocks (l % k = 0)
// and its last output: ⌈L/k⌉ of them.
//
// Recomputed FLOPs per walk of L blocks (the kernels' counting convention, kernels/cpu/flops.h:
// 2 per multiply-add, attention's Q Kᵀ on the full square and P V on the causal triangle):
//   full (any k)   L · [2N·h·(3h + h + 4h + 4h) + b·a·(2s²·hs + s(s+1)·hs)],  N = b·s
//                  = L · (24Nh² + 2bs²h + bs(s+1)h): every block's forward once more
//   selective      L · b·a·2s²·hs = L · 2bs²h: Q Kᵀ again (P V is not needed, only P)
//   full, flash    L · (24Nh² + 3bs²h): the blockwise kernels (kernels/cpu/attention_block.h)
//                  count Q Kᵀ and P V on 3 of the 4 (s/2)² chunk squares each
//
// Glossary: s = T sequence, b = B sequences, h = C channels, a = H heads, hs = h/a, L blocks,
// e bytes per stored activation element, k blocks per checkpointed segment.
#pragma once

#include <cstdint>

#include "common/nn/recompute.h"

namespace llmp {

/// One walk's dimensions: b sequences of s tokens through L blocks of width h with a heads, on a
/// rank of t tensor-parallel ranks (sp: with sequence parallelism, common/plan/tp_formulas.h).
struct RecomputeDims {
  int64_t b, s, h, a, L;
  int64_t t = 1;
  bool sp = false;
  bool partitioned = false;  ///< ZeRO-R Pa: full recomputation's kept inputs split over t (not SP)
  bool flash = false;  ///< flash attention (common/nn/flash_attention.h): lse (4a bytes) for P
};

/// Activation bytes kept per block on average (table above) with e-byte activations. `every` is
/// k for kFull (1: every block's input), ignored otherwise. Under tensor parallelism the
/// per-rank tensors (qkv, atty, fc, GELU(fc), the probabilities) are divided by t, and with
/// sequence parallelism the others too (Korthikanti et al. 2022, Table 2's TP and TP+SP rows).
double activation_bytes_per_block(const RecomputeDims& d, Recompute policy, int every, int e);

/// The forward FLOPs recomputation adds to one walk of d.L blocks (kNone: 0); every product of a
/// tensor-parallel rank is 1/t of the whole (its heads, its columns, all N rows).
double recomputed_flops_per_walk(const RecomputeDims& d, Recompute policy);

/// Activation bytes one mixture-of-experts block (common/nn/moe.h) keeps for its backward under
/// kNone or kSelective (kFull: its input, as a dense block), per rank of b sequences of s tokens
/// (t = 1): per token the block output, ln_1, res1 and ln_2 (4h), qkv and atty (4h) in e bytes and
/// the four LayerNorm statistics (16 bytes); the probabilities as a dense block's (none: e·a·s,
/// flash: the fp32 lse 4a, selective: none); the experts' rows, c_fc outputs and GELU outputs
/// ((1 + 4 + 4)h per slot, E·cap slots per sequence: 9eh·E·cap/s per token); the experts' outputs
/// gathered per assignment Yg (e·k·h) and the fp32 gates (4k):
///   e·8h + 16 + probs + 9eh·E·cap/s + e·k·h + 4k   bytes per token.
double moe_block_activation_bytes(const RecomputeDims& d, Recompute policy, int e, int64_t E,
                                  int64_t k, int64_t cap);

/// One mixture-of-experts block's forward FLOPs (common/nn/moe.h) on b sequences of s tokens, the
/// FLOPs full recomputation runs again for it: attention's two linear layers 8Nh² and its
/// products (as the dense block's), the router 2NhE, the experts' rows, every slot of the static
/// buffer whether it holds a token or not, E·b·cap rows through C → 4C → C (16h² each; the
/// same on any ep: E/ep experts each multiply ep·b·cap rows), and the combine 2Nkh. N = b·s;
/// cap slots per expert and sequence (moe_routing.h expert_capacity).
double moe_block_forward_flops(int64_t b, int64_t s, int64_t h, int64_t E, int64_t k,
                               int64_t cap, bool flash = false);

/// The text of the closed form activation_bytes_per_block evaluates, e.g. "sbh(64+4as/h)+16sb".
/// With `flash`, the text of the flash attention's row (none): "sbh(64+4a/h)+16sb".
const char* activation_formula_text(Recompute policy, int every, int e, bool flash = false);

}  // namespace llmp
