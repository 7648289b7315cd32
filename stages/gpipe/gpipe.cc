// GPipe's closed forms and its strategy (see gpipe.h).
#include "stages/gpipe/gpipe.h"

#include "common/pipeline/schedule.h"

namespace llmp {

double gpipe_bubble_fraction(int p, int m) { return (p - 1.0) / (m + p - 1.0); }

int gpipe_peak_in_flight(int /*p*/, int m, int /*r*/) { return m; }

std::unique_ptr<PipelineStrategy> make_gpipe(const GPT& model, ProcessGroup& pp, AdamWConfig opt,
                                             uint64_t seed, int m, const std::string& trace) {
  auto s = std::make_unique<PipelineStrategy>(model, pp, opt, seed, gpipe(pp.size(), m), trace);
  s->set_bubble_formula(gpipe_bubble_fraction(pp.size(), m), "(p-1)/(m+p-1)");
  return s;
}

}  // namespace llmp
