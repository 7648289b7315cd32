// AdamW over more runs of constant weight decay than one launch takes (kernels/cuda/adamw.h:
// kMaxRunsPerLaunch = 256 runs per launch, their ends and λs in the kernel's parameters): 600 runs,
// so the span takes 3 launches, each starting where the last one ended. fp32 with runs of 1 to
// 12,000 elements (3.6M in all, ~1.5M per launch): a launch spans more than its grid's 2^20
// threads, so a thread's first element finds its run by binary search and its second walks
// forward to it (shared_math.h run_containing), past every run end of the second sweep. Mixed
// precision (bf16 parameters, f16 gradients × 1/8) with runs of 1 to 1,000 elements, one sweep.
// 2 steps each against the CPU twin (kernels/cpu/adamw.h, run by run): parameters, master, m and
// v within 2e-6 of the CPU's (kernels_twin_test's bound for element-wise maps; 0 measured on the
// emulator), the bf16 parameters within one bf16 step. Part of kernels_twin_test (the same skip
// without a GPU; on the emulator, kernels_twin_emulated_test, it runs).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/tensor/tensor.h"
#include "kernels/cpu/adamw.h"
#include "kernels/cpu/convert.h"
#include "kernels/cuda/adamw.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_allocator.h"
#include "kernels/cuda/shared_math.h"
#include "kernels/cuda/twin_test_util.h"
#include "kernels/ops/kernel_ops.h"

namespace llmp {
namespace {

using test::DevF;
using test::rel_err;
using test::rnd;
using test::Vec;
constexpr float kElem = 2e-6f;

using AdamWTwin = test::GpuTwin;

/// 600 runs of 1..longest elements, λ 0.1 or 0 (mostly alternating, sometimes repeated).
std::vector<cpu::DecayRun> many_runs(int longest) {
  std::mt19937 gen(7);
  std::uniform_int_distribution<int> len(1, longest), coin(0, 3);
  std::vector<cpu::DecayRun> runs;
  int64_t end = 0;
  bool decayed = false;
  for (int k = 0; k < 600; ++k) {
    end += len(gen);
    if (coin(gen) != 0) decayed = !decayed;
    runs.push_back({end, decayed ? 0.1f : 0.0f});
  }
  return runs;
}

cpu::AdamWStep constants(int64_t t) {
  cpu::AdamWStep s;
  s.lr = 3e-3f;
  s.beta1 = 0.9f;
  s.beta2 = 0.95f;
  s.eps = 1e-8f;
  s.c1 = cuda::adamw_bias_correction(s.beta1, t);
  s.c2 = cuda::adamw_bias_correction(s.beta2, t);
  return s;
}

TEST_F(AdamWTwin, MoreRunsThanOneLaunchTakesFp32) {
  const std::vector<cpu::DecayRun> runs = many_runs(12000);
  const int64_t n = cpu::span_of(runs);
  ASSERT_GT(runs.size(), size_t{2} * cuda::kMaxRunsPerLaunch) << "three launches";
  ASSERT_GT(runs[cuda::kMaxRunsPerLaunch - 1].end, int64_t{1} << 20) << "a launch > 2^20 threads";
  Vec p = rnd(n, 1), m(n, 0.0f), v(n, 0.0f);
  DevF p_d(p), m_d(m), v_d(v), g_d(n);
  for (int64_t t = 1; t <= 2; ++t) {
    const Vec g = rnd(n, 1 + t);
    cpu::AdamWStep s = constants(t);
    s.grad_scale = t == 1 ? 0.5f : 0.25f;  // a clipping coefficient: m and v see g·grad_scale
    cpu::adamw_update_runs(p.data(), g.data(), m.data(), v.data(), runs, s);
    CUDA_CHECK(cudaMemcpy(g_d.p, g.data(), 4 * n, cudaMemcpyHostToDevice));
    cuda::adamw_update(p_d.p, g_d.p, m_d.p, v_d.p, runs, s);
  }
  EXPECT_LE(rel_err(p_d.get(), p, "adamw runs: params"), kElem);
  EXPECT_LE(rel_err(m_d.get(), m, "adamw runs: m"), kElem);
  EXPECT_LE(rel_err(v_d.get(), v, "adamw runs: v"), kElem);
}

TEST_F(AdamWTwin, MoreRunsThanOneLaunchTakesMixed) {
  const std::vector<cpu::DecayRun> runs = many_runs(1000);
  const int64_t n = cpu::span_of(runs);
  Vec master = rnd(n, 11), m(n, 0.0f), v(n, 0.0f);
  DevF master_d(master), m_d(m), v_d(v);
  Tensor p16 = Tensor::empty({n}, DType::kBF16, MemCategory::kParameters);
  Tensor g16 = Tensor::empty({n}, DType::kF16, MemCategory::kGradients);
  Tensor p16_d = Tensor::empty({n}, DType::kBF16, MemCategory::kParameters, Device::kCUDA);
  Tensor g16_d = Tensor::empty({n}, DType::kF16, MemCategory::kGradients, Device::kCUDA);
  KernelOps& cpu_ops = kernel_ops(Device::kCPU);
  for (int64_t t = 1; t <= 2; ++t) {
    cpu::round_to(rnd(n, 11 + t, -8.0f, 8.0f).data(), g16.raw(), DType::kF16, n);
    cpu::AdamWStep s = constants(t);
    s.grad_scale = 0.125f;  // 1/S = 1/8
    cpu_ops.adamw_update_mixed(p16.raw(), DType::kBF16, g16.raw(), DType::kF16, master.data(),
                               m.data(), v.data(), runs, s);
    CUDA_CHECK(cudaMemcpy(g16_d.raw(), g16.raw(), 2 * n, cudaMemcpyHostToDevice));
    cuda::adamw_update_mixed(p16_d.raw(), DType::kBF16, g16_d.raw(), DType::kF16, master_d.p,
                             m_d.p, v_d.p, runs, s);
  }
  EXPECT_LE(rel_err(master_d.get(), master, "adamw runs: master"), kElem);
  EXPECT_LE(rel_err(m_d.get(), m, "adamw runs: m (mixed)"), kElem);
  const std::vector<uint16_t> got = test::from_device<uint16_t>(p16_d.raw(), n);
  const uint16_t* ref = static_cast<const uint16_t*>(p16.raw());
  int64_t off_by_more = 0;  // a master a few ulp away may round to the neighbouring bf16
  for (int64_t i = 0; i < n; ++i) off_by_more += std::abs(int(got[i]) - int(ref[i])) > 1;
  EXPECT_EQ(off_by_more, 0);
}

TEST(AdamWHost, RunsWhoseEndsDoNotIncreaseAreRefusedBeforeAnyDeviceWork) {
  const cpu::AdamWStep s = constants(1);
  EXPECT_THROW(cuda::adamw_update(nullptr, nullptr, nullptr, nullptr, {{5, 0.f}, {5, 0.1f}}, s),
               std::invalid_argument);
  EXPECT_THROW(cuda::adamw_update(nullptr, nullptr, nullptr, nullptr, {{0, 0.f}}, s),
               std::invalid_argument);
  cuda::adamw_update(nullptr, nullptr, nullptr, nullptr, {}, s);  // no runs: nothing to launch
}

}  // namespace
}  // namespace llmp
