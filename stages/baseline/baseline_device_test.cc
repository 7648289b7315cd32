// The baseline trainer with --device cuda's placement, run without a GPU: the model, its states
// and the optimizer on a guarded FakeDevice (host pages unreadable outside device operations)
// with kernels/cpu as the device's kernels (common/testing/fake_kernel_ops.h).
//
// Checked: the run trains exactly as the CPU baseline does (losses and parameters bit for bit,
// weight decay on), every state byte sits on the device (the allocator's count), a checkpoint's
// get_state / set_state round trip works across the device boundary, and no host code reads
// device memory (the guard). Not checked: the CUDA kernels (kernels/cuda, on a GPU only).
#include <gtest/gtest.h>

#include <cstdlib>
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

// --precision bf16 / fp16 on the device: the 16-bit parameters and gradients, the fp32 master
// copy, m and v all on the FakeDevice; the rounding, the master update and fp16's overflow check
// through the device's kernels (KernelOps). Trains bit for bit as the same precision on the CPU,
// and what crossed host <-> device is exactly: the parameters up once rounded to 16 bits (2Ψ)
// plus the fp32 master copy (4Ψ), each step's ids (tokens twice, targets once: 3·4·B·T), and
// get_state's master, m and v down (12Ψ). A master copy left on the host, a gradient widened on
// the host or the scaler reading the gradients through the host breaks one of these.
void expect_mixed_on_device_equals_cpu(TrainPrecision precision, int steps) {
  Batches run;
  AdamWConfig opt;
  opt.lr = 3e-3f;
  opt.weight_decay = 0.1f;
  MixedPrecisionConfig mp;
  mp.precision = precision;
  mp.scaler.scale = 1024.0f;  // fp16 only
  const DType dt = storage_dtype(precision);
  const GPT model(GPTConfig::preset("tiny"), TpComm::none(), dt);
  const int64_t psi = model.layout().num_params();
  BaselineStrategy cpu(model, opt, 3, mp);
  std::vector<double> cpu_losses;
  for (int t = 1; t <= steps; ++t) cpu_losses.push_back(run.step(cpu, t));

  testing::FakeDevice dev(/*guarded=*/true);
  testing::FakeKernelOps ops(dev);
  const GPT on_device = model.with_device(Device::kCUDA);  // the strategy keeps a reference
  BaselineStrategy gpu(on_device, opt, 3, mp);
  // 16-bit parameters and gradients (2Ψ + 2Ψ), master, m and v (12Ψ): all device memory.
  EXPECT_EQ(dev.in_use(), 16 * psi);
  for (int t = 1; t <= steps; ++t) EXPECT_EQ(run.step(gpu, t), cpu_losses[t - 1]) << "step " << t;
  EXPECT_EQ(dev.in_use(), 16 * psi) << "activations left on the device after a step";
  EXPECT_EQ(gpu.mixed_precision().skipped_steps(), cpu.mixed_precision().skipped_steps());
  EXPECT_EQ(gpu.mixed_precision().loss_scale(), cpu.mixed_precision().loss_scale());
  EXPECT_EQ(gpu.mixed_precision().last_round_stats().elements, 0)
      << "rounding statistics are counted on a device only when asked (count_on_device)";
  const int64_t h2d_before_state = dev.h2d_bytes();
  EXPECT_EQ(params_of(gpu, psi), params_of(cpu, psi));
  const int64_t ids = int64_t{steps} * 3 * 4 * run.B * run.T;
  EXPECT_EQ(h2d_before_state, 2 * psi + 4 * psi + ids);
  EXPECT_EQ(dev.h2d_bytes(), h2d_before_state) << "get_state copied something up";
  EXPECT_EQ(dev.d2h_bytes(), 12 * psi);

  // A checkpoint's fp32 state (and fp16's scaler state) into a fresh device run (the master copy
  // and m, v up as they are, the 16-bit working copy rounded on the host: 2Ψ + 12Ψ bytes), then
  // one more step on both.
  const std::vector<float> state = params_of(cpu, psi);
  BaselineStrategy resumed(on_device, opt, 99, mp);
  const int64_t up = dev.h2d_bytes();
  resumed.set_state(state.data(), state.data() + psi, state.data() + 2 * psi);
  resumed.set_extra_state(cpu.extra_state());  // fp16: the scale and skipped steps, as a load
  EXPECT_EQ(dev.h2d_bytes() - up, 2 * psi + 12 * psi);
  EXPECT_EQ(run.step(resumed, steps + 1), run.step(cpu, steps + 1));
  EXPECT_EQ(params_of(resumed, psi), params_of(cpu, psi));
}

TEST(BaselineOnDevice, Bf16TrainsBitForBitAsOnTheCpu) {
  expect_mixed_on_device_equals_cpu(TrainPrecision::kBF16, 3);
}

// fp16 with an injected overflow at step 2 (mixed_precision.h's test hook: S·2^64 makes the
// gradients inf): the device's check (widen + count_nonfinite on the device) must skip that step
// and halve S exactly as the host's does, and the other steps update bit for bit.
TEST(BaselineOnDevice, Fp16SkipsAnOverflowedStepAsOnTheCpu) {
  setenv("LLMP_TEST_OVERFLOW_STEP", "2", 1);
  expect_mixed_on_device_equals_cpu(TrainPrecision::kFP16, 3);
  unsetenv("LLMP_TEST_OVERFLOW_STEP");
  // The hook did fire: without the skip the run above would not have been comparable.
  Batches run;
  MixedPrecisionConfig mp;
  mp.precision = TrainPrecision::kFP16;
  mp.scaler.scale = 1024.0f;
  setenv("LLMP_TEST_OVERFLOW_STEP", "2", 1);
  const GPT model(GPTConfig::preset("tiny"), TpComm::none(), DType::kF16);
  BaselineStrategy cpu(model, AdamWConfig{}, 3, mp);
  unsetenv("LLMP_TEST_OVERFLOW_STEP");
  for (int t = 1; t <= 2; ++t) run.step(cpu, t);
  EXPECT_EQ(cpu.mixed_precision().skipped_steps(), 1);
  EXPECT_EQ(cpu.mixed_precision().loss_scale(), 512.0f);
}

}  // namespace
}  // namespace llmp
