// A stage on a FakeDevice against the same stage on the CPU (device_run.h).
#include "tests/device_run.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/data/corpus.h"
#include "common/data/sampler.h"
#include "common/testing/fake_device.h"
#include "common/testing/fake_kernel_ops.h"
#include "common/train/dp_util.h"
#include "common/train/report.h"
#include "tests/stage_test_util.h"

namespace llmp {
namespace {

constexpr int kGlobalBatch = 4;

struct Result {
  std::vector<double> losses;
  std::vector<float> state;  // params, m, v
  double bytes = 0;
  double eval_loss = 0;
  // The evaluation's own crossings: all of them (FakeDevice) and the staging's part.
  int64_t eval_up = 0, eval_down = 0;
  StagingStats eval_staged;
};

// `dev`: the FakeDevice of a device run (its byte counts read around the evaluation), or null.
Result train(const DpStrategyFactory& make, const GPT& model, ProcessGroup& dp, int steps,
             const testing::FakeDevice* dev = nullptr) {
  const Corpus corpus = Corpus::load("/usr/share/games/fortunes", model.config().ctx);
  const int T = model.config().ctx;
  AdamWConfig opt;
  opt.lr = 3e-3f;
  opt.weight_decay = 0.1f;
  const std::unique_ptr<Strategy> s = make(model, dp, opt, 11);
  const BatchSlice slice = s->batch_slice(kGlobalBatch);
  std::vector<int32_t> tok(slice.num_seqs * T), tgt(slice.num_seqs * T);
  Result r;
  const double before = dp.stats().total_bytes();
  for (int t = 1; t <= steps; ++t) {
    sample(corpus.train(), 42, t, slice.first_seq, slice.num_seqs, T, tok.data(), tgt.data());
    r.losses.push_back(s->train_step(tok.data(), tgt.data(), kGlobalBatch, T, t));
  }
  r.bytes = dp.stats().total_bytes() - before;
  // One evaluation on the last batch (train_main's --eval_every), its crossings counted apart.
  const StagingStats s0 = dp.staging_stats();
  const int64_t up0 = dev ? dev->h2d_bytes() : 0, down0 = dev ? dev->d2h_bytes() : 0;
  r.eval_loss = s->eval_loss(tok.data(), tgt.data(), kGlobalBatch, T);
  r.eval_up = dev ? dev->h2d_bytes() - up0 : 0;
  r.eval_down = dev ? dev->d2h_bytes() - down0 : 0;
  r.eval_staged.to_host_bytes = dp.staging_stats().to_host_bytes - s0.to_host_bytes;
  r.eval_staged.to_device_bytes = dp.staging_stats().to_device_bytes - s0.to_device_bytes;
  const int64_t psi = model.layout().num_params();
  r.state.resize(3 * psi);
  s->get_state(r.state.data(), r.state.data() + psi, r.state.data() + 2 * psi);
  return r;
}

}  // namespace

StagingStats expect_device_run_equals_cpu(const DpStrategyFactory& make, int steps,
                                          int64_t params_up_bytes) {
  DirectCopies copies;
  copies.params_up = params_up_bytes;
  return expect_device_run_equals_cpu(make, steps, copies);
}

StagingStats expect_device_run_equals_cpu(const DpStrategyFactory& make, int steps,
                                          const DirectCopies& copies) {
  return expect_device_run_equals_cpu(make, steps, copies, TrainPrecision::kFP32);
}

StagingStats expect_device_run_equals_cpu(const DpStrategyFactory& make, int steps,
                                          const DirectCopies& copies, TrainPrecision precision) {
  const GPT model(GPTConfig::preset("tiny"), TpComm::none(), storage_dtype(precision));
  const int64_t psi = model.layout().num_params();
  auto cpu_group = test_world().duplicate();
  const Result cpu = train(make, model, *cpu_group, steps);

  testing::FakeDevice dev(/*guarded=*/true);
  testing::FakeKernelOps ops(dev);
  auto dev_group = test_world().duplicate();
  const GPT on_device = model.with_device(Device::kCUDA);  // strategies keep a reference
  const Result gpu = train(make, on_device, *dev_group, steps, &dev);

  EXPECT_EQ(gpu.losses, cpu.losses);
  EXPECT_EQ(gpu.state, cpu.state);
  EXPECT_EQ(gpu.bytes, cpu.bytes);
  EXPECT_GT(cpu.bytes, 0);
  EXPECT_EQ(cpu_group->staging_stats().to_host_bytes, 0) << "host tensors are never staged";
  EXPECT_EQ(gpu.eval_loss, cpu.eval_loss);
  const StagingStats all = dev_group->staging_stats();
  // Everything that crossed between host and device: the initial parameters and each step's ids
  // (tokens for the embedding's forward and again for its backward, targets once; B/N sequences
  // of T) up, the evaluation's ids (tokens and targets once: no backward) up, get_state's
  // parameters, m and v down, and the staging. Nothing else (a stray round trip through the host
  // fails here).
  const int64_t T = model.config().ctx, seq = (kGlobalBatch / dev_group->size()) * T;
  const int64_t step_ids = 3 * 4 * seq, eval_ids = 2 * 4 * seq;
  // The initial parameters: rounded to 16 bits first under mixed precision (2Ψ, not 4Ψ).
  const int64_t params_up = copies.params_up >= 0 ? copies.params_up
                                                  : dtype_size(storage_dtype(precision)) * psi;
  EXPECT_EQ(dev.h2d_bytes(),
            params_up + steps * step_ids + eval_ids + copies.up + all.to_device_bytes);
  EXPECT_EQ(dev.d2h_bytes(), (copies.down < 0 ? 12 * psi : copies.down) + all.to_host_bytes);
  // The evaluation alone: its ids and its collectives' staging (ZeRO-3's gathers), nothing else.
  EXPECT_EQ(gpu.eval_up, eval_ids + gpu.eval_staged.to_device_bytes);
  EXPECT_EQ(gpu.eval_down, gpu.eval_staged.to_host_bytes);
  StagingStats st = all;  // the training steps' and get_state's staging: the stage test's part
  st.to_host_bytes -= gpu.eval_staged.to_host_bytes;
  st.to_device_bytes -= gpu.eval_staged.to_device_bytes;
  return st;
}

OffloadBytes measure_offload(const OffloadFactory& make, TrainPrecision precision) {
  testing::FakeDevice dev(/*guarded=*/true);
  testing::FakeKernelOps ops(dev);
  const GPT model = GPT(GPTConfig::preset("tiny"), TpComm::none(), storage_dtype(precision))
                        .with_device(Device::kCUDA);
  const int64_t T = model.config().ctx;
  const int B = 2 * test_world().size();
  std::vector<int32_t> ids(4 * T);  // this rank's 2 sequences of tokens, then of targets
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((7 * i + 3) % 64);
  const auto& mt = MemoryTracker::instance();
  auto states = [&](Device d) {
    return mt.current(d, MemCategory::kParameters) + mt.current(d, MemCategory::kGradients) +
           mt.current(d, MemCategory::kOptimizerState);
  };
  const int64_t dev0 = states(Device::kCUDA), host0 = states(Device::kCPU);
  auto group = test_world().duplicate();
  OffloadBytes b;
  for (int offload = 0; offload < 2; ++offload) {
    const std::unique_ptr<Strategy> s = make(model, *group, offload == 1);
    s->train_step(ids.data(), ids.data() + 2 * T, B, T, 1);
    b.device[offload] = states(Device::kCUDA) - dev0;
    b.host[offload] = states(Device::kCPU) - host0;
    if (offload == 1) {
      for (const ReportRow& row : s->report()) {
        EXPECT_TRUE(report_row_ok(row)) << row.what << ": measured " << row.measured
                                        << ", formula " << row.formula_text << " = "
                                        << row.formula;
      }
    }
  }
  return b;
}

void expect_offload_resumes_exactly(const OffloadFactory& make, TrainPrecision precision) {
  testing::FakeDevice dev(/*guarded=*/true);
  testing::FakeKernelOps ops(dev);
  const GPT model = GPT(GPTConfig::preset("tiny"), TpComm::none(), storage_dtype(precision))
                        .with_device(Device::kCUDA);
  const int64_t T = model.config().ctx, psi = model.layout().num_params();
  const int B = 2 * test_world().size();
  std::vector<int32_t> ids(4 * T);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>((5 * i + 1) % 64);
  auto group = test_world().duplicate();
  const std::unique_ptr<Strategy> a = make(model, *group, true);
  a->train_step(ids.data(), ids.data() + 2 * T, B, T, 1);
  std::vector<float> sa(3 * psi), sb(3 * psi);
  a->get_state(sa.data(), sa.data() + psi, sa.data() + 2 * psi);
  const std::unique_ptr<Strategy> b = make(model, *group, true);
  b->set_state(sa.data(), sa.data() + psi, sa.data() + 2 * psi);
  std::reverse(ids.begin(), ids.end());  // another batch for step 2
  a->train_step(ids.data(), ids.data() + 2 * T, B, T, 2);
  b->train_step(ids.data(), ids.data() + 2 * T, B, T, 2);
  a->get_state(sa.data(), sa.data() + psi, sa.data() + 2 * psi);
  b->get_state(sb.data(), sb.data() + psi, sb.data() + 2 * psi);
  EXPECT_EQ(sb, sa) << "the resumed stage diverged from the one that saved";
}

InjectedOverflow::InjectedOverflow(int step, const char* ranks) {
  setenv("LLMP_TEST_OVERFLOW_STEP", std::to_string(step).c_str(), 1);
  setenv("LLMP_TEST_OVERFLOW_RANKS", ranks, 1);
}

InjectedOverflow::~InjectedOverflow() {
  unsetenv("LLMP_TEST_OVERFLOW_STEP");
  unsetenv("LLMP_TEST_OVERFLOW_RANKS");
}

void expect_sharded_run_equals_cpu(const ShardedFactory& make, int steps,
                                   TrainPrecision precision) {
  const int64_t psi = GPT(GPTConfig::preset("tiny")).layout().num_params();
  const int64_t shard = ShardLayout(psi, test_world().size()).count[test_world().rank()];
  MixedPrecisionConfig mp;
  mp.precision = precision;
  mp.scaler.scale = 1024.0f;  // fp16 only
  const bool mixed = precision != TrainPrecision::kFP32;
  const DpStrategyFactory stage = [&make, mp](const GPT& model, ProcessGroup& dp, AdamWConfig opt,
                                              uint64_t seed) {
    return make(model, dp, opt, seed, mp);
  };
  DirectCopies copies;
  if (mixed) copies.up = 4 * shard;  // the fp32 master shard, once
  const StagingStats st = mixed ? expect_device_run_equals_cpu(stage, steps, copies, precision)
                                : expect_device_run_equals_cpu(stage, steps, copies);
  const int64_t e = mixed ? 2 : 4, gathers = mixed ? 3 : 2;
  EXPECT_EQ(st.to_host_bytes, steps * e * (psi + shard) + gathers * 4 * shard);
  EXPECT_EQ(st.to_device_bytes, steps * e * (psi + shard) + gathers * 4 * psi);
}

}  // namespace llmp
