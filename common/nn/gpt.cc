// The GPT object: its configuration, its tensor-parallel group and its layout (see gpt.h).
//
// Weight layout, for anyone reading or writing a checkpoint. Ψ f32 values in one flat buffer,
// unit by unit (GPTLayout::params() gives each tensor's name, shape and offset). Names are those
// of Hugging Face's GPT-2 state_dict without the "transformer." prefix; every weight is stored
// (in, out) row-major and used as y = x @ W + b, which is also how HF's Conv1D stores GPT-2, so
// an HF checkpoint maps tensor for tensor without transposes.
//
//   unit  name                          shape       role
//   0     wte.weight                    (V, C)      token embedding; also the LM head (tied):
//                                                   logits = ln_f(x) @ wteᵀ  (no lm_head tensor)
//   0     wpe.weight                    (ctx, C)    position embedding
//   1+l   h.l.ln_1.weight / .bias       (C)         LayerNorm before attention
//   1+l   h.l.attn.c_attn.weight        (C, 3C)     fused q|k|v projection; columns [0,C) q,
//         h.l.attn.c_attn.bias          (3C)        [C,2C) k, [2C,3C) v; head h: cols h·hs..
//   1+l   h.l.attn.c_proj.weight / .bias (C, C) (C) attention output projection
//   1+l   h.l.ln_2.weight / .bias       (C)         LayerNorm before the MLP
//   1+l   h.l.mlp.c_fc.weight / .bias   (C, 4C) (4C) MLP up-projection, then GELU (tanh)
//   1+l   h.l.mlp.c_proj.weight / .bias (4C, C) (C) MLP down-projection
//   L+1   ln_f.weight / .bias           (C)         final LayerNorm
// A mixture-of-experts block (GPTConfig::is_moe_block, moe.h) has instead of its two mlp tensors
//   1+l   h.l.mlp.router.weight         (C, E)      the router (no bias)
//   1+l   h.l.mlp.experts.e.c_fc.* / .c_proj.*      expert e's MLP, shaped as the dense one
//
// A tensor-parallel rank holds the same names with the shapes of block_params.h; checkpoints
// always hold the whole model (GPTLayout::copy_to_full). Gradients use the same layout.
// Activations (BlockCache, the residual stream per layer, dx, logits) are Tensors counted as
// MemCategory::kActivations. Radford et al. 2019; llm.c.
//
// Glossary: B batch, T sequence, C channels, V vocab, ctx max T, L layers, hs = C/H, Ψ parameters.
#include "common/nn/gpt.h"

#include <stdexcept>
#include <string>
#include <utility>

namespace llmp {

GPT::GPT(GPTConfig cfg, TpComm& tp, DType activations)
    : cfg_(std::move(cfg)), tp_(&tp), layout_(cfg_, tp.size(), tp.rank()), act_dtype_(activations) {
  if (activations != DType::kF32 && activations != DType::kF16 && activations != DType::kBF16)
    throw std::invalid_argument(std::string("GPT: activations in ") + to_string(activations) +
                                " (expected f32, f16 or bf16)");
  if (cfg_.recompute_every < 1 ||
      (cfg_.recompute_every > 1 && cfg_.recompute != Recompute::kFull))
    throw std::invalid_argument("GPT: recompute_every " + std::to_string(cfg_.recompute_every) +
                                " with recompute " + to_string(cfg_.recompute) +
                                " (k >= 1; k > 1 needs full recomputation)");
  if (cfg_.experts > 0) moe_ = std::make_shared<MoeContext>(cfg_.experts, &ExpertComm::none());
}

GPT GPT::with_expert_comm(ExpertComm* comm) const {
  if (cfg_.experts == 0)
    throw std::invalid_argument("GPT::with_expert_comm: model '" + cfg_.name + "' has no experts");
  if (tiles_ || core_)
    throw std::invalid_argument("GPT::with_expert_comm: the model is already " +
                                std::string(tiles_ ? "tiled" : "context-parallel"));
  if (!comm) comm = &ExpertComm::none();
  GPT split = *this;
  split.layout_ = GPTLayout(cfg_, tp_->size(), tp_->rank(), comm->size(), comm->rank());
  split.moe_ = std::make_shared<MoeContext>(cfg_.experts, comm);
  return split;
}

GPT GPT::with_attention_core(AttentionCore* core) const {
  if (core && cfg_.experts > 0)
    throw std::invalid_argument("GPT::with_attention_core: a mixture of experts routes whole "
                                "sequences (its token groups); context parallelism splits them");
  if (core && (tp_->size() > 1 || tiles_))
    throw std::invalid_argument("GPT::with_attention_core: the model is already " +
                                std::string(tiles_ ? "tiled" : "tensor-parallel") +
                                " (context parallelism splits whole replicas only)");
  if (core && cfg_.attention == AttentionMethod::kFlash)
    throw std::invalid_argument("GPT::with_attention_core: --attention flash is the whole-sequence "
                                "attention; the " + core->name() + " core attends its own way");
  if (core && device_ != Device::kCPU && !core->supports_device())
    throw std::invalid_argument("GPT::with_attention_core: the model runs on " +
                                std::string(to_string(device_)) + "; the " + core->name() +
                                " core runs on the CPU only so far");
  GPT split = *this;
  split.core_ = core;
  return split;
}

GPT GPT::with_device(Device device) const {
  // A mixture of experts runs on a device too: its routing copies the router logits to the
  // host and its token permutations are device copies (moe.cc).
  // A context-parallel model too, when its core takes device tensors (Ulysses).
  if (device != Device::kCPU && (tiles_ || (core_ && !core_->supports_device())))
    throw std::invalid_argument(
        std::string("GPT::with_device(") + to_string(device) + "): the model is " +
        (tiles_ ? "tiled" : "context-parallel with a host-only core (" + core_->name() + ")") +
        ", whose walk keeps host-side state");
  GPT moved = *this;
  moved.device_ = device;
  return moved;
}

std::vector<int32_t> GPT::ids_held(const int32_t* ids, int B, int T) const {
  const std::vector<int> pos = core_->positions(T);
  const int Tl = static_cast<int>(pos.size());
  std::vector<int32_t> held(static_cast<size_t>(B) * Tl);
  for (int b = 0; b < B; ++b)
    for (int j = 0; j < Tl; ++j) held[static_cast<size_t>(b) * Tl + j] = ids[int64_t{b} * T + pos[j]];
  return held;
}

}  // namespace llmp
