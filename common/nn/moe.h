// The mixture-of-experts MLP sub-layer (the MLP seam of sublayer.h): a router and E expert MLPs,
// each token sent to k of them, with the experts spread over the ep ranks of an expert-parallel
// group and the tokens moved to them and back by two all_to_alls (GShard, Lepikhin et al. 2020,
// §2.2-2.3 and Figure 3; Switch Transformer, Fedus et al. 2021, §2; Shazeer et al. 2017).
//
//   forward                                                shapes on one rank (n = B·T tokens)
//   ln2   = LN(res1; ln_2)                                 (n,C)
//   z     = ln2 @ W_router                                 (n,C) @ (C,E) -> (n,E)
//   route: top-k experts, gates, slots (moe_routing.h)     cap = ⌈k·T·c/E⌉ per sequence
//   D[e][g][s] = ln2[t]  for each kept assignment (t→e)   (E,G,cap,C) dispatch, zeros elsewhere
//   X = all_to_all(D)        chunk j (experts of rank j)  (ep, E/ep, G, cap, C): from every rank
//   Y_e = gelu(X_e @ W_fc,e + b_fc,e) @ W_proj,e + b_proj,e   for each expert e held, over its
//                                                          M = ep·G·cap rows (padding slots too)
//   Yd = all_to_all(Y)       back to the tokens' ranks    (E,G,cap,C)
//   Yg[t][j] = Yd[e_j][g][s_j] (zeros when dropped)        (n,k,C) row copies
//   out[t] = res1[t] + g(t) @ Yg[t]                        (1,k) @ (k,C): Σ_j g_j(t)·Yg[t][j]
//
// The backward mirrors it: dYd[e][g][s] = g_j·dout[t] goes to the experts by all_to_all, the
// experts' backward gives dX, all_to_all brings it back, dln2 gathers it per token plus the
// router's path (dgate_j = dout[t]·Yd[...], route_backward, z's matmul), then LayerNorm's.
// Per MoE block and step: 4 all_to_alls of E·G·cap·C floats each, sending (ep-1)/ep of it.
//
// Every slot of the fixed-size buffers is computed (GShard's static shapes): an empty slot is a
// zero row that no token reads, so it adds nothing to any gradient but does cost FLOPs; the
// experts multiply E·G·cap ≈ c·k·n rows, c times the k·n that carry tokens.
//
// On one rank (ExpertComm::none(), the baseline) the all_to_alls are copies and the same code runs
// with every expert local: the rows an expert multiplies are the same, in the same order (global
// sequence order), as on ep ranks, which is what makes the expert-parallel stage match it.
//
// On a device (Device::kCUDA) the math runs through kernel_ops(x.device()) and the activations
// never leave it: the routing reads the router logits on the host (4·n·E bytes down, the gates
// 4·n·k up), the backward sends dgate down and dlogits up, and the token permutations are row
// copies on the device (moe.cc).
//
// Glossary: B sequences on this rank, T sequence length, n = B·T, C channels, E experts, k experts
// per token, c capacity factor, G = B token groups (one per sequence), cap slots per expert per
// group, ep expert-parallel ranks, E/ep experts held, M = ep·G·cap rows per held expert.
#pragma once

#include <cstdint>
#include <vector>

#include "common/nn/block_params.h"
#include "common/nn/moe_routing.h"
#include "common/tensor/tensor.h"

namespace llmp {

struct GPTConfig;  // gpt.h

/// The expert-parallel group as the MoE layer sees it (an interface, so that common/nn needs no
/// communication library; common/moe/expert_parallel_comm.h implements it over a ProcessGroup).
class ExpertComm {
 public:
  virtual ~ExpertComm() = default;
  virtual int size() const { return 1; }  ///< ep
  virtual int rank() const { return 0; }
  /// all_to_all: `in` is ep equal chunks along its first dimension, chunk j goes to rank j;
  /// returns a tensor of in's shape whose chunk i came from rank i. One rank: a copy.
  ///                                                              sends (ep-1)/ep · bytes(in)
  virtual Tensor all_to_all(const Tensor& in);
  /// One rank, no communication: the baseline's.
  static ExpertComm& none();
};

/// What the MoE layers did since reset(): routing statistics for the report.
struct MoeStats {
  std::vector<int64_t> routed;  ///< (E) token assignments chosen per expert, over all MoE blocks
  std::vector<int64_t> kept;    ///< (E) of which got a slot
  std::vector<int64_t> first;   ///< (E) tokens whose first choice e_1 is e (f_e's counts)
  int64_t assignments = 0;      ///< Σ routed: n·k per MoE block forward
  int64_t dropped = 0;          ///< assignments over capacity
  double aux_sum = 0;           ///< Σ over MoE blocks and sequences of E·Σ_e f_e·P_e
  int64_t aux_terms = 0;        ///< how many (block, sequence) terms aux_sum holds
  double z_sum = 0;             ///< Σ over MoE blocks and tokens of lse² (the router z-loss)
  int64_t forwards = 0;         ///< MoE block forwards run
  void reset(int E);
};

/// The state the MoE blocks of one GPT share: the expert-parallel group, the load-balancing
/// loss's weight for the current walk, and the statistics. A GPT with experts owns one (gpt.h).
class MoeContext {
 public:
  MoeContext(int experts, ExpertComm* comm);
  ExpertComm& comm() const { return *comm_; }
  /// Set by the walk (unit_runner.h) before each forward: the loss's scale per token
  /// (1/(global B·T) in training), so that α·mean over the global batch's sequences of the
  /// load-balancing loss has weight α·loss_scale·T per sequence.
  void set_loss_scale(float s) { loss_scale_ = s; }
  float loss_scale() const { return loss_scale_; }
  MoeStats& stats() { return stats_; }
  const MoeStats& stats() const { return stats_; }
  /// Set by the walk around a full recomputation's forwards (unit_runner.cc): the routing runs
  /// again, to the same result, and is not counted again in stats().
  void set_recomputing(bool on) { recomputing_ = on; }
  bool recomputing() const { return recomputing_; }

 private:
  ExpertComm* comm_;
  float loss_scale_ = 0;
  MoeStats stats_;
  bool recomputing_ = false;
};

/// A MoE block's router and held experts, inside its unit after ln_2 (block_params.h).
template <typename F>
struct MoeParams {
  F* router;                 ///< (C,E)
  struct Expert { F *fc_w, *fc_b, *proj_w, *proj_b; };  ///< (C,4C), (4C), (4C,C), (C)
  std::vector<Expert> experts;  ///< the E/ep held, in order
};
/// The pointers of a MoE block unit starting at `unit` (the whole unit, kMoeSharedParams first).
template <typename F>
MoeParams<F> moe_params(F* unit, const BlockShape& s, int experts, int held) {
  int64_t off = 0;
  for (size_t i = 0; i < kMoeSharedParams; ++i)
    off += dim_size(kBlockParams[i].rows, s) * dim_size(kBlockParams[i].cols, s);
  MoeParams<F> p;
  p.router = unit + off;
  off += static_cast<int64_t>(s.C) * experts;
  const int64_t fc = static_cast<int64_t>(s.C) * s.ffn;
  for (int e = 0; e < held; ++e) {
    F* b = unit + off;
    p.experts.push_back({b, b + fc, b + fc + s.ffn, b + 2 * fc + s.ffn});
    off += 2 * fc + s.ffn + s.C;
  }
  return p;
}

/// What the MoE sub-layer's forward keeps for its backward (all kActivations Tensors, but for
/// the routing's index vectors: n·k ints and floats, outside the MemoryTracker).
struct MoeCache {
  Tensor ln2, ln2_mean, ln2_rstd;  ///< (B,T,C), (B,T), (B,T)
  Routing routing;
  Tensor x;                        ///< (E/ep, M, C) the rows each held expert multiplied
  Tensor fch, fch_gelu;            ///< (E/ep, M, 4C)
  Tensor yg;                       ///< (n,k,C) the experts' outputs per assignment (0: dropped)
  Tensor gates;                    ///< (n,k) the routing's gates on the activations' device
  std::vector<int32_t> slots;      ///< (n·k) each assignment's dispatch-buffer row, −1 dropped
  Tensor slots_on_device;          ///< the same on a device (u8, 4·n·k bytes); undefined on the CPU
  bool filled() const { return x.defined(); }
};

/// What the input-gradient pass keeps for the weight-gradient pass.
struct MoeGrads {
  Tensor dy;       ///< (B,T,C) the block's output gradient (every expert's c_proj bias is per row)
  Tensor dyx;      ///< (E/ep, M, C) the held experts' output gradients
  Tensor dfch;     ///< (E/ep, M, 4C) their c_fc output gradients
  Tensor dlogits;  ///< (B,T,E) the router's output gradient
  Tensor dln;      ///< (B,T,C) ln_2's output gradient
};

/// out (B,T,C) = res1 + moe(ln_2(res1)); fills `c` anew. `unit`: the block's whole unit.
/// Collective over the context's expert-parallel group (2 all_to_alls).
Tensor moe_forward(const GPTConfig& cfg, const BlockShape& s, MoeContext& ctx, const float* unit,
                   const Tensor& res1, int B, int T, MoeCache* c);
/// B: dL/dres1 (B,T,C) from dout; keeps W's inputs in `keep`; frees c->fch. Collective (2).
Tensor moe_backward_input(const GPTConfig& cfg, const BlockShape& s, MoeContext& ctx,
                          const float* unit, const Tensor& res1, MoeCache* c, const Tensor& dout,
                          MoeGrads* keep);
/// W: ln_2, router and held experts' gradients += ... (ACCUMULATED into the unit's gradients).
void moe_backward_weight(const GPTConfig& cfg, const BlockShape& s, MoeContext& ctx,
                         const Tensor& res1, const MoeCache& c, const MoeGrads& keep,
                         float* unit_grads);

}  // namespace llmp
