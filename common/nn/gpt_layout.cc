// Model presets and the flat parameter layout of the GPT (GPTConfig::preset, GPTLayout), for the
// whole model or one tensor-parallel rank's slice of it.
//
// Ψ = (V + ctx)·C            unit 0      wte, wpe
//   + L·(12C² + 13C)         units 1..L  ln_1, c_attn (C,3C)+3C, attn.c_proj C²+C, ln_2,
//                                         c_fc (C,4C)+4C, mlp.c_proj (4C,C)+C
//   + 2C                     unit L+1    ln_f
// mini (V=256 ctx=64 C=128 L=4): 40,960 + 4·198,272 + 256 = 834,304.
// gpt2 (V=50257 ctx=1024 C=768 L=12): 124,439,808, the "124M" of Radford et al. 2019.
// Rank r of t tensor-parallel ranks (block_params.h has the table of splits):
//   Ψ_r = VC/t + ctx·C + L·(12C²/t + 7C/t + 6C) + 2C
// A padded vocabulary (GPTConfig::vocab_divisible_by) puts Vp = V rounded up in place of V:
// gpt2 padded to a multiple of 128 has 50,304 rows of wte, 36,096 more parameters (all zero).
//
// A mixture-of-experts block (block_params.h, kExpertParams) holds 4C² + 8C + CE + E·(8C² + 5C);
// rank r of ep expert-parallel ranks holds experts [r·E/ep, (r+1)·E/ep) of it.
//
// Glossary: V vocab, ctx context length, C channels, L layers, H heads, Ψ parameter count,
// t tensor-parallel ranks, r rank, E experts, ep expert-parallel ranks.
#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#include "common/nn/block_params.h"
#include "common/nn/gpt.h"

namespace llmp {

GPTConfig GPTConfig::preset(const std::string& name) {
  GPTConfig c;
  c.name = name;
  if (name == "tiny") {
    c.vocab = 256, c.ctx = 16, c.layers = 2, c.d = 32, c.heads = 2;
  } else if (name == "mini") {
    c.vocab = 256, c.ctx = 64, c.layers = 4, c.d = 128, c.heads = 4;
  } else if (name == "gpt2") {
    c.vocab = 50257, c.ctx = 1024, c.layers = 12, c.d = 768, c.heads = 12;
  } else if (name == "moe-tiny") {
    c = preset("tiny");
    c.experts = 4, c.top_k = 2, c.moe_every = 2, c.capacity_factor = 1.0;
  } else if (name == "moe-mini") {
    c = preset("mini");
    c.experts = 8, c.top_k = 1, c.moe_every = 2, c.capacity_factor = 1.25;
  } else {
    throw std::invalid_argument("unknown model preset '" + name +
                                "' (expected tiny, mini, gpt2, moe-tiny or moe-mini)");
  }
  c.name = name;
  return c;
}

namespace {
std::string str(int64_t v) { return std::to_string(v); }

BlockShape shape_for(const GPTConfig& cfg, int t) {
  BlockShape s;
  s.C = cfg.d;
  s.head_size = cfg.d / cfg.heads;
  s.heads = cfg.heads / t;
  s.ffn = 4 * cfg.d / t;
  return s;
}
}  // namespace

GPTLayout::GPTLayout(const GPTConfig& cfg, int t, int r, int ep, int ep_rank)
    : tp_size_(t), tp_rank_(r), ep_size_(ep), ep_rank_(ep_rank) {
  if (cfg.vocab <= 0 || cfg.ctx <= 0 || cfg.layers < 0 || cfg.d <= 0 || cfg.heads <= 0 ||
      cfg.d % cfg.heads != 0)
    throw std::invalid_argument("invalid GPT config '" + cfg.name + "': V=" + str(cfg.vocab) +
                                " ctx=" + str(cfg.ctx) + " L=" + str(cfg.layers) +
                                " C=" + str(cfg.d) + " H=" + str(cfg.heads) +
                                " (H must divide C)");
  if (cfg.vocab_divisible_by < 1)
    throw std::invalid_argument("vocab_divisible_by " + str(cfg.vocab_divisible_by) + " of '" +
                                cfg.name + "' must be at least 1 (1: no padding)");
  const int Vp = cfg.padded_vocab();
  if (t < 1 || r < 0 || r >= t || cfg.heads % t != 0 || (4 * cfg.d) % t != 0 || Vp % t != 0)
    throw std::invalid_argument(
        "tensor-parallel size " + str(t) + " (rank " + str(r) + ") does not divide H=" +
        str(cfg.heads) + ", 4C=" + str(4 * cfg.d) + " and V=" + str(cfg.vocab) +
        (Vp == cfg.vocab ? "" : " padded to " + str(Vp)) +
        (Vp % t != 0 && t > 1 ? " (pad the vocabulary: --make_vocab_size_divisible_by " +
                                    str(t) + " or a multiple of it)"
                              : ""));
  if (cfg.experts > 0) {
    if (cfg.moe_every < 1 || cfg.top_k < 1 || cfg.top_k > cfg.experts || !(cfg.capacity_factor > 0))
      throw std::invalid_argument("invalid mixture of experts in '" + cfg.name + "': experts=" +
                                  str(cfg.experts) + " top_k=" + str(cfg.top_k) + " moe_every=" +
                                  str(cfg.moe_every) + " capacity_factor=" +
                                  std::to_string(cfg.capacity_factor));
    if (t != 1)
      throw std::invalid_argument("a mixture of experts is not split by tensor parallelism (t=" +
                                  str(t) + ")");
  }
  if (ep < 1 || ep_rank < 0 || ep_rank >= ep ||
      (ep > 1 && (cfg.experts == 0 || cfg.experts % ep != 0)))
    throw std::invalid_argument("expert-parallel size " + str(ep) + " (rank " + str(ep_rank) +
                                ") does not divide experts=" + str(cfg.experts));
  shape_ = shape_for(cfg, t);
  const BlockShape whole = shape_for(cfg, 1);
  const int64_t C = cfg.d;
  int64_t global = 0;
  auto add = [&](std::string name, std::vector<int64_t> shape, std::vector<int64_t> gshape,
                 Split split, int unit) {
    ParamSpec p;
    p.name = std::move(name);
    p.numel = shape_numel(shape);
    p.shape = std::move(shape);
    p.global_shape = std::move(gshape);
    p.split = split;
    p.offset = total_;
    p.global_offset = global;
    p.unit = unit;
    total_ += p.numel;
    global += shape_numel(p.global_shape);
    if (unit == static_cast<int>(unit_offset_.size())) {  // first parameter of a new unit
      unit_offset_.push_back(p.offset);
      unit_numel_.push_back(0);
    }
    unit_numel_.back() += p.numel;
    params_.push_back(std::move(p));
  };
  // (Vp/t,C): vocab-parallel rows, also the LM head's weight (tied). Rank r holds rows
  // [r·Vp/t, (r+1)·Vp/t); those ≥ V pad the vocabulary, at the end of the last ranks' rows.
  add("wte.weight", {Vp / t, C}, {Vp, C}, Split::kRows, 0);
  params_.back().pad_rows = std::clamp<int64_t>(int64_t{r + 1} * (Vp / t) - cfg.vocab, 0, Vp / t);
  add("wpe.weight", {cfg.ctx, C}, {cfg.ctx, C}, Split::kReplicated, 0);  // (ctx,C)
  for (int l = 0; l < cfg.layers; ++l) {
    const std::string h = "h." + std::to_string(l) + ".";
    if (!cfg.is_moe_block(l)) {
      for (const BlockParamDef& d : kBlockParams)
        add(h + d.suffix, block_param_shape(d, shape_), block_param_shape(d, whole), d.split,
            1 + l);
      continue;
    }
    for (size_t i = 0; i < kMoeSharedParams; ++i) {  // ln_1, attention, ln_2 as a dense block
      const BlockParamDef& d = kBlockParams[i];
      add(h + d.suffix, block_param_shape(d, shape_), block_param_shape(d, whole), d.split, 1 + l);
    }
    add(h + "mlp.router.weight", {C, cfg.experts}, {C, cfg.experts}, Split::kReplicated, 1 + l);
    // Experts [ep_rank·E/ep, (ep_rank+1)·E/ep) are this rank's; the others only move `global`.
    const int held = cfg.experts / ep;
    for (int e = 0; e < cfg.experts; ++e)
      for (const BlockParamDef& d : kExpertParams) {
        const std::vector<int64_t> shape = block_param_shape(d, whole);
        if (e / held == ep_rank)
          add(h + "mlp.experts." + std::to_string(e) + "." + d.suffix, shape, shape, d.split,
              1 + l);
        else
          global += shape_numel(shape);
      }
  }
  add("ln_f.weight", {C}, {C}, Split::kReplicated, cfg.layers + 1);
  add("ln_f.bias", {C}, {C}, Split::kReplicated, cfg.layers + 1);
}

const ParamSpec& GPTLayout::find(const std::string& name) const {
  for (const ParamSpec& p : params_)
    if (p.name == name) return p;
  throw std::out_of_range("no parameter named '" + name + "' in the GPT layout");
}

namespace {
/// Calls copy(local_element, global_element, count) for every run of consecutive elements that
/// tensor `p` of rank r holds: whole tensors, row ranges or column ranges (block_params.h).
template <typename F>
void for_each_run(const ParamSpec& p, int r, F copy) {
  const int64_t rows = p.shape.size() == 2 ? p.shape[0] : 1;
  const int64_t cols = p.shape.back(), gcols = p.global_shape.back();
  switch (p.split) {
    case Split::kReplicated:
    case Split::kExpert:  // whole, at the expert's place in the whole model
      copy(p.offset, p.global_offset, p.numel);
      return;
    case Split::kRows:  // rows [r·rows, (r+1)·rows) of the whole tensor: one run
      copy(p.offset, p.global_offset + r * rows * cols, p.numel);
      return;
    case Split::kColumns:  // in each row, columns [r·cols, (r+1)·cols)
      for (int64_t i = 0; i < rows; ++i)
        copy(p.offset + i * cols, p.global_offset + i * gcols + r * cols, cols);
      return;
    case Split::kQKVColumns: {  // in each row, the rank's third of the q, the k and the v columns
      const int64_t part = cols / 3, C = gcols / 3;
      for (int64_t i = 0; i < rows; ++i)
        for (int j = 0; j < 3; ++j)
          copy(p.offset + i * cols + j * part, p.global_offset + i * gcols + j * C + r * part,
               part);
      return;
    }
  }
}
}  // namespace

void GPTLayout::copy_from_full(const float* full, float* local) const {
  for (const ParamSpec& p : params_)
    for_each_run(p, tp_rank_, [&](int64_t l, int64_t g, int64_t n) {
      std::memcpy(local + l, full + g, n * sizeof(float));
    });
}

void GPTLayout::copy_to_full(const float* local, float* full) const {
  for (const ParamSpec& p : params_)
    for_each_run(p, tp_rank_, [&](int64_t l, int64_t g, int64_t n) {
      std::memcpy(full + g, local + l, n * sizeof(float));
    });
}

}  // namespace llmp
