// ZB-H1's closed forms and its strategy (see zero_bubble.h).
#include "stages/zero_bubble/zero_bubble.h"

#include <algorithm>

#include "common/pipeline/schedule.h"

namespace llmp {

double zb_h1_bubble_fraction(int p, int m) { return (p - 1.0) / (3.0 * m + p - 1.0); }

int zb_h1_peak_in_flight(int p, int m, int /*r*/) { return std::min(p, m); }

std::unique_ptr<PipelineStrategy> make_zero_bubble(const GPT& model, ProcessGroup& pp,
                                                   AdamWConfig opt, uint64_t seed, int m,
                                                   const std::string& trace) {
  auto s = std::make_unique<PipelineStrategy>(model, pp, opt, seed, zb_h1(pp.size(), m), trace);
  // The paper's figure (T_F = T_B = T_W) holds once the steady state exists, m ≥ p.
  if (m >= pp.size()) s->set_bubble_formula(zb_h1_bubble_fraction(pp.size(), m), "(p-1)/(3m+p-1)");
  return s;
}

}  // namespace llmp
