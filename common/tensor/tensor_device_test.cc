// Tensor::zeros, fill and copy_from on device tensors, through the device allocator's memory
// operations. The device is a FakeDevice (common/testing/fake_device.h: host memory registered
// as Device::kCUDA), so what is checked here is the routing: which allocator does each operation,
// in which direction the bytes go, and that the data arrives. The same operations on a real GPU
// are in kernels/cuda/fill_copy_test (skipped without one).
#include <gtest/gtest.h>

#include <stdexcept>

#include "common/tensor/tensor.h"
#include "common/testing/fake_device.h"

namespace llmp {
namespace {

Tensor ramp(int64_t n, float start) {
  Tensor t = Tensor::empty({n});
  for (int64_t i = 0; i < n; ++i) t.f32()[i] = start + static_cast<float>(i);
  return t;
}

TEST(TensorOnDevice, ZerosAndFillRunOnTheDevice) {
  testing::FakeDevice dev;
  Tensor d = Tensor::empty({1000}, DType::kF32, MemCategory::kGradients, Device::kCUDA);
  d.fill(7.0f);
  d.narrow(100, 50).fill(0.0f);  // a shard reset, as ZeRO zeroes its gradient shard
  Tensor h = Tensor::empty({1000});
  h.copy_from(d);
  for (int64_t i = 0; i < 1000; ++i)
    ASSERT_EQ(h.f32()[i], (i >= 100 && i < 150) ? 0.0f : 7.0f) << "element " << i;
  Tensor z = Tensor::zeros({3, 5}, DType::kBF16, MemCategory::kOther, Device::kCUDA);
  EXPECT_EQ(z.device(), Device::kCUDA);
  Tensor zh = Tensor::empty({15}, DType::kBF16);
  for (int i = 0; i < 15; ++i) zh.data<uint16_t>()[i] = 0xFFFF;  // not zero before the copy
  zh.copy_from(z);
  const auto* bits = zh.data<uint16_t>();
  for (int i = 0; i < 15; ++i) EXPECT_EQ(bits[i], 0) << "element " << i;
}

TEST(TensorOnDevice, CopiesGoThroughTheDeviceInEachDirection) {
  testing::FakeDevice dev;
  Tensor h = ramp(64, 1.0f);
  Tensor d = Tensor::empty({64}, DType::kF32, MemCategory::kOther, Device::kCUDA);
  d.copy_from(h);  // host -> device
  EXPECT_EQ(dev.h2d_bytes(), 256);
  Tensor d2 = Tensor::zeros({64}, DType::kF32, MemCategory::kOther, Device::kCUDA);
  d2.narrow(0, 32).copy_from(d.narrow(32, 32));  // device -> device, a shard
  EXPECT_EQ(dev.d2d_bytes(), 128);
  Tensor back = Tensor::zeros({64});
  back.copy_from(d2);  // device -> host
  EXPECT_EQ(dev.d2h_bytes(), 256);
  for (int i = 0; i < 32; ++i) EXPECT_EQ(back.f32()[i], 33.0f + i) << "element " << i;
  for (int i = 32; i < 64; ++i) EXPECT_EQ(back.f32()[i], 0.0f) << "element " << i;
  // Host -> host never touches the device.
  Tensor h2 = Tensor::empty({64});
  h2.copy_from(h);
  EXPECT_EQ(dev.h2d_bytes() + dev.d2h_bytes() + dev.d2d_bytes(), 256 + 128 + 256);
}

TEST(TensorOnDevice, DeviceBytesAreCountedByTheAllocatorAndTheTracker) {
  testing::FakeDevice dev;
  auto& mt = MemoryTracker::instance();
  const int64_t before = mt.current(MemCategory::kParameters);
  {
    Tensor d = Tensor::zeros({256}, DType::kF32, MemCategory::kParameters, Device::kCUDA);
    EXPECT_EQ(dev.in_use(), 1024);
    EXPECT_EQ(mt.current(MemCategory::kParameters) - before, 1024);
  }
  EXPECT_EQ(dev.in_use(), 0);
  EXPECT_EQ(mt.current(MemCategory::kParameters), before);
}

// Per device: what ZeRO-Offload's report reads (device bytes drop, host bytes rise).
TEST(TensorOnDevice, TheTrackerCountsEachDeviceApart) {
  testing::FakeDevice dev;
  auto& mt = MemoryTracker::instance();
  const int64_t host0 = mt.current(Device::kCPU, MemCategory::kOptimizerState),
                dev0 = mt.current(Device::kCUDA, MemCategory::kOptimizerState),
                dev_total0 = mt.current_total(Device::kCUDA);
  mt.reset_peak();
  {
    Tensor d = Tensor::zeros({256}, DType::kF32, MemCategory::kOptimizerState, Device::kCUDA);
    Tensor h = Tensor::zeros({64}, DType::kF32, MemCategory::kOptimizerState);
    EXPECT_EQ(mt.current(Device::kCUDA, MemCategory::kOptimizerState) - dev0, 1024);
    EXPECT_EQ(mt.current(Device::kCPU, MemCategory::kOptimizerState) - host0, 256);
    EXPECT_EQ(mt.current_total(Device::kCUDA) - dev_total0, 1024);
    { Tensor g = Tensor::empty({128}, DType::kBF16, MemCategory::kGradients, Device::kCUDA); }
    EXPECT_EQ(mt.peak(Device::kCUDA, MemCategory::kGradients), 256);
    EXPECT_EQ(mt.peak_total(Device::kCUDA) - dev_total0, 1024 + 256);
    EXPECT_EQ(mt.peak(Device::kCPU, MemCategory::kGradients),
              mt.current(Device::kCPU, MemCategory::kGradients));  // nothing on the host
  }
  EXPECT_EQ(mt.current(Device::kCUDA, MemCategory::kOptimizerState), dev0);
  EXPECT_EQ(mt.current(Device::kCPU, MemCategory::kOptimizerState), host0);
  EXPECT_EQ(mt.current_total(Device::kCUDA), dev_total0);
}

TEST(TensorOnDevice, BadFillsAndCopiesNameTheTensors) {
  testing::FakeDevice dev;
  Tensor d = Tensor::empty({4}, DType::kF16, MemCategory::kOther, Device::kCUDA);
  try {
    d.fill(1.0f);
    FAIL() << "a non-zero fill of an f16 tensor must throw";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "Tensor::fill(1.000000) on (4,) f16 cuda: a non-zero fill supports "
                           "f32 only");
  }
  Tensor h = Tensor::empty({5});
  try {
    h.copy_from(d);
    FAIL() << "copying 4 f16 into 5 f32 must throw";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "copy_from: (4,) f16 cuda into (5,) f32 cpu");
  }
}

// A strided copy of device tensors is the device's (Allocator::copy_2d; without an override, a
// copy per run through the same allocator): guarded memory is never read on the host, and only
// the runs' bytes move, device to device.
TEST(TensorOnDevice, StridedCopiesStayOnTheDevice) {
  testing::FakeDevice dev(/*guarded=*/true);
  Tensor d = Tensor::empty({6, 4}, DType::kF32, MemCategory::kOther, Device::kCUDA);
  d.copy_from(ramp(24, 0.0f));
  Tensor cols = Tensor::zeros({6, 2}, DType::kF32, MemCategory::kOther, Device::kCUDA);
  const int64_t d2d = dev.d2d_bytes();
  copy_strided(cols, {0, 2}, d, {1, 4}, 2, 6);  // columns 1 and 2 of each of the 6 rows
  EXPECT_EQ(dev.d2d_bytes() - d2d, 6 * 2 * 4);
  Tensor back = Tensor::empty({6, 2});
  back.copy_from(cols);
  for (int r = 0; r < 6; ++r)
    for (int c = 0; c < 2; ++c)
      EXPECT_EQ(back.f32()[r * 2 + c], static_cast<float>(r * 4 + 1 + c)) << r << ", " << c;
  EXPECT_THROW(copy_strided(cols, {0, 2}, ramp(24, 0.0f), {1, 4}, 2, 6), std::invalid_argument);
}

}  // namespace
}  // namespace llmp
