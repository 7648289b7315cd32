// Test helpers of the pipeline stages (see pipeline_test_util.h).
#include "tests/pipeline_test_util.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/data/corpus.h"
#include "common/data/sampler.h"
#include "common/nn/unit_runner.h"
#include "stages/baseline/baseline.h"

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

void expect_matches_baseline(const PipelineFactory& make, std::initializer_list<int> ms,
                             double max_rel) {
  for (int m : ms) {
    const EquivalenceResult r = pipeline_equivalence(make, m);
    EXPECT_LE(r.max_loss_rel, max_rel) << "m = " << m;
    EXPECT_LE(r.max_param_rel, max_rel) << "m = " << m << ", worst tensor " << r.worst_param;
  }
}

double state_and_eval_check(const PipelineFactory& make, int m, int steps) {
  const EquivalenceConfig cfg = pipeline_equivalence_config();
  const GPT model(equivalence_model(cfg));
  const Corpus corpus = Corpus::load(cfg.data, cfg.T);
  ProcessGroup& pp = pipeline_world();
  const int B = cfg.global_batch, T = cfg.T;
  const int64_t psi = model.layout().num_params();
  std::vector<int32_t> tok(B * T), tgt(B * T);
  std::unique_ptr<PipelineStrategy> a = make(model, pp, cfg.opt, cfg.seed, m);
  for (int step = 1; step <= steps; ++step) {
    sample(corpus.train(), cfg.seed, step, 0, B, T, tok.data(), tgt.data());
    a->train_step(tok.data(), tgt.data(), B, T, step);
  }
  std::vector<float> p(psi), mo(psi), v(psi), p2(psi), mo2(psi), v2(psi);
  a->get_state(p.data(), mo.data(), v.data());

  // (1) set_state then get_state on a differently initialised stage.
  std::unique_ptr<PipelineStrategy> b = make(model, pp, cfg.opt, cfg.seed + 99, m);
  b->set_state(p.data(), mo.data(), v.data());
  b->get_state(p2.data(), mo2.data(), v2.data());
  double worst = std::max({max_rel_diff(p2.data(), p.data(), psi),
                           max_rel_diff(mo2.data(), mo.data(), psi),
                           max_rel_diff(v2.data(), v.data(), psi)});
  // (2) the next step from the same state.
  sample(corpus.train(), cfg.seed, steps + 1, 0, B, T, tok.data(), tgt.data());
  const double la = a->train_step(tok.data(), tgt.data(), B, T, steps + 1);
  const double lb = b->train_step(tok.data(), tgt.data(), B, T, steps + 1);
  worst = std::max(worst, std::fabs(la - lb) / std::fabs(la));
  // (3) validation loss against the baseline's forward with the same parameters.
  a->get_state(p.data(), mo.data(), v.data());
  sample(corpus.val(), cfg.seed, 0, 0, B, T, tok.data(), tgt.data());
  const double eval = a->eval_loss(tok.data(), tgt.data(), B, T);
  const double ref = forward_loss(model, p.data(), tok.data(), tgt.data(), B, T);
  worst = std::max(worst, std::fabs(eval - ref) / std::fabs(ref));
  if (pp.rank() == 0)
    std::printf("p=%d m=%d: state round trip, next-step losses %.6f / %.6f, eval %.6f vs "
                "baseline forward %.6f: largest relative difference %.2e\n",
                pp.size(), m, la, lb, eval, ref, worst);
  return worst;
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
  s->finish();  // rank 0 prints the last step's measured timeline
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

void expect_bytes_match_schedule(const PipelineFactory& make, const std::string& stage, int m) {
  const ProbeResult r = probe(make, m);
  std::printf("%s rank %d sent %.0f bytes in one step, formula %.0f\n", stage.c_str(), r.rank,
              r.bytes, r.expected_bytes);
  EXPECT_DOUBLE_EQ(r.bytes, r.expected_bytes);
}

}  // namespace testing
}  // namespace llmp
