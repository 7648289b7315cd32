// Model presets and the flat parameter layout of the GPT (GPTConfig::preset, GPTLayout).
//
// Ψ = (V + ctx)·C            unit 0      wte, wpe
//   + L·(12C² + 13C)         units 1..L  ln_1, c_attn (C,3C)+3C, attn.c_proj C²+C, ln_2,
//                                         c_fc (C,4C)+4C, mlp.c_proj (4C,C)+C
//   + 2C                     unit L+1    ln_f
// mini (V=256 ctx=64 C=128 L=4): 40,960 + 4·198,272 + 256 = 834,304.
// gpt2 (V=50257 ctx=1024 C=768 L=12): 124,439,808, the "124M" of Radford et al. 2019.
//
// Glossary: V vocab, ctx context length, C channels, L layers, Ψ parameter count.
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
  } else {
    throw std::invalid_argument("unknown model preset '" + name +
                                "' (expected tiny, mini or gpt2)");
  }
  return c;
}

GPTLayout::GPTLayout(const GPTConfig& cfg) {
  if (cfg.vocab <= 0 || cfg.ctx <= 0 || cfg.layers < 0 || cfg.d <= 0 || cfg.heads <= 0 ||
      cfg.d % cfg.heads != 0)
    throw std::invalid_argument(
        "invalid GPT config '" + cfg.name + "': V=" + std::to_string(cfg.vocab) +
        " ctx=" + std::to_string(cfg.ctx) + " L=" + std::to_string(cfg.layers) +
        " C=" + std::to_string(cfg.d) + " H=" + std::to_string(cfg.heads) + " (H must divide C)");
  const int64_t C = cfg.d;
  auto add = [&](std::string name, std::vector<int64_t> shape, int unit) {
    ParamSpec p;
    p.name = std::move(name);
    p.numel = 1;
    for (int64_t s : shape) p.numel *= s;
    p.shape = std::move(shape);
    p.offset = total_;
    p.unit = unit;
    total_ += p.numel;
    if (unit == static_cast<int>(unit_offset_.size())) {  // first parameter of a new unit
      unit_offset_.push_back(p.offset);
      unit_numel_.push_back(0);
    }
    unit_numel_.back() += p.numel;
    params_.push_back(std::move(p));
  };
  add("wte.weight", {cfg.vocab, C}, 0);  // (V,C), also the LM head's weight (tied)
  add("wpe.weight", {cfg.ctx, C}, 0);    // (ctx,C)
  for (int l = 0; l < cfg.layers; ++l)
    for (const BlockParamDef& d : kBlockParams)
      add("h." + std::to_string(l) + "." + d.suffix, block_param_shape(d, cfg.d), 1 + l);
  add("ln_f.weight", {C}, cfg.layers + 1);
  add("ln_f.bias", {C}, cfg.layers + 1);
}

const ParamSpec& GPTLayout::find(const std::string& name) const {
  for (const ParamSpec& p : params_)
    if (p.name == name) return p;
  throw std::out_of_range("no parameter named '" + name + "' in the GPT layout");
}

}  // namespace llmp
