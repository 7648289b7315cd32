// GPT-2-architecture decoder with explicit forward and backward per layer (no autograd).
//
//   x = wte[tokens] + wpe[0..T)                                   embeddings        unit 0
//   for l in 0..L:  x = x + attn(ln_1(x));  x = x + mlp(ln_2(x))   pre-LN blocks     units 1..L
//   logits = ln_f(x) @ wte^T;  loss = cross_entropy(logits, y)     head (tied wte)   unit L+1
//
// Radford et al. 2019 (GPT-2), with the tied LM head of Press & Wolf 2017; the layer math follows
// llm.c's train_gpt2.c. attn is causal multi-head self-attention, mlp is C -> 4C -> GELU(tanh) -> C.
//
// One class, every stage. A GPT object is the model as ONE RANK runs it: the whole model (the
// default), or, given a tensor-parallel TpComm (tp_comm.h), that rank's slice of it: H/t heads,
// an MLP of width 4C/t, V/t rows of wte (Megatron-LM, Shoeybi et al. 2019, §3). The slice runs
// the same code with smaller shapes (block_params.h), and its layout() lists its local tensors.
//
// Parameters live in ONE flat f32 buffer, ordered unit by unit (GPTLayout). That is what makes
// data-parallel sharding a slice (ZeRO), a unit a contiguous range (ZeRO-3 / FSDP units, DDP
// buckets) and a pipeline stage a range of units. The walk over the units (embed, blocks, head,
// and back), with the hooks each stage changes, is unit_runner.h.
//
// Glossary: B batch (sequences), T sequence length (≤ ctx), C channels (d), H heads, hs = C/H,
// V vocab, L layers, Ψ parameter count, t tensor-parallel ranks, r this rank, s sequence shards
// (tp_comm.h), Tl = T/s positions held. Weights are stored (in, out) row-major: y = x @ W + b.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/nn/attention_core.h"
#include "common/nn/flash_attention.h"
#include "common/nn/block_params.h"
#include "common/nn/moe.h"
#include "common/nn/recompute.h"
#include "common/nn/tp_comm.h"
#include "common/tensor/tensor.h"

namespace llmp {

class WeightTiles;  // tiled_linear.h

/// Model hyper-parameters. Presets: "tiny" (tests), "mini" (default, ~0.83M parameters), "gpt2"
/// (124M, for GPUs).
struct GPTConfig {
  std::string name = "mini";
  int vocab = 256;   ///< V
  int ctx = 64;      ///< maximum T (rows of wpe)
  int layers = 4;    ///< L
  int d = 128;       ///< C
  int heads = 4;     ///< H, divides C
  /// wte's rows are V rounded up to a multiple of this (Megatron-LM's
  /// --make-vocab-size-divisible-by; nanoGPT and llm.c pad GPT-2's 50,257 to 50,304): 1, the
  /// default, pads nothing. A layout of the run, not part of the model: the pad rows are zero,
  /// their logits are masked out of the softmax (gpt_embed_head.cc), so their gradients are
  /// exactly zero and they stay zero; checkpoints hold the V real rows only, so a padded and an
  /// unpadded run load each other's files and train the same model. What it buys: tensor
  /// parallelism over a vocabulary t does not divide (GPT-2's 50,257 is 29·1,733), and on a GPU
  /// aligned logits rows (cuBLAS ran the head's forward product 2.3× faster in TF32 and 4.5× in
  /// bf16 at 50,304 than at 50,257 on an H100: tools/gpu_gemm_probe.py, README "On a GPU").
  int vocab_divisible_by = 1;
  /// Vp, wte's rows: V rounded up to a multiple of vocab_divisible_by.
  int padded_vocab() const {
    const int m = vocab_divisible_by > 0 ? vocab_divisible_by : 1;
    return (vocab + m - 1) / m * m;
  }
  /// How the walk trades compute for activation memory (recompute.h); not part of the model's
  /// math or its checkpoints: every policy gives bit-identical results.
  Recompute recompute = Recompute::kNone;
  /// With kFull: keep the input of every k-th block only (1: every block's input).
  int recompute_every = 1;
  /// How whole-sequence attention runs (flash_attention.h): materialized (P kept) or flash (an
  /// online softmax, lse kept). Not part of the model: results agree to rounding.
  AttentionMethod attention = AttentionMethod::kMaterialized;
  /// With kFull and tensor parallelism: ZeRO-R's Pa, each kept block input split over the
  /// tensor-parallel group and all-gathered before its recomputation (tp_comm.h).
  bool partition_checkpoints = false;
  /// With kFull on a device: ZeRO-R's Pa+cpu (Rajbhandari et al. 2020, §6.1; DeepSpeed's
  /// cpu_checkpointing): each kept block input (its 1/t part under partition_checkpoints) is
  /// copied to host memory after its block's forward and back to the device right before the
  /// recomputation that needs it, so the device holds no checkpoint between the two; the
  /// results are bit-identical (unit_runner.cc). Nothing on the CPU: the checkpoints are there.
  bool cpu_checkpoints = false;

  // ---- Mixture of experts (moe.h). experts = 0: every block has the dense MLP. ----
  int experts = 0;               ///< E expert MLPs (each C -> 4C -> C) in every MoE block
  int top_k = 1;                 ///< k experts per token: 1 Switch, 2 GShard (gates renormalised)
  int moe_every = 1;             ///< block l is MoE when (l+1) % moe_every == 0 (2: GLaM's half)
  double capacity_factor = 1.25; ///< c: ⌈k·T·c/E⌉ slots per expert per sequence (moe_routing.h)
  double aux_loss_coef = 0.01;   ///< α: the loss is CE + α·Σ_MoE-blocks mean_seq(E·Σ_e f_e·P_e)
  double z_loss_coef = 0;        ///< β: + β·Σ_MoE-blocks mean_token(lse²), ST-MoE's z-loss; 0 off
  /// Whether block l's MLP is a mixture of experts.
  bool is_moe_block(int l) const { return experts > 0 && (l + 1) % moe_every == 0; }
  /// Number of MoE blocks: ⌊L / moe_every⌋ (0 for a dense model).
  int moe_blocks() const { return experts > 0 ? layers / moe_every : 0; }

  /// tiny: L=2 C=32 H=2 T=16 V=256.  mini: L=4 C=128 H=4 T=64 V=256 (834,304 parameters).
  /// gpt2: L=12 C=768 H=12 T=1024 V=50257 (124,439,808 parameters).
  /// moe-tiny: tiny with block 1 a mixture of E=4 experts, top-2, c=1 (drops tokens), α=0.01.
  /// moe-mini: mini with blocks 1 and 3 mixtures of E=8 experts, top-1 (Switch), c=1.25,
  /// α=0.01 (2,680,320 parameters; each token through one 4C-wide MLP per block as in mini,
  /// plus the router, while the experts multiply every capacity slot: E·⌈T·c/E⌉ rows per
  /// sequence of T, 1.25× the MoE blocks' MLP FLOPs; moe.h).
  /// Throws std::invalid_argument("unknown model preset 'x' (expected tiny, mini, gpt2,
  /// moe-tiny or moe-mini)").
  static GPTConfig preset(const std::string& name);
};

/// One named parameter: a (shape) block at `offset` elements into the flat buffer.
struct ParamSpec {
  std::string name;             ///< GPT-2 names: "wte.weight", "h.0.attn.c_attn.weight", ...
  std::vector<int64_t> shape;   ///< this rank's shape, (in, out) for weights
  int64_t offset = 0;           ///< elements from the start of this rank's flat buffer
  int64_t numel = 0;
  int unit = 0;                 ///< 0 embeddings, 1..L blocks, L+1 final LayerNorm
  Split split = Split::kReplicated;    ///< how tensor parallelism splits the whole tensor
  std::vector<int64_t> global_shape;   ///< the whole model's shape (= shape when t = 1)
  int64_t global_offset = 0;           ///< offset in the whole model's flat buffer (t = 1)
  /// Rows at the end of this rank's tensor that pad the vocabulary (GPTConfig::
  /// vocab_divisible_by): zero, never trained, not in checkpoints. Only wte has any.
  int64_t pad_rows = 0;
};

/// Where every parameter of one rank sits in its flat buffer. Units are contiguous and in order.
///   unit 0     : wte.weight (Vp/t,C) (rows [r·Vp/t, (r+1)·Vp/t): vocab-parallel; Vp the padded
///                vocabulary, = V unless GPTConfig::vocab_divisible_by pads it), wpe.weight (ctx,C)
///   unit 1+l   : block l's 12 tensors in kBlockParams order, shaped by BlockShape
///   unit L+1   : ln_f.{weight,bias} (C)
/// With t = 1 (the default) this is the whole model: Ψ = (Vp + ctx)·C + L·(12C² + 13C) + 2C.
/// A tensor-parallel rank holds Ψ_r = Vp·C/t + ctx·C + L·(12C²/t + 7C/t + 6C) + 2C.
class GPTLayout {
 public:
  /// Throws std::invalid_argument naming the values when the config is invalid, or when t does not
  /// divide H, 4C and Vp ("tensor-parallel size 3 does not divide H=4, 4C=512 and V=256 ..."),
  /// or when vocab_divisible_by < 1.
  /// With experts (GPTConfig::experts > 0) and ep_size > 1: rank ep_rank of the expert-parallel
  /// group, holding experts [ep_rank·E/ep, (ep_rank+1)·E/ep) of each MoE block (kExpertParams)
  /// and every other tensor whole. Throws std::invalid_argument naming the values when ep does
  /// not divide E, or when a mixture of experts is given t > 1 or invalid E, k, c.
  explicit GPTLayout(const GPTConfig& cfg, int tp_size = 1, int tp_rank = 0, int ep_size = 1,
                     int ep_rank = 0);
  const std::vector<ParamSpec>& params() const { return params_; }
  int64_t num_params() const { return total_; }  ///< Ψ (t = 1) or Ψ_r
  int num_units() const { return static_cast<int>(unit_offset_.size()); }  ///< L + 2
  int64_t unit_offset(int u) const { return unit_offset_.at(u); }
  int64_t unit_numel(int u) const { return unit_numel_.at(u); }
  /// Throws std::out_of_range naming `name` when absent.
  const ParamSpec& find(const std::string& name) const;
  int tp_size() const { return tp_size_; }
  int tp_rank() const { return tp_rank_; }
  int ep_size() const { return ep_size_; }
  int ep_rank() const { return ep_rank_; }
  const BlockShape& block_shape() const { return shape_; }

  /// Copies this rank's part of the whole model's flat buffer `full` (t = 1 layout, Ψ floats)
  /// into its own buffer `local` (num_params() floats).
  void copy_from_full(const float* full, float* local) const;
  /// The reverse: writes this rank's tensors into their places in `full`. Replicated tensors are
  /// written whole; together the t ranks' calls fill all of `full`.
  void copy_to_full(const float* local, float* full) const;

 private:
  std::vector<ParamSpec> params_;
  std::vector<int64_t> unit_offset_, unit_numel_;
  int64_t total_ = 0;
  int tp_size_ = 1, tp_rank_ = 0, ep_size_ = 1, ep_rank_ = 0;
  BlockShape shape_;
};

/// What the attention sub-layer's forward keeps for its backward (attention.h).
struct AttentionCache {
  Tensor ln1, ln1_mean, ln1_rstd;  ///< (B,Tl,C), (B,Tl), (B,Tl): ln_1(x), this rank's rows
  Tensor qkv;                      ///< (B,T,qkv) this rank's heads' q|k|v
  Tensor att;                      ///< (B,H/t,T,T) softmax probabilities
  Tensor lse;                      ///< (B,H/t,T) flash attention's instead of att
  Tensor atty;                     ///< (B,T,attn) attention output before c_proj
  AttentionKeep keep;              ///< an AttentionCore's instead of att (attention_core.h)
};

/// What the MLP sub-layer's forward keeps for its backward (mlp.h).
struct MlpCache {
  Tensor ln2, ln2_mean, ln2_rstd;  ///< (B,Tl,C), (B,Tl), (B,Tl)
  Tensor fch, fch_gelu;            ///< (B,T,ffn) before and after GELU
};

/// What one block's forward keeps for its backward. All tensors are counted as activations.
/// The block's input x is kept by the caller (the walk keeps the residual stream).
struct BlockCache {
  AttentionCache attn;
  Tensor res1;  ///< (B,Tl,C) x + attn(ln_1(x)): the MLP sub-layer's input
  MlpCache mlp;
  MoeCache moe;  ///< instead of mlp in a mixture-of-experts block (moe.h)
  bool filled() const { return res1.defined(); }
  /// Bytes of the tensors held now (views of one storage counted once per tensor).
  int64_t bytes() const;
};

/// A sub-layer's output gradients kept by the input-gradient pass (B) for the weight-gradient
/// pass (W) of a zero-bubble backward (Qi et al. 2024, §2).
struct SublayerGrads {
  Tensor dy;       ///< (B,Tl,C) the sub-layer's output gradient: its c_proj bias gradient
  Tensor dy_full;  ///< (B,T,C) the same, whole sequences (= dy unless sequence parallel)
  Tensor dhidden;  ///< (B,T,qkv) dqkv, or (B,T,ffn) dfch: the c_attn / c_fc output gradient
  Tensor dln;      ///< (B,Tl,C) the LayerNorm output gradient, summed over the tp group
};

/// B's kept gradients of both sub-layers of a block.
struct BlockGradCache {
  SublayerGrads attn, mlp;
  MoeGrads moe;  ///< instead of mlp in a mixture-of-experts block
  bool filled() const { return attn.dln.defined(); }
};

class GPT {
 public:
  /// The whole model (tp = TpComm::none()), or this rank's tensor-parallel slice of it. `tp` must
  /// outlive the GPT. Throws std::invalid_argument as GPTLayout does.
  /// `activations`: the dtype the activations are stored in, f32 (the default) or, for mixed
  /// precision, f16 / bf16 (computed in fp32, stored rounded: f32_view.h); throws
  /// std::invalid_argument for another.
  explicit GPT(GPTConfig cfg, TpComm& tp = TpComm::none(), DType activations = DType::kF32);
  const GPTConfig& config() const { return cfg_; }
  const GPTLayout& layout() const { return layout_; }
  const BlockShape& block_shape() const { return layout_.block_shape(); }
  /// The activations' storage dtype (f32, f16 or bf16).
  DType activation_dtype() const { return act_dtype_; }
  /// First row of wte this rank holds, and how many (0 and Vp on one rank; Vp = V unpadded).
  int vocab_begin() const { return layout_.tp_rank() * vocab_rows(); }
  int vocab_rows() const { return cfg_.padded_vocab() / layout_.tp_size(); }
  /// The last rows of this rank's vocab_rows() that pad the vocabulary (rows ≥ V), 0 unpadded.
  int vocab_pad_rows() const {
    return static_cast<int>(layout_.params().front().pad_rows);
  }
  /// s: the sequence shards of the residual stream (tp_comm.h): t under sequence parallelism,
  /// else 1. Activations between units are (B, T/s, C).
  int seq_shards() const { return tp_->seq_shards(); }

  /// GPT-2 initialisation, a pure function of `seed`: weights N(0, 0.02) (c_proj weights
  /// N(0, 0.02/sqrt(2L))), biases 0, LayerNorm weights 1. params: layout().num_params() floats,
  /// this rank's part of the whole model's initialisation.
  void init_params(float* params, uint64_t seed) const;

  /// This model with its blocks' four large linears read tile by tile from `tiles` (memory-
  /// centric tiling, ZeRO-Infinity §5.1.3; tiled_linear.h): block_forward / block_backward /
  /// block_backward_input then take a block's rest (block_rest_params: its LayerNorms and biases,
  /// 13C elements) where they took the whole unit. Bit-identical to the untiled model. `tiles`
  /// must outlive the copy; nullptr gives the untiled model.
  GPT with_weight_tiles(WeightTiles* tiles) const;
  /// The tile source (nullptr: whole weights from the unit, the default).
  WeightTiles* weight_tiles() const { return tiles_; }

  /// This model with every sequence split over the core's p ranks for the whole model (context
  /// parallelism, attention_core.h): each rank holds the rows core->positions(T) of every
  /// sequence (Tl = T/p), embeds, normalises, multiplies and scores only those, and the blocks'
  /// attention runs through `core`. Bit-for-bit the same per-token math; attention's sums in the
  /// core's order. `core` must outlive the copy; nullptr gives the whole-sequence model. Throws
  /// std::invalid_argument when this model is tensor-parallel or tiled (one split at a time), or
  /// on a device with a core whose supports_device() is false.
  GPT with_attention_core(AttentionCore* core) const;
  /// The attention core (nullptr: whole sequences on this rank, the default).
  AttentionCore* attention_core() const { return core_; }

  /// This model with the experts of its MoE blocks spread over `comm`'s ep ranks (expert
  /// parallelism, moe.h): its layout holds experts [r·E/ep, (r+1)·E/ep) of each MoE block, and
  /// the blocks move tokens to them and back by all_to_all. A fresh MoeContext (statistics).
  /// `comm` must outlive the copy. Throws std::invalid_argument when the model has no experts
  /// or ep does not divide E.
  GPT with_expert_comm(ExpertComm* comm) const;
  /// The MoE blocks' shared state (routing statistics, the load-balancing loss's weight);
  /// nullptr for a dense model.
  MoeContext* moe() const { return moe_.get(); }
  /// This model walked on `device`: every `*_params` / `*_grads` pointer given to its unit
  /// functions is memory of that device, its activations are allocated there, and its math runs
  /// through that device's kernels (kernel_ops(device), kernels/ops/kernel_ops.h). The token and
  /// target ids stay host arrays (they are checked there) and are copied to the device per call.
  /// Throws std::invalid_argument for a device other than the CPU when the model is tiled, or
  /// context-parallel with a core that is host-only (AttentionCore::supports_device(): Ulysses
  /// runs on a device; its rows' ids and positions are copied up per call, 4(B·Tl + Tl) bytes).
  /// A mixture of experts runs on a device with its routing on the host (moe.h: the router
  /// logits down, the gates up per MoE block).
  GPT with_device(Device device) const;
  /// Where the walk runs (Device::kCPU unless with_device said otherwise).
  Device device() const { return device_; }

  // ---- Unit functions: what the walk (unit_runner.h) calls. `*_params` point at the unit's
  // first element in this rank's layout; `*_grads` likewise. Backward ACCUMULATES (+=) into grads
  // and returns a new input gradient. Activations are Tensors of this rank's rows (B,Tl,C). ----

  /// x (B,Tl,C) = wte[tokens] + wpe[t]. tokens (B,T) in [0,V): every rank reads all of them.
  Tensor embed_forward(const float* emb_params, const int32_t* tokens, int B, int T) const;
  /// emb_grads (unit 0 layout) += scatter of dx (B,Tl,C) into wte rows and wpe rows.
  void embed_backward(const int32_t* tokens, int B, int T, const Tensor& dx, float* emb_grads) const;

  /// block(x) (B,Tl,C); fills `cache` (allocates its tensors anew) for the backward.
  /// `layer`: l, which says whether the block's MLP is dense or a mixture of experts.
  Tensor block_forward(int layer, const float* block_params, const Tensor& x, int B, int T,
                       BlockCache* cache) const;
  /// dL/dx (B,Tl,C) from dy (B,Tl,C); block_grads += dL/dparams. Frees the cache's tensors.
  /// Exactly block_backward_input followed by block_backward_weight, sub-layer by sub-layer.
  Tensor block_backward(int layer, const float* block_params, const Tensor& x, BlockCache* cache,
                        const Tensor& dy, float* block_grads) const;
  /// B of a zero-bubble backward: dL/dx only; keeps in `keep` what W needs, and frees the parts
  /// of the cache W does not need (qkv, att, fch).
  Tensor block_backward_input(int layer, const float* block_params, const Tensor& x,
                              BlockCache* cache, const Tensor& dy, BlockGradCache* keep) const;
  /// W: block_grads += dL/dparams from the forward's cache and B's kept gradients.
  void block_backward_weight(int layer, const float* block_params, const Tensor& x,
                             const BlockCache& cache, const BlockGradCache& keep,
                             float* block_grads) const;

  /// ZeRO-R's Pa (TpComm::partition_checkpoint): this rank's 1/t of a block input kept for
  /// recomputation, and the whole (B,Tl,C) again from the parts. Identity on one rank and under
  /// sequence parallelism.
  Tensor partition_checkpoint(const Tensor& x) const { return tp_->partition_checkpoint(x); }
  Tensor gather_checkpoint(const Tensor& part, const std::vector<int64_t>& shape) const {
    return tp_->gather_checkpoint(part, shape);
  }

  /// Final LayerNorm, tied LM head and cross-entropy, forward and (when dx != nullptr) backward,
  /// fused as in llm.c. x (B,Tl,C); wte: this rank's rows (V/t,C). Returns
  /// loss_scale · Σ_{b,t} -log softmax(logits[b,t])[targets[b,t]] over all B·T tokens (the same
  /// on every tp rank). With dx: *dx (B,Tl,C) = d(returned value)/dx, lnf_grads += ...,
  /// wte_grads (V/t,C) += ... . Data parallelism passes loss_scale = 1/(global B·T) so that
  /// summing ranks' gradients gives the gradient of the global mean loss exactly.
  double head_forward_backward(const float* lnf_params, const float* wte, const Tensor& x,
                               const int32_t* targets, int B, int T, float loss_scale, Tensor* dx,
                               float* lnf_grads, float* wte_grads) const;

 private:
  /// The first position of each sequence this rank holds: r·T/t under sequence parallelism, else 0.
  int first_position(int T) const {
    const int s = tp_->seq_shards();
    return s > 1 ? tp_->rank() * (T / s) : 0;
  }

  /// ids (B,T) -> the (B,Tl) ids at this rank's positions (context parallelism).
  std::vector<int32_t> ids_held(const int32_t* ids, int B, int T) const;

  GPTConfig cfg_;
  TpComm* tp_;
  GPTLayout layout_;
  DType act_dtype_ = DType::kF32;
  WeightTiles* tiles_ = nullptr;
  AttentionCore* core_ = nullptr;
  Device device_ = Device::kCPU;
  std::shared_ptr<MoeContext> moe_;  // with experts only
};

}  // namespace llmp
