// Expert parallelism with --device cuda's placement, at 2 ranks (ep = W = 2), without a GPU: the
// model, its states and activations on a guarded FakeDevice (common/testing/fake_device.h; a host
// read of device memory is a SIGSEGV) with the CPU kernels as the device's, against the same
// stage on the CPU in the same precision (fp32, bf16): losses, the evaluation loss and the final
// state (params or the master copy, m, v) bit for bit, and every byte the FakeDevice saw cross
// between host and device equal to a closed form:
//
//   up    init                         fp32: 4Ψ_r; bf16: the master 4Ψ_r and the rounded 2Ψ_r
//         + steps·(3·4n                tokens twice (embed forward, backward), targets once
//                  + L_m·4n(2k+E)      per MoE block: the gates and the assignments' slots
//                                      (forward: what the token permutations index), dlogits
//                                      (backward)
//                  + L_m·4·|D|         per MoE block: 4 all_to_alls' outputs, staged up
//                  + eΨ_d)             the dense gradients' all_reduce, staged up
//         + 2·4n + L_m·(8nk + 2|D|)    the evaluation: ids, gates and slots, 2 all_to_alls
//   down  steps·(L_m·4n(E+k)           per MoE block: the router logits z, dgate (fp32 always)
//                + L_m·4·|D| + eΨ_d)   the same collectives' inputs, staged down
//         + L_m·(4nE + 2|D|)           the evaluation: z, 2 all_to_alls
//         + 3·4Ψ_r                     get_state: params (bf16: the master copy), m, v
//
// Glossary: n = G·T tokens of this rank (G = B/W sequences), E experts, k per token, L_m MoE
// blocks, e bytes per activation and gradient element (4 fp32, 2 bf16), |D| = e·E·G·cap·C bytes
// of the dispatch buffer (cap = ⌈k·T·c/E⌉), Ψ_r = Ψ_d + (E/ep)·Ψ_e the rank's parameters (Ψ_d
// dense, moe.h's MoeParamCounts), W = 2 ranks.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "common/data/corpus.h"
#include "common/data/sampler.h"
#include "common/testing/fake_device.h"
#include "common/testing/fake_kernel_ops.h"
#include "stages/moe/moe.h"
#include "tests/moe_test_util.h"
#include "tests/stage_test_util.h"

namespace llmp {
namespace {

constexpr int kSteps = 3, kGlobalBatch = 4;

struct MoeRun {
  std::vector<double> losses;
  double eval_loss = 0;
  std::vector<float> state;  // params, m, v (3Ψ, the whole model)
};

MoeRun train(const GPT& model, int ep, MixedPrecisionConfig mp) {
  const int T = model.config().ctx;
  const Corpus corpus = Corpus::load("/usr/share/games/fortunes", T);
  AdamWConfig opt;
  opt.lr = 3e-3f;
  opt.weight_decay = 0.1f;
  const auto s = make_moe_strategy(model, ep, opt, 11, mp);
  const BatchSlice sl = s->batch_slice(kGlobalBatch);
  std::vector<int32_t> tok(sl.num_seqs * T), tgt(sl.num_seqs * T);
  MoeRun r;
  for (int step = 1; step <= kSteps; ++step) {
    sample(corpus.train(), 42, step, sl.first_seq, sl.num_seqs, T, tok.data(), tgt.data());
    r.losses.push_back(s->train_step(tok.data(), tgt.data(), kGlobalBatch, T, step));
  }
  r.eval_loss = s->eval_loss(tok.data(), tgt.data(), kGlobalBatch, T);
  const int64_t psi = GPTLayout(model.config()).num_params();
  r.state.resize(3 * psi);
  s->get_state(r.state.data(), r.state.data() + psi, r.state.data() + 2 * psi);
  return r;
}

void expect_device_run_equals_cpu_run(TrainPrecision precision) {
  const int W = test_world().size(), ep = W;
  ASSERT_EQ(W, 2) << "the closed form below is for ep = W = 2";
  const GPTConfig c = moe_tiny(/*top_k=*/2, /*capacity_factor=*/1.0, /*moe_every=*/2);
  const MixedPrecisionConfig mp = precision_config(precision);
  const GPT model(c, TpComm::none(), storage_dtype(precision));
  const MoeRun cpu = train(model, ep, mp);

  testing::FakeDevice dev(/*guarded=*/true);
  testing::FakeKernelOps ops(dev);
  const MoeRun gpu = train(model.with_device(Device::kCUDA), ep, mp);

  EXPECT_EQ(gpu.losses, cpu.losses);
  EXPECT_EQ(gpu.eval_loss, cpu.eval_loss);
  int64_t differing = 0;
  for (size_t i = 0; i < cpu.state.size(); ++i) differing += gpu.state[i] != cpu.state[i];
  EXPECT_EQ(differing, 0) << "of " << cpu.state.size() << " state elements";
  EXPECT_GT(dev.operations(), 0);

  const int64_t G = kGlobalBatch / W, T = c.ctx, n = G * T, E = c.experts, k = c.top_k;
  const int64_t Lm = c.moe_blocks();
  const int64_t cap = static_cast<int64_t>(std::ceil(k * T * c.capacity_factor / E));
  const int64_t e = is_mixed(precision) ? 2 : 4;
  const int64_t D = e * E * G * cap * c.d;
  const MoeParamCounts psi = MoeParamCounts::of(c, ep);
  const int64_t psi_d = static_cast<int64_t>(psi.dense);
  const int64_t psi_r = static_cast<int64_t>(psi.dense + psi.experts);
  ASSERT_GT(Lm, 0);
  const int64_t init = is_mixed(precision) ? 4 * psi_r + 2 * psi_r : 4 * psi_r;
  const int64_t up = init +
                     kSteps * (3 * 4 * n + Lm * 4 * n * (2 * k + E) + Lm * 4 * D + e * psi_d) +
                     2 * 4 * n + Lm * (8 * n * k + 2 * D);
  const int64_t down = kSteps * (Lm * 4 * n * (E + k) + Lm * 4 * D + e * psi_d) +
                       Lm * (4 * n * E + 2 * D) + 3 * 4 * psi_r;
  EXPECT_EQ(dev.h2d_bytes(), up);
  EXPECT_EQ(dev.d2h_bytes(), down);
}

TEST(MoeOnDevice, EqualsTheCpuRunWithEveryCrossingAccounted) {
  expect_device_run_equals_cpu_run(TrainPrecision::kFP32);
}

TEST(MoeOnDevice, Bf16EqualsTheCpuRunWithTheTokensCrossingIn16Bits) {
  expect_device_run_equals_cpu_run(TrainPrecision::kBF16);
}

}  // namespace
}  // namespace llmp
