// Counter-based normal draws (see init.h) and GPT::init_params, GPT-2's initialisation:
// weights N(0, 0.02), residual projections (attn.c_proj, mlp.c_proj) N(0, 0.02/√(2L)) so the
// residual stream's variance does not grow with depth (Radford et al. 2019, §2.3), biases 0,
// LayerNorm gains 1. Element i of the flat buffer uses normal draw i of the seed's stream (i
// counted without a padded vocabulary's rows, which are zero).
#include "common/nn/init.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "common/nn/gpt.h"

namespace llmp {

double uniform_at(uint64_t seed, uint64_t index) {
  const uint64_t bits = splitmix64(splitmix64(seed) + index);
  return static_cast<double>((bits >> 11) + 1) * 0x1.0p-53;  // (0, 1]: log() stays finite
}

double normal_at(uint64_t seed, uint64_t index) {
  const uint64_t k = index >> 1;
  const double r = std::sqrt(-2.0 * std::log(uniform_at(seed, 2 * k)));
  const double theta = 2.0 * M_PI * uniform_at(seed, 2 * k + 1);
  return (index & 1) ? r * std::sin(theta) : r * std::cos(theta);
}

namespace {
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
}  // namespace

void GPT::init_params(float* params, uint64_t seed) const {
  if (layout_.tp_size() > 1 || layout_.ep_size() > 1) {  // a slice: the whole model, keep ours
    const GPT whole(cfg_);
    std::vector<float> full(whole.layout().num_params());
    whole.init_params(full.data(), seed);
    layout_.copy_from_full(full.data(), params);
    return;
  }
  const double std_w = 0.02;
  const double std_proj = 0.02 / std::sqrt(2.0 * cfg_.layers);
  // A padded vocabulary (GPTConfig::vocab_divisible_by): the pad rows are zero, and every other
  // element takes the draw it has in the unpadded model (its index there: `skipped` pad elements
  // fewer), so padding changes no real parameter.
  int64_t skipped = 0;
  for (const ParamSpec& p : layout_.params()) {
    const int64_t pad = p.pad_rows * (p.numel / std::max<int64_t>(1, p.shape.front()));
    float* w = params + p.offset;
    const int64_t real = p.numel - pad;
    std::fill(w + real, w + p.numel, 0.0f);
    const bool is_ln = p.name.find("ln_") != std::string::npos;
    if (ends_with(p.name, ".bias")) {
      for (int64_t i = 0; i < real; ++i) w[i] = 0.0f;
    } else if (is_ln) {
      for (int64_t i = 0; i < real; ++i) w[i] = 1.0f;
    } else {
      const double s = ends_with(p.name, "c_proj.weight") ? std_proj : std_w;
      for (int64_t i = 0; i < real; ++i)
        w[i] = static_cast<float>(
            s * normal_at(seed, static_cast<uint64_t>(p.offset - skipped + i)));
    }
    skipped += pad;
  }
}

}  // namespace llmp
