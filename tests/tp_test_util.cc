// Test helpers of the tensor-parallel stages (see tp_test_util.h).
#include "tests/tp_test_util.h"

#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "common/data/corpus.h"
#include "common/data/sampler.h"
#include "tests/stage_test_util.h"

namespace llmp {

GPTConfig tiny_h4() {
  GPTConfig c = GPTConfig::preset("tiny");
  c.heads = 4;
  return c;
}

StrategyFactory tensor_parallel_on_world(bool sequence_parallel) {
  return [sequence_parallel](const GPT& model, AdamWConfig opt, uint64_t seed) {
    return std::make_unique<TensorParallelStrategy>(model.config(), test_world(), opt, seed,
                                                    sequence_parallel);
  };
}

void train_steps(TensorParallelStrategy& s, int B, int steps, uint64_t seed) {
  const int T = s.model().config().ctx;
  const Corpus corpus = Corpus::load("/usr/share/games/fortunes", T);
  std::vector<int32_t> tok(B * T), tgt(B * T);
  for (int k = 1; k <= steps; ++k) {
    sample(corpus.train(), seed, k, 0, B, T, tok.data(), tgt.data());
    s.train_step(tok.data(), tgt.data(), B, T, k);
  }
}

int expect_replicated_params_identical(TensorParallelStrategy& s) {
  const int64_t psi = GPTLayout(s.model().config()).num_params();
  std::vector<float> p(psi), m(psi), v(psi);
  s.get_state(p.data(), m.data(), v.data());  // replicated tensors: the last rank's copy
  const float* own = s.local_params().f32();  // this rank's own copy
  int checked = 0;
  for (const ParamSpec& ps : s.model().layout().params()) {
    if (ps.split != Split::kReplicated) continue;
    ++checked;
    for (int64_t i = 0; i < ps.numel; ++i) {
      EXPECT_EQ(own[ps.offset + i], p[ps.global_offset + i]) << ps.name << " element " << i;
      if (own[ps.offset + i] != p[ps.global_offset + i]) break;  // one line per tensor
    }
  }
  return checked;
}

}  // namespace llmp
