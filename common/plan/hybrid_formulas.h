// Closed forms for one rank of 3D parallelism: data × pipeline × tensor parallelism with ZeRO
// over the data-parallel group (Narayanan et al. 2021, "Efficient Large-Scale Language Model
// Training on GPU Clusters Using Megatron-LM", §2-3; Rajbhandari et al. 2020 for ZeRO).
// Written from the model's tensor list and the collectives' ring factors, not from the code, so
// that the hybrid stage's measurements (stages/hybrid_3d) and the planner (tools/plan) are
// checked against the same numbers.
//
// The model on a rank: its tensor-parallel slice (tp_formulas.h: H/t heads, 4C/t MLP columns,
// V/t rows of wte; the rest replicated), cut into p·v virtual stages of k = L/(p·v) blocks
// (gpt_partition.h). Virtual stage s = c·p + r is chunk c of pipeline rank r; s = 0 adds the
// embeddings (unit 0), s = p·v-1 the final LayerNorm (unit L+1); with p > 1 the last stage's rank
// keeps a copy of its wte rows for the tied head. Elements of each unit on a tensor-parallel rank:
//
//   unit 0      V·C/t + ctx·C          (wte rows, wpe)
//   block       12C²/t + 7C/t + 6C     (c_attn, c_fc, both c_proj: /t; their biases 7C/t split,
//                                       4C LayerNorms + 2C row-parallel biases replicated)
//   unit L+1    2C                     (ln_f)
//   wte copy    V·C/t                  (p > 1, on the rank of the last virtual stage)
//
// Ψ_r is the sum over the rank's units. Per rank and step, with b = B_dp/m sequences per
// micro-batch (B_dp = B/dp, the replica's share of the global batch B), e bytes per activation
// element, g bytes per gradient element, a = one (b, T/s, C) activation = e·b·(T/s)·C bytes
// (s = t under sequence parallelism, else 1) and A = e·b·T·C:
//
//   memory   parameters        p_b·Ψ_r                         (p_b bytes per parameter)
//            gradients         g·Ψ_r                           ZeRO-1 (ZeRO-2: g·⌈Ψ_r/dp⌉ + a
//                                                               unit's transient, see below)
//            optimizer state   K·⌈Ψ_r/dp⌉                      ZeRO-1 and ZeRO-2
//            activations       k·act_block per micro-batch and chunk (recompute_formulas.h with
//                              t and sp), kept from its forward to its backward
//   traffic  tp group          m·Σ_chunks [ (4k + [s = 0] + [s = last])·2(t-1)/t·A
//                                           + [s = last]·2(t-1)/t·4·3bT ]
//                              (4 all_reduces per block: g after both c_proj forward, f before
//                              c_attn and c_fc backward; the embedding's g; the head's f; the
//                              cross-entropy's max and sums in fp32. Sequence parallelism
//                              replaces each all_reduce by a reduce_scatter + all_gather pair,
//                              the same bytes.) Full recomputation adds each block's two g's
//                              again: m·v·k·2·2(t-1)/t·A.
//            re-gather (SP)    m·v·k·2·(t-1)/t·A               (ln_1, ln_2 outputs again in bwd)
//            replicated grads  2(t-1)/t·g·Ψ_repl,r (SP only; Ψ_repl,r = 6C per block held, ctx·C
//                              on the first stage, 2C on the last); ZeRO-2 all-reduces them on
//                              the shards, Ψ_repl,r/dp per dp rank on average (the planner's
//                              figure; each rank's share depends on the layout's order)
//            pp group          sends·a, sends = m·Σ_chunks([s ≠ last] + [s ≠ 0])
//            embedding group   g·V·C/t on the first and the last stage's ranks (p > 1): the
//                              all_reduce of the two wte copies' gradients over 2 ranks
//            dp group          ZeRO-1: reduce_scatter of the gradients + all_gather of the
//                              parameters: (dp-1)/dp·(g + p_b)·Ψ_r
//                              ZeRO-2 under a pipeline: every micro-batch's gradients are
//                              reduce-scattered as they are produced (the accumulation moves to
//                              the shards), except the D_r elements of the tied wte's holders
//                              (p > 1: unit 0 on the first stage, the wte copy on the last),
//                              summed whole and reduce-scattered once after the embedding pair's
//                              all_reduce: (dp-1)/dp·g·(m·(Ψ_r - D_r) + D_r) + (dp-1)/dp·p_b·Ψ_r,
//                              one bucket per micro-batch: m + [D_r > 0] + 1 calls
//
// Glossary: B global batch, dp/pp(p)/tp(t) the grid, m micro-batches, v chunks per rank, k blocks
// per virtual stage, r pipeline rank, L layers, C channels, H heads, V vocab, T sequence, ctx
// max T, Ψ_r parameters held by the rank, K optimizer bytes per parameter (8 fp32 Adam, 12
// mixed precision with fp32 master weights), e/g/p_b bytes per activation/gradient/parameter.
#pragma once

#include <cstdint>
#include <vector>

#include "common/nn/recompute.h"
#include "common/plan/tp_formulas.h"

namespace llmp {

/// The 3D grid and the pipeline's shape.
struct HybridShape {
  int dp = 1, pp = 1, tp = 1;
  int m = 1;                 ///< micro-batches per step (per data-parallel replica)
  int v = 1;                 ///< chunks per pipeline rank (interleaved 1F1B when > 1)
  bool sp = false;           ///< Megatron sequence parallelism inside each stage
  int zero = 1;              ///< ZeRO stage over the dp group: 1 or 2 (0: plain all_reduce)
  Recompute recompute = Recompute::kNone;
  int recompute_every = 1;
  bool flash = false;        ///< flash attention: a block keeps lse, not P (recompute_formulas.h)
};

/// Bytes per element of each kind (fp32 on the CPU: 4, 4, 4, K = 8).
struct HybridPrecision {
  double param = 4, grad = 4, act = 4, K = 8;
  static HybridPrecision fp32() { return {}; }
  /// bf16/fp16 parameters and activations, fp32 gradients (a pipeline's m micro-batches add into
  /// them: Megatron-LM's main_grad, common/pipeline/pipeline_strategy.h), fp32 master weights
  /// with m and v (K = 12): what hybrid_3d trains with under --precision bf16 / fp16.
  static HybridPrecision mixed() { return {2, 4, 2, 12}; }
};

/// Everything the closed forms say about one rank (pipeline rank r; every tensor-parallel and
/// data-parallel rank of a stage is alike). Bytes unless named otherwise.
struct HybridRankPlan {
  int64_t psi_r = 0;          ///< Ψ_r, parameters held (elements)
  int64_t psi_repl_r = 0;     ///< the replicated ones among them (elements)
  int64_t shard = 0;          ///< ⌈Ψ_r/dp⌉ (elements)
  double params = 0, grads = 0, optimizer = 0;
  double activations_per_microbatch = 0;  ///< one (micro-batch, chunk): k blocks
  double tp = 0, regather = 0, repl_grads = 0, pp = 0, emb = 0, dp = 0;
  int sends = 0;              ///< point-to-point messages sent per step
  /// Collective calls per step on each group (messages in the latency sense).
  int tp_calls = 0, dp_calls = 0, emb_calls = 0;
  double total_sent() const { return tp + regather + repl_grads + pp + emb + dp; }
};

/// The closed forms above for pipeline rank r of `s`, model `d`, global batch B of T tokens.
/// Throws std::invalid_argument naming the values when the grid does not fit the model
/// (t ∤ H, 4C or V; L not divisible by p·v; B not divisible by dp·m; T not divisible by t under
/// SP).
HybridRankPlan hybrid_rank_plan(const TpModelDims& d, const HybridShape& s, int r, int64_t B,
                                int64_t T, const HybridPrecision& prec = HybridPrecision::fp32());

/// The same for every pipeline rank, r = 0..p-1.
std::vector<HybridRankPlan> hybrid_plan(const TpModelDims& d, const HybridShape& s, int64_t B,
                                        int64_t T,
                                        const HybridPrecision& prec = HybridPrecision::fp32());

}  // namespace llmp
