// One pre-LN transformer block: the attention sub-layer, then the MLP sub-layer (sublayer.h),
// forward and backward (GPT::block_forward / block_backward / block_backward_input / _weight).
//
//   res1  = x    + attn(ln_1(x))        attention.cc
//   x_out = res1 + mlp(ln_2(res1))      mlp.cc, or moe.cc in a mixture-of-experts block
//
// The backward exists once, as two halves per sub-layer: the input gradient (B) and the weight
// gradient (W) of zero-bubble pipelines (Qi et al. 2024, §2). block_backward runs them sub-layer
// by sub-layer (MLP B, MLP W, attention B, attention W), so that the MLP's kept gradients are
// freed before the attention's are made; block_backward_input runs both Bs and keeps what the
// Ws need, block_backward_weight runs both Ws later. Each weight gradient gets the same single
// "+=" either way, so the two orders give bit-identical gradients. Radford et al. 2019 (GPT-2).
//
// What B keeps for W, per token (t = 1; zero_bubble's memory cost): dy and dfch of the MLP
// (C + 4C), dln2 (C), dres1 (C), dqkv (3C), dln1 (C): 11C, while B frees qkv, att and fch
// (7C + H·T), which only B needed.
//
// Glossary: B batch, T sequence, C channels, H heads, LN LayerNorm.
#include <stdexcept>

#include "common/nn/gpt.h"
#include "common/nn/sublayer.h"
#include "common/nn/tiled_linear.h"

namespace llmp {

int64_t BlockCache::bytes() const {
  int64_t n = res1.nbytes();
  for (const Tensor* t :
       {&attn.ln1,  &attn.ln1_mean, &attn.ln1_rstd, &attn.qkv,     &attn.att,     &attn.lse,
        &attn.atty, &attn.keep.a,   &attn.keep.b,   &mlp.ln2,      &mlp.ln2_mean, &mlp.ln2_rstd,
        &mlp.fch,   &mlp.fch_gelu,  &moe.ln2,       &moe.ln2_mean, &moe.ln2_rstd, &moe.x,
        &moe.fch,   &moe.fch_gelu,  &moe.yg,        &moe.gates})
    n += t->nbytes();
  return n;
}

namespace {
// The block's parameters: the whole unit, or under tiling its rest (weights from the tiles).
BlockParams<const float> unit_params(const float* unit, const BlockShape& s, WeightTiles* tiles) {
  return tiles ? block_rest_params(unit, s) : block_params(unit, s);
}

void check_filled(const BlockCache& c, const char* fn) {
  if (!c.filled() || !(c.mlp.fch.defined() || c.moe.fch.defined()))
    throw std::invalid_argument(std::string(fn) +
                                ": the cache was not filled by block_forward (or was used)");
}
}  // namespace

GPT GPT::with_weight_tiles(WeightTiles* tiles) const {
  if (tiles && device_ != Device::kCPU)
    throw std::invalid_argument("GPT::with_weight_tiles: the model runs on " +
                                std::string(to_string(device_)) + "; weight tiles are host memory");
  GPT tiled = *this;
  tiled.tiles_ = tiles;
  return tiled;
}

Tensor GPT::block_forward(int layer, const float* block_params_ptr, const Tensor& x, int B,
                          int T, BlockCache* cache) const {
  const BlockShape& s = block_shape();
  const auto p = unit_params(block_params_ptr, s, tiles_);
  *cache = BlockCache{};  // release what the cache held before allocating anew (lower peak)
  const ScoresKept kept = cfg_.attention == AttentionMethod::kFlash   ? ScoresKept::kLse
                          : cfg_.recompute == Recompute::kSelective ? ScoresKept::kNone
                                                                    : ScoresKept::kProbs;
  const int Tr = core_ ? T / core_->shards() : T;  // the rows of a sequence c_attn multiplies
  cache->res1 =
      attention_forward(s, *tp_, p, x, B, Tr, &cache->attn, kept, tiles_, core_);
  if (cfg_.is_moe_block(layer))
    return moe_forward(cfg_, s, *moe_, block_params_ptr, cache->res1, B, Tr, &cache->moe);
  return mlp_forward(s, *tp_, p, cache->res1, B, Tr, &cache->mlp, tiles_);
}

Tensor GPT::block_backward(int layer, const float* block_params_ptr, const Tensor& x,
                           BlockCache* cache, const Tensor& dy, float* block_grads) const {
  check_filled(*cache, "block_backward");
  const BlockShape& s = block_shape();
  const auto p = unit_params(block_params_ptr, s, tiles_);
  const auto g = block_params(block_grads, s);
  Tensor dres1;
  if (cfg_.is_moe_block(layer)) {
    MoeGrads keep;
    dres1 = moe_backward_input(cfg_, s, *moe_, block_params_ptr, cache->res1, &cache->moe, dy,
                               &keep);
    moe_backward_weight(cfg_, s, *moe_, cache->res1, cache->moe, keep, block_grads);
  } else {
    SublayerGrads keep;
    dres1 = mlp_backward_input(s, *tp_, p, cache->res1, &cache->mlp, dy, &keep, tiles_);
    mlp_backward_weight(s, *tp_, cache->res1, cache->mlp, keep, g);
  }
  cache->mlp = MlpCache{};
  cache->moe = MoeCache{};
  SublayerGrads keep;
  Tensor dx =
      attention_backward_input(s, *tp_, p, x, &cache->attn, dres1, &keep, tiles_, core_);
  attention_backward_weight(s, *tp_, x, cache->attn, keep, g);
  *cache = BlockCache{};  // this block's activations are no longer needed
  return dx;
}

Tensor GPT::block_backward_input(int layer, const float* block_params_ptr, const Tensor& x,
                                 BlockCache* cache, const Tensor& dy, BlockGradCache* keep) const {
  check_filled(*cache, "block_backward_input");
  const BlockShape& s = block_shape();
  const auto p = unit_params(block_params_ptr, s, tiles_);
  const Tensor dres1 =
      cfg_.is_moe_block(layer)
          ? moe_backward_input(cfg_, s, *moe_, block_params_ptr, cache->res1, &cache->moe, dy,
                               &keep->moe)
          : mlp_backward_input(s, *tp_, p, cache->res1, &cache->mlp, dy, &keep->mlp, tiles_);
  return attention_backward_input(s, *tp_, p, x, &cache->attn, dres1, &keep->attn, tiles_,
                                  core_);
}

void GPT::block_backward_weight(int layer, const float* block_params_ptr, const Tensor& x,
                                const BlockCache& cache, const BlockGradCache& keep,
                                float* block_grads) const {
  (void)block_params_ptr;  // W needs no weight: the kept activations and gradients
  if (!keep.filled())
    throw std::invalid_argument("block_backward_weight: B (block_backward_input) has not run");
  const BlockShape& s = block_shape();
  const auto g = block_params(block_grads, s);
  if (cfg_.is_moe_block(layer))
    moe_backward_weight(cfg_, s, *moe_, cache.res1, cache.moe, keep.moe, block_grads);
  else
    mlp_backward_weight(s, *tp_, cache.res1, cache.mlp, keep.mlp, g);
  attention_backward_weight(s, *tp_, x, cache.attn, keep.attn, g);
}

}  // namespace llmp
