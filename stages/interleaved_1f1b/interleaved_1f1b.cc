// Interleaved 1F1B's closed forms and its strategy (see interleaved_1f1b.h).
#include "stages/interleaved_1f1b/interleaved_1f1b.h"

#include <algorithm>

#include "common/pipeline/schedule.h"

namespace llmp {

double interleaved_bubble_fraction(int p, int m, int v) {
  return (p - 1.0) / (static_cast<double>(v) * m + p - 1.0);
}

int interleaved_peak_in_flight(int p, int m, int v, int r) {
  if (m == p) return m * v;  // the warm-up runs every chunk-forward: GPipe order
  return std::min((p - r - 1) * 2 + (v - 1) * p + 1, m * v);
}

std::unique_ptr<PipelineStrategy> make_interleaved_1f1b(const GPT& model, ProcessGroup& pp,
                                                        AdamWConfig opt, uint64_t seed, int m,
                                                        int v, const std::string& trace) {
  auto s = std::make_unique<PipelineStrategy>(model, pp, opt, seed,
                                              interleaved_1f1b(pp.size(), m, v), trace);
  s->set_bubble_formula(interleaved_bubble_fraction(pp.size(), m, v), "(p-1)/(v·m+p-1)");
  return s;
}

}  // namespace llmp
