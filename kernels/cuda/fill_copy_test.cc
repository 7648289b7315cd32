// Tests for the first CUDA targets: CUDA_CHECK, the device allocator, fill and the copies.
//
// Two groups. The first runs everywhere the toolkit is (a build machine without a GPU included):
// error messages, registration of the allocator, availability probing, argument checks. The
// second (FillCopyGpu) needs a GPU; without one each test calls GTEST_SKIP() with the reason, so
// gtest reports it as SKIPPED, not OK ("[  SKIPPED ] 4 tests" in test.log, result="skipped" in
// test.xml). Bazel 4.2.3 has no skipped status: it shows the target as PASSED.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "common/tensor/tensor.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_allocator.h"
#include "kernels/cuda/fill_copy.h"
#include "kernels/cuda/upload_ring.h"

namespace llmp {
namespace {

// ---- Runs without a GPU ------------------------------------------------------------------------

TEST(CudaCheck, MessageNamesThePlaceTheCallAndTheReason) {
  EXPECT_EQ(cuda_error_message(cudaErrorMemoryAllocation, "cudaMalloc(&p, 8)", "a/b.cc", 12),
            "a/b.cc:12: CUDA error: cudaMalloc(&p, 8) failed: cudaErrorMemoryAllocation: "
            "out of memory");
}

TEST(CudaCheck, FailureExitsWithTheMessage) {
  EXPECT_EXIT(CUDA_CHECK(cudaErrorInvalidValue), ::testing::ExitedWithCode(1),
              "fill_copy_test.cc:[0-9]+: CUDA error: cudaErrorInvalidValue failed: "
              "cudaErrorInvalidValue: invalid argument");
}

TEST(DeviceAllocator, IsRegisteredByLinkingAlone) {
  // No call to register_cuda_allocator(): the static registrar (alwayslink) did it.
  EXPECT_NO_THROW(allocator_for(Device::kCUDA));
  register_cuda_allocator();  // idempotent
  EXPECT_NO_THROW(allocator_for(Device::kCUDA));
}

TEST(DeviceAllocator, AvailabilityIsAnsweredWithAReasonAndTheSameEachTime) {
  std::string why, again;
  const bool available = cuda_device_available(&why);
  std::printf("cuda_device_available() = %s (%s)\n", available ? "true" : "false", why.c_str());
  EXPECT_FALSE(why.empty());
  EXPECT_EQ(cuda_device_available(&again), available);
  EXPECT_EQ(again, why);
  // With a GPU no error is left behind. (Without a driver the runtime's init error is sticky.)
  if (available) {
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  }
}

TEST(FillCopy, RejectTensorsOnTheWrongDevice) {
  // The checks run before any CUDA call, so they hold without a GPU.
  Tensor host = Tensor::zeros({4});
  EXPECT_THROW(cuda::copy_to_host(host), std::invalid_argument);
  EXPECT_THROW(cuda::fill(host, 1.0f), std::invalid_argument);
  EXPECT_THROW(cuda::copy_to_device(Tensor()), std::invalid_argument);
  try {
    cuda::copy_to_host(host);
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "copy_to_host: expected a cuda tensor, got (4,) f32 cpu");
  }
}

// ---- Needs a GPU -------------------------------------------------------------------------------

class FillCopyGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    if (cuda_device_available(&why)) return;
    GTEST_SKIP() << "skipped: no CUDA device (" << why << ")";
  }
};

// n > kMaxBlocks * kThreads = 2^20, so each thread of the capped grid loops more than once; the
// odd tail checks the bound.
constexpr int64_t kBig = 3 * (int64_t{1} << 20) + 7;

TEST_F(FillCopyGpu, FillSetsEveryElement) {
  Tensor d = Tensor::empty({kBig}, DType::kF32, MemCategory::kOther, Device::kCUDA);
  cuda::fill(d, 3.5f);
  Tensor h = cuda::copy_to_host(d);
  int64_t wrong = 0;
  for (int64_t i = 0; i < kBig; ++i) wrong += h.f32()[i] != 3.5f;
  EXPECT_EQ(wrong, 0) << "of " << kBig << " elements";
}

TEST_F(FillCopyGpu, RoundTripKeepsValuesShapeDtypeAndCategory) {
  Tensor h = Tensor::empty({37, 101}, DType::kF32, MemCategory::kParameters);
  for (int64_t i = 0; i < h.numel(); ++i) h.f32()[i] = 0.25f * static_cast<float>(i) - 100.0f;
  Tensor d = cuda::copy_to_device(h);
  EXPECT_EQ(d.device(), Device::kCUDA);
  EXPECT_EQ(d.shape(), h.shape());
  EXPECT_EQ(d.category(), MemCategory::kParameters);
  Tensor back = cuda::copy_to_host(d);
  EXPECT_EQ(back.device(), Device::kCPU);
  EXPECT_EQ(back.shape(), h.shape());
  EXPECT_EQ(back.dtype(), DType::kF32);
  EXPECT_EQ(back.category(), MemCategory::kParameters);
  for (int64_t i = 0; i < h.numel(); ++i) ASSERT_EQ(back.f32()[i], h.f32()[i]) << "element " << i;
}

TEST_F(FillCopyGpu, FillOfANarrowViewTouchesOnlyItsRange) {
  Tensor d = Tensor::empty({1000}, DType::kF32, MemCategory::kGradients, Device::kCUDA);
  cuda::fill(d, 0.0f);
  cuda::fill(d.narrow(300, 200), -1.0f);  // the rank's shard, as in ZeRO
  Tensor h = cuda::copy_to_host(d);
  for (int64_t i = 0; i < 1000; ++i)
    ASSERT_EQ(h.f32()[i], (i >= 300 && i < 500) ? -1.0f : 0.0f) << "element " << i;
}

TEST_F(FillCopyGpu, DeviceBytesAreCountedUnderTheTensorsCategory) {
  auto& mt = MemoryTracker::instance();
  const int64_t before = mt.current(MemCategory::kActivations);
  const int64_t before_dev = cuda_bytes_in_use();
  {
    Tensor d = Tensor::empty({kBig}, DType::kF32, MemCategory::kActivations, Device::kCUDA);
    EXPECT_EQ(mt.current(MemCategory::kActivations) - before, 4 * kBig);
    EXPECT_EQ(cuda_bytes_in_use() - before_dev, 4 * kBig);  // the tracker counted device bytes
    Tensor shard = d.narrow(10, 20);                       // a view: no new bytes
    EXPECT_EQ(cuda_bytes_in_use() - before_dev, 4 * kBig);
    Tensor h = cuda::copy_to_host(shard);  // 80 host bytes, same category
    EXPECT_EQ(mt.current(MemCategory::kActivations) - before, 4 * kBig + 80);
    EXPECT_EQ(cuda_bytes_in_use() - before_dev, 4 * kBig);
  }
  EXPECT_EQ(mt.current(MemCategory::kActivations), before);
  EXPECT_EQ(cuda_bytes_in_use(), before_dev);
}

TEST_F(FillCopyGpu, TensorZerosFillAndCopyFromWorkOnTheDevice) {
  // The same calls as common/tensor/tensor_device_test (there on a FakeDevice), on the GPU: the
  // allocator's set_zero (cudaMemset), fill_f32 (the fill kernel) and copy (cudaMemcpy).
  Tensor d = Tensor::zeros({1000}, DType::kF32, MemCategory::kGradients, Device::kCUDA);
  d.narrow(100, 50).fill(2.5f);
  Tensor d2 = Tensor::zeros({1000}, DType::kF32, MemCategory::kGradients, Device::kCUDA);
  d2.copy_from(d);  // device -> device
  Tensor h = Tensor::empty({1000});
  h.copy_from(d2);  // device -> host
  for (int64_t i = 0; i < 1000; ++i)
    ASSERT_EQ(h.f32()[i], (i >= 100 && i < 150) ? 2.5f : 0.0f) << "element " << i;
  for (int64_t i = 0; i < 1000; ++i) h.f32()[i] = static_cast<float>(i);
  d.copy_from(h);  // host -> device
  Tensor back = cuda::copy_to_host(d);
  for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(back.f32()[i], static_cast<float>(i));
}

// Small uploads go through the pinned ring (upload_ring.h): copy_from returns before the GPU has
// the bytes, and the host may rewrite its buffer at once. 3·kSlots uploads from ONE host buffer,
// rewritten after each, into their own device tensors, queued behind a fill of kBig elements (on
// a GPU the copies wait in the stream while the host moves on), then one larger than a slot
// (cudaMemcpy): each tensor holds its own values. On a GPU, a ring that copied from the caller's
// buffer would show later values, and so would one that reused a slot before its copy was done.
// (The emulator copies at once, so there only the values and the slot cycling are checked.)
TEST_F(FillCopyGpu, SmallUploadsKeepTheirOwnValuesWhileTheHostMovesOn) {
  constexpr int kUploads = 3 * cuda::UploadRing::kSlots;
  const int64_t n = 4096, large = cuda::UploadRing::kSlotBytes / 4 + 1;
  Tensor ahead = Tensor::empty({kBig}, DType::kF32, MemCategory::kOther, Device::kCUDA);
  cuda::fill(ahead, 1.0f);
  Tensor host = Tensor::empty({large});
  std::vector<Tensor> dev;
  for (int u = 0; u <= kUploads; ++u) {
    const int64_t m = u < kUploads ? n : large;
    Tensor src = host.narrow(0, m);
    for (int64_t i = 0; i < m; ++i) src.f32()[i] = static_cast<float>(u * n + i);
    dev.push_back(Tensor::empty({m}, DType::kF32, MemCategory::kOther, Device::kCUDA));
    dev.back().copy_from(src);
  }
  for (int u = 0; u <= kUploads; ++u) {
    Tensor back = cuda::copy_to_host(dev[u]);
    for (int64_t i = 0; i < back.numel(); ++i)
      ASSERT_EQ(back.f32()[i], static_cast<float>(u * n + i)) << "upload " << u << ", at " << i;
  }
}

// Tensor re-layouts (copy_strided: Ulysses' head split, the sequence-parallel gather) are one
// cudaMemcpy2DAsync each (device_allocator's copy_2d): a column block of a (rows, cols) matrix
// into a dense (rows, w) tensor and back into zeros, against the same copies on the host, in
// fp32 and bf16 (pitches in bytes of the dtype).
TEST_F(FillCopyGpu, StridedCopiesMoveTheSameRunsAsOnTheHost) {
  const int64_t rows = 257, cols = 96, w = 40, c0 = 24;
  for (DType dt : {DType::kF32, DType::kBF16}) {
    Tensor h = Tensor::empty({rows, cols}, dt);
    const int64_t es = dtype_size(dt);
    auto* bytes = static_cast<uint8_t*>(h.raw());
    for (int64_t i = 0; i < h.nbytes(); ++i) bytes[i] = static_cast<uint8_t>(i * 7 + i / 251);
    Tensor d = Tensor::empty({rows, cols}, dt, MemCategory::kOther, Device::kCUDA);
    d.copy_from(h);
    Tensor block = Tensor::zeros({rows, w}, dt, MemCategory::kOther, Device::kCUDA);
    copy_strided(block, {0, w}, d, {c0, cols}, w, rows);
    Tensor back = Tensor::zeros({rows, cols}, dt, MemCategory::kOther, Device::kCUDA);
    copy_strided(back, {c0, cols}, block, {0, w}, w, rows);
    Tensor want = Tensor::zeros({rows, cols}, dt), got = Tensor::empty({rows, cols}, dt);
    Tensor want_block = Tensor::zeros({rows, w}, dt);
    copy_strided(want_block, {0, w}, h, {c0, cols}, w, rows);
    copy_strided(want, {c0, cols}, want_block, {0, w}, w, rows);
    got.copy_from(back);
    const auto* g = static_cast<const uint8_t*>(got.raw());
    const auto* e = static_cast<const uint8_t*>(want.raw());
    int64_t wrong = 0;
    for (int64_t i = 0; i < got.nbytes(); ++i) wrong += g[i] != e[i];
    EXPECT_EQ(wrong, 0) << to_string(dt) << ": of " << got.nbytes() << " bytes (" << es
                        << " per element)";
  }
}

}  // namespace
}  // namespace llmp
