// ZeRO-R's Pa+cpu (GPTConfig::cpu_checkpoints; Rajbhandari et al. 2020 §6.1, DeepSpeed's
// cpu_checkpointing) on a guarded FakeDevice (common/testing/fake_device.h) with kernels/cpu as
// the device's kernels, so it runs without a GPU: under full recomputation each kept block input
// leaves the device after its block's forward and comes back right before its recomputation.
// Measured here, not re-derived: the walk's loss and gradients equal the walk that keeps its
// checkpoints on the device bit for bit; the extra bytes the device copied each way are exactly
// the checkpoints (L of them, B·T·C floats each; every 2nd block's with recompute_every 2); the
// meter counts the same; when the head's gradients are ready (the backward about to start) the
// device holds exactly the checkpoints' bytes fewer, and its activation peak never rises.
//
// Glossary: B batch, T sequence, C channels, L layers, k recompute_every, Ψ parameters.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "common/nn/gpt.h"
#include "common/nn/random_ids.h"
#include "common/nn/recompute.h"
#include "common/nn/unit_runner.h"
#include "common/tensor/memory.h"
#include "common/testing/fake_device.h"
#include "common/testing/fake_kernel_ops.h"
#include "common/train/recompute_report.h"

namespace llmp {
namespace {

struct DeviceRun {
  double loss = 0;
  std::vector<float> grads;
  int64_t h2d = 0, d2h = 0;  // bytes the device copied in and out
  int64_t peak_activations = 0;  // the device's kActivations peak during the walk
  int64_t at_head = 0;  // its kActivations when the head's gradients are ready (backward next)
  int64_t meter_down = 0, meter_up = 0;
  RecomputeMeter meter;  // as the walk left it
};

DeviceRun walk_on_device(const GPTConfig& cfg, const std::vector<float>& params, int B, int T) {
  const GPT model = GPT(cfg).with_device(Device::kCUDA);
  const int64_t psi = model.layout().num_params();
  const std::vector<int32_t> tok = random_ids(B * T, 1, cfg.vocab),
                             tgt = random_ids(B * T, 2, cfg.vocab);
  testing::FakeDevice dev(/*guarded=*/true);
  testing::FakeKernelOps ops(dev);
  DeviceRun run;
  Tensor p = Tensor::empty({psi}, DType::kF32, MemCategory::kParameters, Device::kCUDA);
  Tensor g = Tensor::zeros({psi}, DType::kF32, MemCategory::kGradients, Device::kCUDA);
  {
    Tensor host = Tensor::empty({psi});
    std::memcpy(host.f32(), params.data(), psi * sizeof(float));
    p.copy_from(host);
  }
  const int64_t h2d = dev.h2d_bytes(), d2h = dev.d2h_bytes();
  MemoryTracker::instance().reset_peak();
  RecomputeMeter::instance().reset();
  MemoryTracker& mt = MemoryTracker::instance();
  run.loss = forward_backward(model, p.f32(), g.f32(), tok.data(), tgt.data(), B, T, 1.0f / (B * T),
                              [&](int unit) {
                                if (unit == cfg.layers + 1)
                                  run.at_head = mt.current(Device::kCUDA, MemCategory::kActivations);
                              });
  run.peak_activations = MemoryTracker::instance().peak(Device::kCUDA, MemCategory::kActivations);
  run.h2d = dev.h2d_bytes() - h2d, run.d2h = dev.d2h_bytes() - d2h;
  run.meter_down = RecomputeMeter::instance().checkpoint_bytes_down;
  run.meter_up = RecomputeMeter::instance().checkpoint_bytes_up;
  run.meter = RecomputeMeter::instance();
  Tensor back = Tensor::empty({psi});
  back.copy_from(g);
  run.grads.assign(back.f32(), back.f32() + psi);
  return run;
}

TEST(CpuCheckpoints, WaitOnTheHostBetweenForwardAndRecomputationBitIdentically) {
  for (int every : {1, 2}) {
    GPTConfig cfg = GPTConfig::preset("tiny");
    cfg.layers = 4;
    cfg.recompute = Recompute::kFull;
    cfg.recompute_every = every;
    const int B = 2, T = 16, L = cfg.layers;
    std::vector<float> params(GPT(cfg).layout().num_params());
    GPT(cfg).init_params(params.data(), 3);

    const DeviceRun kept = walk_on_device(cfg, params, B, T);
    cfg.cpu_checkpoints = true;
    const DeviceRun offloaded = walk_on_device(cfg, params, B, T);

    EXPECT_EQ(offloaded.loss, kept.loss) << "every " << every;
    EXPECT_EQ(offloaded.grads, kept.grads) << "every " << every;
    // The checkpoints: the inputs of blocks 0, k, 2k, ... of the L, (B,T,C) fp32 each.
    const int64_t checkpoints = (L + every - 1) / every;
    const int64_t bytes = checkpoints * B * T * cfg.d * 4;
    EXPECT_EQ(offloaded.d2h - kept.d2h, bytes) << "every " << every << ": down once each";
    EXPECT_EQ(offloaded.h2d - kept.h2d, bytes) << "every " << every << ": up once each";
    EXPECT_EQ(offloaded.meter_down, bytes);
    EXPECT_EQ(offloaded.meter_up, bytes);
    EXPECT_EQ(kept.meter_down, 0);
    std::printf("every %d: device activations after the head %lld B keeping the checkpoints, %lld B "
                "offloading them (%lld B of checkpoints); peak %lld and %lld B\n",
                every, static_cast<long long>(kept.at_head),
                static_cast<long long>(offloaded.at_head), static_cast<long long>(bytes),
                static_cast<long long>(kept.peak_activations),
                static_cast<long long>(offloaded.peak_activations));
    // Between the forward and the backward the device holds no checkpoint: exactly their bytes
    // fewer. The peak never rises; where it falls depends on where it is (with k = 2 it is the
    // first segment's recomputation, which holds its checkpoint back on the device either way).
    EXPECT_EQ(kept.at_head - offloaded.at_head, bytes) << "every " << every;
    // The trainer's report row (recompute_report.h): the measured bytes against its closed form.
    bool found = false;
    for (const ReportRow& row : recompute_rows(cfg, GridShape{1, 1, 1}, B, T, 4, offloaded.meter))
      if (row.what.find("checkpoints copied to the host") != std::string::npos) {
        found = true;
        EXPECT_EQ(row.measured, double(bytes)) << row.what;
        EXPECT_EQ(row.formula, double(bytes)) << row.formula_text;
      }
    EXPECT_TRUE(found) << "no report row for the checkpoints on the host";
    EXPECT_LE(offloaded.peak_activations, kept.peak_activations) << "every " << every;
  }
}

}  // namespace
}  // namespace llmp
