// PipeDream-2BW's validation loss BETWEEN steps (train_main's --eval_every k < steps), with
// activation messages large enough for MPI's rendezvous protocol (the mini model: one message
// 4·b·T·C = 128 KiB at p = 4, 256 KiB at p = 2). Mid-run the stream still has sends in flight
// whose receivers take them in their next segment; eval_loss must neither wait for them nor
// take them, and must equal the single-rank forward loss of the newest version W(t).
// Before the executor fix b91d717 (forward_only waits for its own sends only) this hung.
//
// Glossary: p ranks, m micro-batches, b = B/m, T sequence length, C channels, W(t) version t.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "common/data/corpus.h"
#include "common/data/sampler.h"
#include "common/nn/unit_runner.h"
#include "stages/pipedream_2bw/delayed_update_reference.h"
#include "stages/pipedream_2bw/pipedream_2bw.h"
#include "tests/pipeline_test_util.h"

namespace llmp {
namespace {

TEST(PipeDream2BW, EvalBetweenStepsWithLargeMessages) {
  ProcessGroup& pp = testing::pipeline_world();
  EquivalenceConfig cfg = testing::pipeline_equivalence_config();
  cfg.preset = "mini";  // C = 128, L = 4, ctx 64
  cfg.layers = 4;
  cfg.T = 64;
  const GPT model(equivalence_model(cfg));
  const Corpus corpus = Corpus::load(cfg.data, cfg.T);
  const int B = cfg.global_batch, T = cfg.T, p = pp.size();
  std::vector<int32_t> tok(B * T), tgt(B * T), vtok(B * T), vtgt(B * T);
  sample(corpus.val(), cfg.seed, 0, 0, B, T, vtok.data(), vtgt.data());
  testing::DelayedUpdateReference ref(model, cfg.opt, cfg.seed);
  std::unique_ptr<PipeDream2BWStrategy> s =
      make_pipedream_2bw(model, pp, cfg.opt, cfg.seed, p, /*steps=*/4);
  for (int step = 1; step <= 4; ++step) {
    sample(corpus.train(), cfg.seed, step, 0, B, T, tok.data(), tgt.data());
    const double want = ref.train_step(tok.data(), tgt.data(), B, T, step);
    const double got = s->train_step(tok.data(), tgt.data(), B, T, step);
    EXPECT_LE(std::fabs(got - want) / want, 1e-5) << "step " << step;
    // After step s (batch s-1) the newest complete version is W(s-1), the reference's older()
    // (its newest is already W(s)); after the last step the stream has drained: W(4).
    const std::vector<float>& w = step < 4 ? ref.older() : ref.newest();
    const double eval = s->eval_loss(vtok.data(), vtgt.data(), B, T);
    const double expect = forward_loss(model, w.data(), vtok.data(), vtgt.data(), B, T);
    if (pp.rank() == 0)
      std::printf("p=%d step %d: eval %.7f, reference W(%d) %.7f\n", p, step, eval,
                  step < 4 ? step - 1 : 4, expect);
    EXPECT_LE(std::fabs(eval - expect) / expect, 1e-5) << "after step " << step;
  }
}

}  // namespace
}  // namespace llmp
