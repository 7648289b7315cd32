// GPT-2-architecture decoder with explicit forward and backward per layer (no autograd).
//
//   x = wte[tokens] + wpe[0..T)                                   embeddings        unit 0
//   for l in 0..L:  x = x + attn(ln_1(x));  x = x + mlp(ln_2(x))   pre-LN blocks     units 1..L
//   logits = ln_f(x) @ wte^T;  loss = cross_entropy(logits, y)     head (tied wte)   unit L+1
//
// Radford et al. 2019 (GPT-2), with the tied LM head of Press & Wolf 2017; the layer math follows
// llm.c's train_gpt2.c. attn is causal multi-head self-attention, mlp is C -> 4C -> GELU(tanh) -> C.
//
// Parameters live in ONE flat f32 buffer of Ψ elements, ordered unit by unit (GPTLayout). That is
// what makes data-parallel sharding a slice (ZeRO), a unit a contiguous range (ZeRO-3 / FSDP units,
// DDP buckets) and a pipeline stage a range of units.
//
// Glossary: B batch (sequences), T sequence length (≤ ctx), C channels (d), H heads, hs = C/H,
// V vocab, L layers, Ψ parameter count. Weights are stored (in, out) row-major: y = x @ W + b.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/tensor/tensor.h"

namespace llmp {

/// Model hyper-parameters. Presets: "tiny" (tests), "mini" (default, ~0.83M parameters), "gpt2"
/// (124M, for GPUs).
struct GPTConfig {
  std::string name = "mini";
  int vocab = 256;   ///< V
  int ctx = 64;      ///< maximum T (rows of wpe)
  int layers = 4;    ///< L
  int d = 128;       ///< C
  int heads = 4;     ///< H, divides C

  /// tiny: L=2 C=32 H=2 T=16 V=256.  mini: L=4 C=128 H=4 T=64 V=256 (834,304 parameters).
  /// gpt2: L=12 C=768 H=12 T=1024 V=50257 (124,439,808 parameters).
  /// Throws std::invalid_argument("unknown model preset 'x' (expected tiny, mini or gpt2)").
  static GPTConfig preset(const std::string& name);
};

/// One named parameter: a (shape) block at `offset` elements into the flat buffer.
struct ParamSpec {
  std::string name;             ///< GPT-2 names: "wte.weight", "h.0.attn.c_attn.weight", ...
  std::vector<int64_t> shape;   ///< (in, out) for weights
  int64_t offset = 0;           ///< elements from the start of the flat buffer
  int64_t numel = 0;
  int unit = 0;                 ///< 0 embeddings, 1..L blocks, L+1 final LayerNorm
};

/// Where every parameter sits in the flat buffer. Units are contiguous and in order.
///   unit 0     : wte.weight (V,C), wpe.weight (ctx,C)
///   unit 1+l   : h.l.ln_1.{weight,bias} (C), h.l.attn.c_attn.{weight (C,3C), bias (3C)},
///                h.l.attn.c_proj.{weight (C,C), bias (C)}, h.l.ln_2.{weight,bias} (C),
///                h.l.mlp.c_fc.{weight (C,4C), bias (4C)}, h.l.mlp.c_proj.{weight (4C,C), bias (C)}
///   unit L+1   : ln_f.{weight,bias} (C)
class GPTLayout {
 public:
  explicit GPTLayout(const GPTConfig& cfg);
  const std::vector<ParamSpec>& params() const { return params_; }
  int64_t num_params() const { return total_; }  ///< Ψ
  int num_units() const { return static_cast<int>(unit_offset_.size()); }  ///< L + 2
  int64_t unit_offset(int u) const { return unit_offset_.at(u); }
  int64_t unit_numel(int u) const { return unit_numel_.at(u); }
  /// Throws std::out_of_range naming `name` when absent.
  const ParamSpec& find(const std::string& name) const;

 private:
  std::vector<ParamSpec> params_;
  std::vector<int64_t> unit_offset_, unit_numel_;
  int64_t total_ = 0;
};

/// What one block's forward keeps for its backward. All tensors are counted as activations.
struct BlockCache {
  Tensor ln1, ln1_mean, ln1_rstd;  ///< (B,T,C), (B,T), (B,T)
  Tensor qkv;                      ///< (B,T,3C)
  Tensor att;                      ///< (B,H,T,T) softmax probabilities
  Tensor atty;                     ///< (B,T,C) attention output before c_proj
  Tensor res1;                     ///< (B,T,C) x + attn(...)
  Tensor ln2, ln2_mean, ln2_rstd;  ///< (B,T,C), (B,T), (B,T)
  Tensor fch, fch_gelu;            ///< (B,T,4C)
  int B = 0, T = 0;
};

class GPT {
 public:
  explicit GPT(GPTConfig cfg);
  const GPTConfig& config() const { return cfg_; }
  const GPTLayout& layout() const { return layout_; }

  /// GPT-2 initialisation, a pure function of `seed`: weights N(0, 0.02) (c_proj weights
  /// N(0, 0.02/sqrt(2L))), biases 0, LayerNorm weights 1. params: Ψ floats.
  void init_params(float* params, uint64_t seed) const;

  // ---- Unit-level API (pipeline stages, ZeRO-3 units, DDP/ZeRO-2 gradient hooks). ----
  // `*_params` point at the unit's first element in a flat layout (params + unit_offset(u));
  // `*_grads` likewise. Backward ACCUMULATES (+=) into grads and OVERWRITES dx.

  /// x_out (B,T,C) = wte[tokens] + wpe[t]. tokens (B,T) in [0,V).
  void embed_forward(const float* emb_params, const int32_t* tokens, int B, int T, float* x_out) const;
  /// emb_grads (unit 0 layout) += scatter of dx (B,T,C) into wte rows and wpe rows.
  void embed_backward(const int32_t* tokens, int B, int T, const float* dx, float* emb_grads) const;

  /// x_out (B,T,C) = block(x_in (B,T,C)); fills `cache` (allocates its tensors) for backward.
  void block_forward(const float* block_params, const float* x_in, int B, int T, float* x_out,
                     BlockCache* cache) const;
  /// dx_in (B,T,C) from dx_out (B,T,C); block_grads += dL/dparams. x_in is needed for ln_1's backward.
  void block_backward(const float* block_params, const float* x_in, const BlockCache& cache,
                      const float* dx_out, float* dx_in, float* block_grads) const;

  /// Final LayerNorm, tied LM head and cross-entropy, forward and (when dx != nullptr) backward,
  /// fused as in llm.c. Returns loss_scale · Σ_{b,t} -log softmax(logits[b,t])[targets[b,t]].
  /// With dx: dx (B,T,C) = d(returned value)/dx, lnf_grads += ..., wte_grads (V,C) += ... .
  /// Data parallelism passes loss_scale = 1/(global B·T) so that summing ranks' gradients gives the
  /// gradient of the global mean loss exactly.
  double head_forward_backward(const float* lnf_params, const float* wte, const float* x,
                               const int32_t* targets, int B, int T, float loss_scale, float* dx,
                               float* lnf_grads, float* wte_grads) const;

  // ---- Whole-model convenience (baseline, naive DP, DDP). ----

  /// Forward and backward over tokens/targets (B,T); grads (Ψ) += d(loss_scale·Σ loss)/dparams.
  /// on_unit_ready(u) is called as soon as unit u's gradients are final, in the order
  /// L+1, L, ..., 1, 0 (unit 0 last: the tied wte gets its head gradient first, its embedding
  /// gradient last). Returns loss_scale · Σ loss.
  double forward_backward(const float* params, float* grads, const int32_t* tokens,
                          const int32_t* targets, int B, int T, float loss_scale,
                          const std::function<void(int unit)>& on_unit_ready = {}) const;

  /// Mean cross-entropy (nats per token) without gradients.
  double forward_loss(const float* params, const int32_t* tokens, const int32_t* targets, int B,
                      int T) const;

 private:
  GPTConfig cfg_;
  GPTLayout layout_;
};

}  // namespace llmp
