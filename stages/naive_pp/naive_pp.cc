// The naive pipeline's closed form and its strategy (see naive_pp.h).
#include "stages/naive_pp/naive_pp.h"

#include "common/pipeline/schedule.h"

namespace llmp {

double naive_pp_bubble_fraction(int p) { return (p - 1.0) / p; }

std::unique_ptr<PipelineStrategy> make_naive_pp(const GPT& model, ProcessGroup& pp,
                                                AdamWConfig opt, uint64_t seed,
                                                const std::string& trace) {
  auto s = std::make_unique<PipelineStrategy>(model, pp, opt, seed, naive(pp.size(), 1), trace);
  s->set_bubble_formula(naive_pp_bubble_fraction(pp.size()), "(p-1)/p");
  return s;
}

}  // namespace llmp
