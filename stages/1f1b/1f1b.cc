// 1F1B's closed forms and its strategy (see 1f1b.h).
#include "stages/1f1b/1f1b.h"

#include <algorithm>

#include "common/pipeline/schedule.h"

namespace llmp {

double one_f_one_b_bubble_fraction(int p, int m) { return (p - 1.0) / (m + p - 1.0); }

int one_f_one_b_peak_in_flight(int p, int m, int r) { return std::min(p - r, m); }

std::unique_ptr<PipelineStrategy> make_one_f_one_b(const GPT& model, ProcessGroup& pp,
                                                   AdamWConfig opt, uint64_t seed, int m,
                                                   const std::string& trace) {
  auto s = std::make_unique<PipelineStrategy>(model, pp, opt, seed, one_f_one_b(pp.size(), m),
                                              trace);
  s->set_bubble_formula(one_f_one_b_bubble_fraction(pp.size(), m), "(p-1)/(m+p-1)");
  return s;
}

}  // namespace llmp
