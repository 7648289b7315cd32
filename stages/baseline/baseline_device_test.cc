// The baseline trainer with --device cuda's placement, run without a GPU: the model, its states
// and the optimizer on a guarded FakeDevice (host pages unreadable outside device operations)
// with kernels/cpu as the device's kernels (common/testing/fake_kernel_ops.h).
//
// Checked: the run trains exactly as the CPU baseline does (losses and parameters bit for bit,
// weight decay on), every state byte sits on the device (the allocator's count), a checkpoint's
// get_state / set_state round trip works across the device boundary, and no host code reads
// device memory (the guard). Not checked: the CUDA kernels (kernels/cuda, on a GPU only).
#include <gtest/gtest.h>

#include <vector>

#include "common/data/corpus.h"
#include "common/data/sampler.h"
#include "common/testing/fake_device.h"
#include "common/testing/fake_kernel_ops.h"
#include "stages/baseline/baseline.h"

namespace llmp {
namespace {

struct Batches {
  const GPT model{GPTConfig::preset("tiny")};
  const Corpus corpus = Corpus::load("/usr/share/games/fortunes", model.config().ctx);
  const int B = 4, T = model.config().ctx;
  std::vector<int32_t> tok = std::vector<int32_t>(B * T), tgt = std::vector<int32_t>(B * T);
  double step(BaselineStrategy& s, int64_t t) {
    sample(corpus.train(), 42, t, 0, B, T, tok.data(), tgt.data());
    return s.train_step(tok.data(), tgt.data(), B, T, t);
  }
};

std::vector<float> params_of(BaselineStrategy& s, int64_t psi) {
  std::vector<float> p(psi), m(psi), v(psi);
  s.get_state(p.data(), m.data(), v.data());
  p.insert(p.end(), m.begin(), m.end());
  p.insert(p.end(), v.begin(), v.end());
  return p;
}

TEST(BaselineOnDevice, TrainsBitForBitAsOnTheCpuWithEveryStateOnTheDevice) {
  Batches run;
  AdamWConfig opt;
  opt.lr = 3e-3f;
  opt.weight_decay = 0.1f;  // the decay ranges split AdamW's update into several kernel calls
  const int64_t psi = run.model.layout().num_params();
  BaselineStrategy cpu(run.model, opt, 3);
  std::vector<double> cpu_losses;
  for (int t = 1; t <= 4; ++t) cpu_losses.push_back(run.step(cpu, t));
  const std::vector<float> cpu_state = params_of(cpu, psi);

  testing::FakeDevice dev(/*guarded=*/true);
  testing::FakeKernelOps ops(dev);
  const GPT on_device = run.model.with_device(Device::kCUDA);
  BaselineStrategy gpu(on_device, opt, 3);
  // Parameters, gradients, m and v: 16Ψ bytes, all of them device memory.
  EXPECT_EQ(dev.in_use(), 16 * psi);
  for (int t = 1; t <= 4; ++t) EXPECT_EQ(run.step(gpu, t), cpu_losses[t - 1]) << "step " << t;
  EXPECT_EQ(dev.in_use(), 16 * psi) << "activations left on the device after a step";
  EXPECT_EQ(params_of(gpu, psi), cpu_state);

  // A checkpoint's state into a fresh device run, then one more step on both.
  BaselineStrategy resumed(on_device, opt, 99);
  resumed.set_state(cpu_state.data(), cpu_state.data() + psi, cpu_state.data() + 2 * psi);
  EXPECT_EQ(run.step(resumed, 5), run.step(cpu, 5));
  EXPECT_EQ(params_of(resumed, psi), params_of(cpu, psi));
}

TEST(BaselineOnDevice, MixedPrecisionOnADeviceIsRefused) {
  testing::FakeDevice dev;
  const GPT on_device = GPT(GPTConfig::preset("tiny"), TpComm::none(), DType::kBF16)
                            .with_device(Device::kCUDA);
  MixedPrecisionConfig mp;
  mp.precision = TrainPrecision::kBF16;
  EXPECT_THROW(BaselineStrategy(on_device, AdamWConfig{}, 1, mp), std::invalid_argument);
}

}  // namespace
}  // namespace llmp
