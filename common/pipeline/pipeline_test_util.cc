// Test helpers of the pipeline stages (see pipeline_test_util.h).
#include "common/pipeline/pipeline_test_util.h"

#include <cstdio>

#include "common/data/corpus.h"
#include "common/data/sampler.h"

namespace llmp {
namespace testing {

ProcessGroup& pipeline_world() {
  static std::shared_ptr<ProcessGroup> w = ProcessGroup::world();
  return *w;
}

EquivalenceConfig pipeline_equivalence_config() {
  EquivalenceConfig cfg;
  cfg.layers = 8;
  cfg.global_batch = 16;
  cfg.T = 16;
  cfg.steps = 10;
  return cfg;
}

EquivalenceResult pipeline_equivalence(const PipelineFactory& make, int m) {
  ProcessGroup& pp = pipeline_world();
  if (pp.rank() == 0)
    std::printf("---- p = %d, m = %d: 10 steps against the baseline ----\n", pp.size(), m);
  return run_against_baseline(
      [&](const GPT& model, AdamWConfig opt, uint64_t seed) -> std::unique_ptr<Strategy> {
        return make(model, pp, opt, seed, m);
      },
      pp, pipeline_equivalence_config());
}

ProbeResult probe(const PipelineFactory& make, int m, int steps) {
  const EquivalenceConfig cfg = pipeline_equivalence_config();
  const GPT model(equivalence_model(cfg));
  const Corpus corpus = Corpus::load(cfg.data, cfg.T);
  ProcessGroup& pp = pipeline_world();
  std::unique_ptr<PipelineStrategy> s = make(model, pp, cfg.opt, cfg.seed, m);
  const int B = cfg.global_batch, T = cfg.T;
  std::vector<int32_t> tok(B * T), tgt(B * T);
  for (int step = 1; step <= steps; ++step) {
    sample(corpus.train(), cfg.seed, step, 0, B, T, tok.data(), tgt.data());
    s->train_step(tok.data(), tgt.data(), B, T, step);
  }
  s->report();  // rank 0 prints the last step's measured timeline
  ProbeResult r;
  r.sim = s->simulated();
  r.stats = s->last_stats();
  r.measured_bubble = s->measured_bubble_fraction();
  r.bytes = s->last_step_bytes();
  r.expected_bytes = s->expected_bytes_per_step(B, T);
  r.expected_stored = s->expected_activation_bytes(B, T);
  r.rank = pp.rank(), r.p = pp.size(), r.m = m, r.v = s->schedule().v;
  return r;
}

}  // namespace testing
}  // namespace llmp
