// The context-parallel strategy (cp_strategy.h) with --device cuda's placement, at 2 ranks,
// without a GPU: the same stage on the CPU and on a guarded FakeDevice (common/testing/
// fake_device.h: device memory unreadable by host code; the CPU kernels registered as the
// device's, each checking its pointers are device memory), bit for bit, and every byte that
// crossed between host and device equal to its closed form. One TEST per core that runs on a
// device (AttentionCore::supports_device()): a core is one more TEST line with its factory and
// the bytes its collectives stage per block.
//
// What crosses, per rank (fp32; bf16/fp16 in the mixed-precision tests below; B global batch,
// every rank reads all of it; T positions, Tl = T/p held; A channels; L blocks; Ψ parameters),
// with nothing else allowed (a stray host round trip fails the sums):
//   construction   4Ψ up                 the initial parameters (made on the host, copied once)
//   a train step   4(3·B·Tl + 2·Tl) up   the held ids: tokens and positions for the embedding's
//                                        forward and again for its backward, targets once
//                  4Ψ down, 4Ψ up        the gradient all_reduce, staged by the MPI backend
//                  L·core's staging      the core's collectives (Ulysses: 4 all_to_alls, the
//                                        input down and the output up: 32·B·Tl·A each way;
//                                        ring attention: 3p − 2 sends of 8·B·Tl·A; ring
//                                        self-attention: 2(p − 1) of 4·B·Tl·A, 2(p − 1) of
//                                        8·B·Tl·A)
//   the evaluation 4(2·B·Tl + Tl) up     tokens, positions and targets once (no backward)
//                  L·core's forward staging (Ulysses: 16·B·Tl·A each way)
//   get_state      12Ψ down              parameters, m and v through to_host
// With --recompute full each training step also stages L·core's forward staging once more: every
// block's forward, its collectives included, runs again before its backward; with ZeRO-R's
// Pa+cpu (cpu_checkpoints) each of the L kept block inputs (e·B·Tl·A bytes) goes down after its
// forward and up before its recomputation.
// and no activation or communication buffer of the device run on the host (MemoryTracker).
//
// Glossary: p ranks (2), B sequences, T positions, Tl = T/p, A channels, H heads, L blocks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/cp/cp_strategy.h"
#include "common/cp/ring_attention.h"
#include "common/cp/ring_self_attention.h"
#include "common/cp/ulysses.h"
#include "common/data/corpus.h"
#include "common/data/sampler.h"
#include "common/testing/fake_device.h"
#include "common/testing/fake_kernel_ops.h"
#include "common/train/report.h"

namespace llmp {
namespace {

constexpr int kSteps = 2, kB = 4, kT = 16;

ProcessGroup& world() {
  static const std::shared_ptr<ProcessGroup> w = ProcessGroup::world();
  return *w;
}

/// tiny with H = 4 heads (Ulysses at p = 2 attends with 2 whole heads per rank), its activations
/// in `dt` (f32, or the 16-bit storage of mixed precision); `recompute`: --recompute full.
GPT cp_model(DType dt = DType::kF32, bool recompute = false, bool cpu_checkpoints = false) {
  GPTConfig c = GPTConfig::preset("tiny");
  c.heads = 4;
  c.ctx = kT;
  if (recompute) c.recompute = Recompute::kFull;
  c.cpu_checkpoints = cpu_checkpoints;
  return GPT(c, TpComm::none(), dt);
}

/// Bytes the core's collectives stage through the host for one block (device tensors given to
/// the MPI backend): in a training step (forward and backward) and in a forward alone.
struct CoreStaging {
  int64_t step_down, step_up, forward_down, forward_up;
};
/// e: bytes per stored activation element (4 in fp32, 2 in bf16 / fp16).
using StagingForm = std::function<CoreStaging(int64_t B, int64_t Tl, int64_t A, int64_t e)>;

/// Ulysses: all_to_alls of q|k|v (3·B·Tl·A elements) and out (B·Tl·A) forward, dout (B·Tl·A)
/// and dq|dk|dv (3·B·Tl·A) backward, in the activations' dtype; each whole buffer down before and
/// up after (ulysses.h).
CoreStaging ulysses_staging(int64_t B, int64_t Tl, int64_t A, int64_t e) {
  return {e * (3 + 1 + 1 + 3) * B * Tl * A, e * (3 + 1 + 1 + 3) * B * Tl * A,
          e * (3 + 1) * B * Tl * A, e * (3 + 1) * B * Tl * A};
}

/// Ring attention (ring_attention.h): per block, p − 1 sends of K|V forward, p − 1 of K|V and p of
/// the dK|dV accumulator backward, staged down at its sender and up at its receiver; every rank
/// sends and receives as many as it sends, so down = up. A K|V block is 2e·B·Tl·A bytes (16-bit
/// in a 16-bit run), an accumulator 8·B·Tl·A (fp32 always).
CoreStaging ring_attention_staging(int64_t B, int64_t Tl, int64_t A, int64_t e) {
  const int64_t p = world().size(), kv = 2 * e * B * Tl * A, acc = 8 * B * Tl * A;
  const int64_t step = 2 * (p - 1) * kv + p * acc;
  return {step, step, (p - 1) * kv, (p - 1) * kv};
}

/// Ring self-attention (ring_self_attention.h): per block, p − 1 key and p − 1 value chunks of
/// e·B·Tl·A bytes forward, p − 1 [V | dV] and p − 1 [K | dK] backward, each a chunk and its fp32
/// accumulator, (e + 4)·B·Tl·A; each staged down at its sender and up at its receiver.
CoreStaging ring_self_attention_staging(int64_t B, int64_t Tl, int64_t A, int64_t e) {
  const int64_t p = world().size(), n = B * Tl * A;
  const int64_t forward = 2 * (p - 1) * e * n, step = forward + 2 * (p - 1) * (e + 4) * n;
  return {step, step, forward, forward};
}

struct Crossed {
  int64_t up = 0, down = 0;
};

struct Run {
  std::vector<double> losses;
  double eval = 0;
  std::vector<float> state;  // params, m, v
  double grad_bytes = 0, attn_bytes = 0;
  Crossed init, steps, evaluation, get_state;
  int64_t host_activation_peak = 0, host_comm_peak = 0;  // during the steps (device run)
  int64_t device_states = 0;                             // params + grads + m, v on the device
  std::vector<ReportRow> rows;                           // after the steps
};

Crossed since(const testing::FakeDevice* dev, const Crossed& before) {
  if (!dev) return {};
  return {dev->h2d_bytes() - before.up, dev->d2h_bytes() - before.down};
}

Crossed now(const testing::FakeDevice* dev) {
  return dev ? Crossed{dev->h2d_bytes(), dev->d2h_bytes()} : Crossed{};
}

Run train(const CoreFactory& make, const GPT& model, const testing::FakeDevice* dev,
          const MixedPrecisionConfig& mp) {
  const Corpus corpus = Corpus::load("/usr/share/games/fortunes", kT);
  AdamWConfig opt;
  opt.lr = 3e-3f;
  opt.weight_decay = 0.1f;
  auto group = world().duplicate();
  const auto& mt = MemoryTracker::instance();
  Run r;
  Crossed c0 = now(dev);
  ContextParallelStrategy s(model, *group, make, opt, 11, mp);
  r.init = since(dev, c0);
  r.device_states = mt.current(Device::kCUDA, MemCategory::kParameters) +
                    mt.current(Device::kCUDA, MemCategory::kGradients) +
                    mt.current(Device::kCUDA, MemCategory::kOptimizerState);
  std::vector<int32_t> tok(kB * kT), tgt(kB * kT);
  c0 = now(dev);
  for (int t = 1; t <= kSteps; ++t) {
    sample(corpus.train(), 42, t, 0, kB, kT, tok.data(), tgt.data());  // the whole batch
    r.losses.push_back(s.train_step(tok.data(), tgt.data(), kB, kT, t));
    // train_step restarts the peaks: these are the step's own, on the host.
    r.host_activation_peak =
        std::max(r.host_activation_peak, mt.peak(Device::kCPU, MemCategory::kActivations));
    r.host_comm_peak =
        std::max(r.host_comm_peak, mt.peak(Device::kCPU, MemCategory::kCommBuffers));
  }
  r.steps = since(dev, c0);
  r.rows = s.report();
  r.grad_bytes = group->stats().total_bytes();
  r.attn_bytes = s.attention_stats().total_bytes();
  c0 = now(dev);
  r.eval = s.eval_loss(tok.data(), tgt.data(), kB, kT);
  r.evaluation = since(dev, c0);
  const int64_t psi = model.layout().num_params();
  r.state.resize(3 * psi);
  c0 = now(dev);
  s.get_state(r.state.data(), r.state.data() + psi, r.state.data() + 2 * psi);
  r.get_state = since(dev, c0);
  return r;
}

/// The stage with core `make` on the CPU and on a guarded FakeDevice, in `precision`: gtest
/// EXPECTs (above). Mixed precision (the naive DP recipe, cp_strategy.h): the initial 16-bit
/// parameters (2Ψ) and the fp32 master copy (4Ψ) go up, the gradient all_reduce stages 2Ψ each
/// way, get_state reads the master copy, m and v (12Ψ), and the device holds 2Ψ + 2Ψ + 12Ψ.
void expect_cp_device_run_equals_cpu(const CoreFactory& make, const StagingForm& staging,
                                     TrainPrecision precision = TrainPrecision::kFP32,
                                     bool recompute = false, bool cpu_checkpoints = false) {
  MixedPrecisionConfig mp;
  mp.precision = precision;
  mp.scaler.scale = 1024.0f;  // fp16 only
  const DType dt = storage_dtype(precision);
  const GPT model = cp_model(dt, recompute);
  const Run cpu = train(make, model, nullptr, mp);
  testing::FakeDevice dev(/*guarded=*/true);
  testing::FakeKernelOps ops(dev);
  // Pa+cpu moves device checkpoints only: the CPU run is the plain recomputed one.
  const GPT on_device = cpu_checkpoints ? cp_model(dt, recompute, true).with_device(Device::kCUDA)
                                        : model.with_device(Device::kCUDA);
  const Run gpu = train(make, on_device, &dev, mp);

  EXPECT_EQ(gpu.losses, cpu.losses);
  EXPECT_EQ(gpu.eval, cpu.eval);
  EXPECT_EQ(gpu.state, cpu.state);
  EXPECT_EQ(gpu.grad_bytes, cpu.grad_bytes) << "the gradient all_reduce's CommStats";
  EXPECT_EQ(gpu.attn_bytes, cpu.attn_bytes) << "the core's CommStats";
  EXPECT_GT(cpu.attn_bytes, 0);

  const int64_t psi = model.layout().num_params(), p = world().size();
  const int64_t L = model.config().layers, A = model.config().d, B = kB, Tl = kT / p;
  const int64_t e = dtype_size(dt);  // bytes per parameter, gradient and activation element
  const CoreStaging core = staging(B, Tl, A, e);
  EXPECT_EQ(gpu.device_states, 16 * psi) << "parameters, gradients, m and v on the device";
  EXPECT_EQ(gpu.init.up, e == 4 ? 4 * psi : 2 * psi + 4 * psi)
      << "the initial parameters once (mixed: and the fp32 master copy)";
  EXPECT_EQ(gpu.init.down, 0);
  const int64_t R = recompute ? L : 0;  // block forwards run again per step
  const int64_t ckpt = cpu_checkpoints ? L * e * B * Tl * A : 0;  // Pa+cpu, each way per step
  EXPECT_EQ(gpu.steps.up, kSteps * (4 * (3 * B * Tl + 2 * Tl) + e * psi + L * core.step_up +
                                    R * core.forward_up + ckpt));
  EXPECT_EQ(gpu.steps.down,
            kSteps * (e * psi + L * core.step_down + R * core.forward_down + ckpt));
  for (const ReportRow& r : gpu.rows)
    EXPECT_TRUE(report_row_ok(r)) << r.what << ": measured " << r.measured << ", formula "
                                  << r.formula << " (" << r.formula_text << ")";
  if (cpu_checkpoints) {
    bool row = false;
    for (const ReportRow& r : gpu.rows)
      if (r.what == "checkpoints copied to the host per step (and back)") {
        row = true;
        EXPECT_EQ(r.measured, ckpt) << "the report's Pa+cpu bytes";
      }
    EXPECT_TRUE(row) << "no Pa+cpu row in the report";
  }
  EXPECT_EQ(gpu.evaluation.up, 4 * (2 * B * Tl + Tl) + L * core.forward_up);
  EXPECT_EQ(gpu.evaluation.down, L * core.forward_down);
  EXPECT_EQ(gpu.get_state.up, 0);
  EXPECT_EQ(gpu.get_state.down, 12 * psi) << "parameters (mixed: the master copy), m and v";
  // Pa+cpu: at the end of the forward all L checkpoints are on the host, and nothing else is.
  EXPECT_EQ(gpu.host_activation_peak, ckpt) << "an activation of the device run on the host";
  EXPECT_EQ(gpu.host_comm_peak, 0) << "a communication buffer of the device run on the host";
}

std::unique_ptr<AttentionCore> ulysses(ProcessGroup& g) {
  return std::make_unique<UlyssesAttention>(g);
}

std::unique_ptr<AttentionCore> ring_attention(ProcessGroup& g) {
  return std::make_unique<RingAttention>(g);
}

TEST(ContextParallelOnDevice, UlyssesEqualsTheCpuWithEveryCrossingAccounted) {
  expect_cp_device_run_equals_cpu(ulysses, ulysses_staging);
}

TEST(ContextParallelOnDevice, RingAttentionEqualsTheCpuWithEveryCrossingAccounted) {
  expect_cp_device_run_equals_cpu(ring_attention, ring_attention_staging);
}

std::unique_ptr<AttentionCore> ring_self_attention(ProcessGroup& g) {
  return std::make_unique<RingSelfAttention>(g);
}

TEST(ContextParallelOnDevice, RingSelfAttentionEqualsTheCpuWithEveryCrossingAccounted) {
  expect_cp_device_run_equals_cpu(ring_self_attention, ring_self_attention_staging);
}

// --recompute full on the device: each block's forward runs again with its collectives (staged
// once more), the result bit for bit the CPU's recomputed run (itself the run without).
TEST(ContextParallelOnDevice, FullRecomputationEqualsTheCpuWithTheForwardsStagedAgain) {
  expect_cp_device_run_equals_cpu(ulysses, ulysses_staging, TrainPrecision::kFP32, true);
  expect_cp_device_run_equals_cpu(ring_attention, ring_attention_staging, TrainPrecision::kBF16,
                                  true);
  expect_cp_device_run_equals_cpu(ring_self_attention, ring_self_attention_staging,
                                  TrainPrecision::kFP32, true);
}

// ZeRO-R's Pa+cpu with recomputation (--device cuda --recompute full --cpu_checkpointing): each
// kept block input (this rank's T/p rows) waits on the host between its forward and its
// recomputation; the result bit for bit the CPU's, the checkpoints' bytes each way exactly.
TEST(ContextParallelOnDevice, CheckpointsOnTheHostEqualTheCpuWithTheirBytesEachWay) {
  expect_cp_device_run_equals_cpu(ulysses, ulysses_staging, TrainPrecision::kBF16, true, true);
  expect_cp_device_run_equals_cpu(ring_attention, ring_attention_staging, TrainPrecision::kFP32,
                                  true, true);
}

// Mixed precision on the device: Ulysses' all_to_alls and the ring cores' K and V chunks staged
// at 2 bytes an element (their accumulators at 4); fp16 with a static-start scaler. Bit for bit
// against the same precision on the CPU.
TEST(ContextParallelOnDevice, UlyssesInBf16AndFp16EqualsTheCpu) {
  expect_cp_device_run_equals_cpu(ulysses, ulysses_staging, TrainPrecision::kBF16);
  expect_cp_device_run_equals_cpu(ulysses, ulysses_staging, TrainPrecision::kFP16);
}

TEST(ContextParallelOnDevice, RingCoresInBf16EqualTheCpu) {
  expect_cp_device_run_equals_cpu(ring_attention, ring_attention_staging, TrainPrecision::kBF16);
  expect_cp_device_run_equals_cpu(ring_self_attention, ring_self_attention_staging,
                                  TrainPrecision::kBF16);
}

/// A (B,Tl,W) f32 tensor of N(0,1) draws, on the host.
Tensor random_rows(int64_t B, int64_t Tl, int64_t W, unsigned seed) {
  Tensor t = Tensor::empty({B, Tl, W}, DType::kF32, MemCategory::kActivations);
  std::mt19937 gen(seed + 101 * world().rank());
  std::normal_distribution<float> n(0.0f, 1.0f);
  for (int64_t i = 0; i < t.numel(); ++i) t.f32()[i] = n(gen);
  return t;
}

/// `x` (any device) as host floats.
std::vector<float> host_floats(const Tensor& x) {
  Tensor h = Tensor::empty(x.shape(), DType::kF32, MemCategory::kOther);
  h.copy_from(x);
  return std::vector<float>(h.f32(), h.f32() + h.numel());
}

// The ring self-attention core alone, on a guarded FakeDevice against the CPU core on the same
// rows (B = 2, T = 16, A = 16, H = 4: 4 heads of 4 channels): out, P and dqkv bit for bit (the
// device runs the same CPU kernels, so any difference is a buffer read from the wrong place),
// and the host <-> device bytes the FakeDevice counted equal to the ring's closed form: each
// chunk sent is staged down at its sender and up at its receiver, 2(p − 1) chunks of 4·B·Tl·A
// bytes in the forward (keys, values), 2(p − 1) of 8·B·Tl·A in the backward (chunk and
// accumulator); nothing else crosses (the packing, unpacking, products and softmaxes stay on
// the device).
TEST(ContextParallelOnDevice, RingSelfAttentionCoreEqualsTheCpuCoreBitForBit) {
  constexpr int B = 2, T = 16, A = 16, H = 4;
  const int64_t p = world().size(), Tl = T / p, chunk = 4 * B * Tl * A;
  const Tensor qkv = random_rows(B, Tl, 3 * A, 5), dout = random_rows(B, Tl, A, 7);
  auto cpu_group = world().duplicate();
  RingSelfAttention cpu_core(*cpu_group);
  Tensor y, dq;
  AttentionKeep keep;
  cpu_core.forward(qkv, y, B, T, H, &keep);
  const std::vector<float> P = host_floats(keep.a);
  cpu_core.backward(dout, qkv, y, &keep, dq, B, T, H);

  testing::FakeDevice dev(/*guarded=*/true);
  testing::FakeKernelOps ops(dev);
  auto on_dev = [](const Tensor& host) {
    Tensor d = Tensor::empty(host.shape(), DType::kF32, MemCategory::kActivations, Device::kCUDA);
    d.copy_from(host);
    return d;
  };
  const Tensor qd = on_dev(qkv), dyd = on_dev(dout);
  auto dev_group = world().duplicate();
  RingSelfAttention dev_core(*dev_group);
  Tensor yd, dqd;
  AttentionKeep kd;
  Crossed c0 = now(&dev);
  dev_core.forward(qd, yd, B, T, H, &kd);
  const Crossed fwd = since(&dev, c0);
  EXPECT_EQ(fwd.down, 2 * (p - 1) * chunk) << "forward: key and value chunks staged down";
  EXPECT_EQ(fwd.up, 2 * (p - 1) * chunk) << "forward: key and value chunks staged up";
  ASSERT_EQ(yd.device(), Device::kCUDA) << "out allocated beside qkv";
  ASSERT_EQ(kd.a.device(), Device::kCUDA) << "P kept on the device";
  const std::vector<float> Pd = host_floats(kd.a);
  c0 = now(&dev);
  dev_core.backward(dyd, qd, yd, &kd, dqd, B, T, H);
  const Crossed bwd = since(&dev, c0);
  EXPECT_EQ(bwd.down, 2 * (p - 1) * 2 * chunk) << "backward: [chunk | accumulator] down";
  EXPECT_EQ(bwd.up, 2 * (p - 1) * 2 * chunk) << "backward: [chunk | accumulator] up";
  EXPECT_EQ(dev_group->staging_stats().to_host_bytes, 6 * (p - 1) * chunk) << "the backend's";
  EXPECT_EQ(dqd.device(), Device::kCUDA);
  EXPECT_EQ(host_floats(yd), host_floats(y)) << "out";
  EXPECT_EQ(Pd, P) << "P";
  EXPECT_EQ(host_floats(dqd), host_floats(dq)) << "dqkv";
  EXPECT_GT(p, 1) << "a ring of one rank sends nothing: the bytes above would prove nothing";
}

/// A core without a device path (AttentionCore::supports_device() false): GPT's refusal.
struct HostOnlyCore : RingSelfAttention {
  using RingSelfAttention::RingSelfAttention;
  std::string name() const override { return "host-only test"; }
  bool supports_device() const override { return false; }
};

// A host-only core (every real core runs on a device now; this one says it does not) is refused
// for a model on a device, by name, when the strategy is built: before any rank reads device
// memory on the host.
TEST(ContextParallelOnDevice, AHostOnlyCoreIsRefused) {
  testing::FakeDevice dev(/*guarded=*/true);
  testing::FakeKernelOps ops(dev);
  const GPT on_device = cp_model().with_device(Device::kCUDA);
  auto group = world().duplicate();
  try {
    ContextParallelStrategy s(
        on_device, *group,
        [](ProcessGroup& g) -> std::unique_ptr<AttentionCore> {
          return std::make_unique<HostOnlyCore>(g);
        },
        AdamWConfig{}, 11);
    ADD_FAILURE() << "a host-only core was accepted on a device";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("host-only test core runs on the CPU only"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace llmp
