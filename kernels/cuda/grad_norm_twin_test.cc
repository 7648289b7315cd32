// --clip_grad's norm on the GPU (common/optim/grad_clip.h): KernelOps::sum_of_squares called
// THROUGH the CUDA table on f32, f16 and bf16 gradients (the 16-bit ones widened as they are
// read), against kernels/cpu/grad_norm.h; and GradClip over a gradient held half on the device,
// half on the host, which asks kernel_ops(t.device()) for each part's sum. Both devices sum in
// double, in another order: within 1e-9 relative (n·2⁻⁵³ ≈ 3e-11 for n = 300007). Sizes: 13
// (one block) and 300007 (> kMaxReduceBlocks·kThreads: the grid-stride loop goes round). In the
// kernel_table_twin_test binary; SKIPPED with the runtime's reason without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "common/optim/grad_clip.h"
#include "common/tensor/tensor.h"
#include "kernels/cpu/convert.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/twin_test_util.h"
#include "kernels/ops/kernel_ops.h"

namespace llmp {
namespace {

using GradNormTwin = test::GpuTwin;

TEST_F(GradNormTwin, SumOfSquaresAndTheClipNormOnTheDevice) {
  KernelOps& gpu = kernel_ops(Device::kCUDA);
  KernelOps& cpu_ops = kernel_ops(Device::kCPU);
  for (int64_t n : {int64_t{13}, int64_t{300007}})
    for (DType dt : {DType::kF32, DType::kF16, DType::kBF16}) {
      const test::Vec v = test::rnd(n, 31, -3.0f, 3.0f);
      Tensor h = Tensor::empty({n}, dt, MemCategory::kGradients);
      cpu::round_to(v.data(), h.raw(), dt, n);
      Tensor d = Tensor::empty({n}, dt, MemCategory::kGradients, Device::kCUDA);
      CUDA_CHECK(cudaMemcpy(d.raw(), h.raw(), h.nbytes(), cudaMemcpyHostToDevice));
      const double ref = cpu_ops.sum_of_squares(as_stored(h), n);
      EXPECT_GT(ref, 0.5 * n) << "nontrivial";
      EXPECT_NEAR(gpu.sum_of_squares(as_stored(d), n), ref, 1e-9 * ref) << to_string(dt) << n;
      // A gradient half on the device, half on the host: one norm over both parts.
      GradClip clip(1.0, nullptr);
      const int64_t k = n / 2;
      clip.coefficient({d.narrow(0, k), h.narrow(k, n - k)});
      EXPECT_NEAR(clip.last_norm(), std::sqrt(ref), 1e-9 * std::sqrt(ref)) << to_string(dt) << n;
    }
}

}  // namespace
}  // namespace llmp
