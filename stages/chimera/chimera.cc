// Chimera's closed form and its strategy (see chimera.h).
#include "stages/chimera/chimera.h"

#include "common/pipeline/schedule.h"

namespace llmp {

double chimera_bubble_fraction(int p, int m) { return (p - 2.0) / (2.0 * m + p - 2.0); }

LogicalCosts chimera_clock_costs() {
  LogicalCosts c;
  c.forward = 1.0, c.backward = 1.0;
  return c;
}

std::unique_ptr<PipelineStrategy> make_chimera(const GPT& model, ProcessGroup& pp,
                                               AdamWConfig opt, uint64_t seed, int m,
                                               const std::string& trace) {
  auto s = std::make_unique<PipelineStrategy>(model, pp, opt, seed, chimera(pp.size(), m), trace,
                                              chimera_clock_costs());
  s->set_bubble_formula(chimera_bubble_fraction(pp.size(), m), "(p-2)/(2m+p-2)");
  return s;
}

}  // namespace llmp
