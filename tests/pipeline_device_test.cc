// The pipeline stages with --device cuda's placement, at 2 ranks, without a GPU: every rank's
// part of the model, its gradients, AdamW state and the activations it sends and receives on a
// guarded FakeDevice (common/testing/fake_device.h: host pages unreadable outside device
// operations) with kernels/cpu registered as the device's kernels (fake_kernel_ops.h). The
// send_forward / send_backward / recv_forward / recv_backward of device tensors go through the
// MPI backend's host staging (common/comm/process_group_staging.h).
//
// One TEST per schedule (naive, GPipe, 1F1B, interleaved 1F1B, ZB-H1, Chimera, PipeDream-2BW),
// each against the same stage on the CPU over the same ranks: losses, eval loss and final state
// (params, m, v) bit for bit, the same CommStats, and every byte that crossed host <-> device
// equal to what must cross, counted from the rank's actions (schedule.h), b = B/m:
//
//   up (host -> device)     4Ψ_r                        the rank's parameters, once (init)
//                           + Σ forwards on virtual stage 0: 2·4bT (tokens: embed, its backward)
//                           + Σ forwards on the last virtual stage: 4bT (targets: the head)
//                           + Σ recv_forward, recv_backward: 4bTC (the staged message)
//                           + per optimizer step 4VC on the embedding ranks (the tied wte's
//                             all_reduce, staged up) or 4Ψ_r on Chimera's replicas
//   down (device -> host)   Σ send_forward, send_backward: 4bTC (the staged message)
//                           + per optimizer step 4VC / 4Ψ_r as above (staged down)
//                           + get_state: 3·4·Ψ_owned,r (params, m, v; the wte copy and Chimera's
//                             up chunk are replicas, not owned)
//   eval_loss (forward only, pipeline 0, m micro-batches): per micro-batch and virtual stage the
//   rank holds: tokens 4bT or a recv 4bTC up; targets 4bT up on the last, or a send 4bTC down.
//   set_state into a fresh device stage: its init 4Ψ_r and 3·4Ψ_r up; its get_state as above.
//
// Under --precision bf16 (1F1B, Chimera, PipeDream-2BW): the messages are 2bTC, the parameters go up as the
// fp32 master copy and the 16-bit working copy (4Ψ_r + 2Ψ_r, at init and at set_state), get_state
// brings the master copy down; the gradients and so the optimizer step's all_reduce stay fp32
// (pipeline_strategy.h).
//
// Glossary: p = 2 pipeline stages, m micro-batches, v chunks, B global batch, b = B/m, T
// sequence, C channels, V vocab, Ψ_r parameters held by rank r (wte copy included).
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "common/data/corpus.h"
#include "common/data/sampler.h"
#include "common/testing/fake_device.h"
#include "common/testing/fake_kernel_ops.h"
#include "stages/1f1b/1f1b.h"
#include "stages/chimera/chimera.h"
#include "stages/gpipe/gpipe.h"
#include "stages/interleaved_1f1b/interleaved_1f1b.h"
#include "stages/naive_pp/naive_pp.h"
#include "stages/pipedream_2bw/pipedream_2bw.h"
#include "stages/zero_bubble/zero_bubble.h"
#include "tests/stage_test_util.h"

namespace llmp {
namespace {

constexpr int kSteps = 2, kB = 4;

using Factory = std::function<std::unique_ptr<PipelineStrategy>(const GPT& model, ProcessGroup& pp,
                                                                AdamWConfig opt, uint64_t seed)>;

/// tiny with L = 4: p·v = 2 or 4 virtual stages divide it.
GPTConfig model_config(Recompute recompute = Recompute::kNone) {
  GPTConfig c = GPTConfig::preset("tiny");
  c.layers = 4;
  c.recompute = recompute;
  return c;
}

struct Run {
  std::vector<double> losses;
  double eval = 0;
  std::vector<float> state;     // get_state of the trained stage (params, m, v)
  std::vector<float> reloaded;  // get_state of a fresh stage after set_state(state)
  double comm_bytes = 0;
  StagingStats staging;
  int64_t h2d = 0, d2h = 0;  // FakeDevice counts (device run only)
};

Run train(const Factory& make, const GPT& model, ProcessGroup& pp,
          const testing::FakeDevice* dev) {
  const Corpus corpus = Corpus::load("/usr/share/games/fortunes", model.config().ctx);
  const int T = model.config().ctx;
  AdamWConfig opt;
  opt.lr = 3e-3f;
  opt.weight_decay = 0.1f;
  const int64_t psi = model.layout().num_params();
  std::vector<int32_t> tok(kB * T), tgt(kB * T);
  Run r;
  {
    std::unique_ptr<PipelineStrategy> s = make(model, pp, opt, 11);
    for (int t = 1; t <= kSteps; ++t) {
      sample(corpus.train(), 42, t, 0, kB, T, tok.data(), tgt.data());
      r.losses.push_back(s->train_step(tok.data(), tgt.data(), kB, T, t));
    }
    r.comm_bytes = pp.stats().total_bytes();
    sample(corpus.val(), 42, 1, 0, kB, T, tok.data(), tgt.data());
    r.eval = s->eval_loss(tok.data(), tgt.data(), kB, T);
    r.state.resize(3 * psi);
    s->get_state(r.state.data(), r.state.data() + psi, r.state.data() + 2 * psi);
  }
  r.staging = pp.staging_stats();
  if (dev) r.h2d = dev->h2d_bytes(), r.d2h = dev->d2h_bytes();
  std::unique_ptr<PipelineStrategy> fresh = make(model, pp, opt, 12);  // another init
  fresh->set_state(r.state.data(), r.state.data() + psi, r.state.data() + 2 * psi);
  r.reloaded.resize(3 * psi);
  fresh->get_state(r.reloaded.data(), r.reloaded.data() + psi, r.reloaded.data() + 2 * psi);
  return r;
}

/// What must cross host <-> device on this rank (the header's closed form), from the strategy's
/// schedule and partition.
struct Expected {
  int64_t up = 0, down = 0;          // training, eval and get_state
  int64_t staged_up = 0, staged_down = 0;  // of those, the pipeline group's p2p staging
  int64_t reload_up = 0, reload_down = 0;  // the fresh stage: init + set_state, get_state
};

/// `stream`: the schedule holds the whole run (PipeDream-2BW), else one step's actions, run
/// kSteps times.
/// `mixed`: bf16 (2-byte messages, the 16-bit working copy beside the fp32 master copy).
Expected expected_bytes(const PipelineStrategy& s, const GPTConfig& c, int m_step, bool stream,
                        bool mixed) {
  const Schedule& sch = s.schedule();
  const GPTPartition& part = s.partition();
  const int rank = test_world().rank(), p = sch.p, T = c.ctx;
  const int64_t e_act = mixed ? 2 : 4;
  const int64_t b = kB / m_step, act = e_act * b * T * c.d, ids = 4 * b * T;
  const int64_t psi_r = part.local_numel(rank);
  int64_t owned = 0;
  for (const ParamSegment& seg : part.segments(rank))
    owned += (!seg.wte_copy && (sch.pipelines == 1 || seg.chunk == 0)) ? seg.numel : 0;
  Expected e;
  const int64_t runs = stream ? 1 : kSteps;
  for (const Action& a : sch.ranks.at(rank)) {
    const VirtualStage vs = part.stage(rank, a.chunk);
    if (a.op == Op::kForward) e.up += runs * ((vs.first ? 2 * ids : 0) + (vs.last ? ids : 0));
    if (a.op == Op::kRecvForward || a.op == Op::kRecvBackward) e.staged_up += runs * act;
    if (a.op == Op::kSendForward || a.op == Op::kSendBackward) e.staged_down += runs * act;
  }
  for (int i = 0; i < m_step; ++i)  // eval_loss: pipeline 0's virtual stages in order
    for (int vstage = 0; vstage < part.num_virtual_stages(); ++vstage) {
      if (part.rank_of(vstage) != rank) continue;
      const VirtualStage vs = part.stage(rank, part.chunk_of(vstage));
      if (vs.first) e.up += ids; else e.staged_up += act;
      if (vs.last) e.up += ids; else e.staged_down += act;
    }
  // The optimizer steps' gradient all_reduce, staged: tied wte on the embedding ranks {0, p-1},
  // or Chimera's whole-buffer all_reduce over the replica pair {r, p-1-r}.
  const bool chimera = sch.pipelines == 2;
  const bool emb_rank = p > 1 && (rank == 0 || rank == p - 1);
  const int64_t grad_ar = chimera ? 4 * psi_r : emb_rank ? int64_t{4} * c.vocab * c.d : 0;
  const int64_t params_up = (mixed ? 6 : 4) * psi_r;  // the master (fp32) and the 16-bit copy
  e.up += params_up + e.staged_up + kSteps * grad_ar;
  e.down += e.staged_down + kSteps * grad_ar + 12 * owned;
  e.reload_up = params_up + params_up + 8 * psi_r;  // init, then set_state: params, m, v
  e.reload_down = 12 * owned;
  return e;
}

/// The CPU run, then the device run, on fresh duplicates of the world; gtest EXPECTs.
void expect_device_run_equals_cpu(const Factory& make, int m_step, bool stream = false,
                                  Recompute recompute = Recompute::kNone,
                                  DType storage = DType::kF32) {
  const GPT model(model_config(recompute), TpComm::none(), storage);
  auto cpu_pp = test_world().duplicate();
  const Run cpu = train(make, model, *cpu_pp, nullptr);

  testing::FakeDevice dev(/*guarded=*/true);
  testing::FakeKernelOps ops(dev);
  const GPT dmodel = model.with_device(Device::kCUDA);
  auto dev_pp = test_world().duplicate();
  const Run gpu = train(make, dmodel, *dev_pp, &dev);

  EXPECT_EQ(gpu.losses, cpu.losses);
  EXPECT_EQ(gpu.eval, cpu.eval);
  EXPECT_EQ(gpu.state, cpu.state);
  EXPECT_EQ(gpu.reloaded, cpu.state) << "set_state then get_state on the device";
  EXPECT_EQ(cpu.reloaded, cpu.state);
  EXPECT_EQ(gpu.comm_bytes, cpu.comm_bytes) << "the same messages, counted the same";
  EXPECT_GT(cpu.comm_bytes, 0);
  EXPECT_EQ(cpu.staging.to_host_bytes + cpu.staging.to_device_bytes, 0)
      << "host tensors are never staged";

  // A CPU strategy only to read the schedule and partition (no steps, nothing on the device).
  AdamWConfig opt;
  const std::unique_ptr<PipelineStrategy> probe = make(model, *cpu_pp, opt, 1);
  const Expected e =
      expected_bytes(*probe, model.config(), m_step, stream, storage != DType::kF32);
  EXPECT_EQ(gpu.staging.to_device_bytes, e.staged_up) << "recvs staged up, e·bTC each";
  EXPECT_EQ(gpu.staging.to_host_bytes, e.staged_down) << "sends staged down, e·bTC each";
  EXPECT_EQ(gpu.h2d, e.up) << "host -> device bytes, rank " << test_world().rank();
  EXPECT_EQ(gpu.d2h, e.down) << "device -> host bytes, rank " << test_world().rank();
  EXPECT_EQ(dev.h2d_bytes() - gpu.h2d, e.reload_up) << "a fresh stage's init and set_state";
  EXPECT_EQ(dev.d2h_bytes() - gpu.d2h, e.reload_down) << "its get_state";
}

TEST(PipelineOnDevice, NaivePipeline) {
  expect_device_run_equals_cpu(
      [](const GPT& model, ProcessGroup& pp, AdamWConfig opt, uint64_t seed) {
        return make_naive_pp(model, pp, opt, seed);
      },
      1);
}

TEST(PipelineOnDevice, GPipe) {
  expect_device_run_equals_cpu(
      [](const GPT& model, ProcessGroup& pp, AdamWConfig opt, uint64_t seed) {
        return make_gpipe(model, pp, opt, seed, 2);
      },
      2);
}

TEST(PipelineOnDevice, OneFOneB) {
  expect_device_run_equals_cpu(
      [](const GPT& model, ProcessGroup& pp, AdamWConfig opt, uint64_t seed) {
        return make_one_f_one_b(model, pp, opt, seed, 2);
      },
      2);
}

TEST(PipelineOnDevice, OneFOneBWithFullRecompute) {
  // The blocks' forwards run again before their backwards, on the device: nothing more crosses.
  expect_device_run_equals_cpu(
      [](const GPT& model, ProcessGroup& pp, AdamWConfig opt, uint64_t seed) {
        return make_one_f_one_b(model, pp, opt, seed, 2);
      },
      2, /*stream=*/false, Recompute::kFull);
}

TEST(PipelineOnDevice, Interleaved1F1B) {
  expect_device_run_equals_cpu(
      [](const GPT& model, ProcessGroup& pp, AdamWConfig opt, uint64_t seed) {
        return make_interleaved_1f1b(model, pp, opt, seed, 2, 2);
      },
      2);
}

TEST(PipelineOnDevice, ZeroBubble) {
  expect_device_run_equals_cpu(
      [](const GPT& model, ProcessGroup& pp, AdamWConfig opt, uint64_t seed) {
        return make_zero_bubble(model, pp, opt, seed, 2);
      },
      2);
}

TEST(PipelineOnDevice, Chimera) {
  expect_device_run_equals_cpu(
      [](const GPT& model, ProcessGroup& pp, AdamWConfig opt, uint64_t seed) {
        return make_chimera(model, pp, opt, seed, 2);
      },
      2);
}

/// A PipelineStrategy over make_schedule(name, 2, m, v) training in bf16.
Factory bf16_pipeline(const std::string& name, int m, int v) {
  return [name, m, v](const GPT& model, ProcessGroup& pp, AdamWConfig opt, uint64_t seed) {
    MixedPrecisionConfig mp;
    mp.precision = TrainPrecision::kBF16;
    return std::make_unique<PipelineStrategy>(model, pp, opt, seed,
                                              make_schedule(name, pp.size(), m, v), "",
                                              LogicalCosts{}, mp);
  };
}

TEST(PipelineOnDevice, OneFOneBInBf16) {
  // 16-bit parameters widened per unit on the device, 2-byte messages, AdamW's master copy.
  expect_device_run_equals_cpu(bf16_pipeline("1f1b", 2, 1), 2, /*stream=*/false,
                               Recompute::kNone, DType::kBF16);
}

TEST(PipelineOnDevice, ChimeraInBf16) {
  // The replicas' whole-buffer all_reduce of fp32 gradients beside the 16-bit parameters.
  expect_device_run_equals_cpu(bf16_pipeline("chimera", 2, 2), 2, /*stream=*/false,
                               Recompute::kNone, DType::kBF16);
}

TEST(PipelineOnDevice, PipeDream2BW) {
  // The stream over kSteps batches: its schedule holds every micro-batch of the run, so the
  // per-action counts above cover the whole run (the drain included, on the last step).
  expect_device_run_equals_cpu(
      [](const GPT& model, ProcessGroup& pp, AdamWConfig opt, uint64_t seed) {
        return std::unique_ptr<PipelineStrategy>(
            make_pipedream_2bw(model, pp, opt, seed, 2, kSteps));
      },
      2, /*stream=*/true);
}

TEST(PipelineOnDevice, PipeDream2BWInBf16) {
  // Two 16-bit versions on the device (W(t-1) copied device to device before each update), the
  // stream's per-batch version widened per unit, AdamW's master copy of the newest.
  expect_device_run_equals_cpu(
      [](const GPT& model, ProcessGroup& pp, AdamWConfig opt, uint64_t seed) {
        MixedPrecisionConfig mp;
        mp.precision = TrainPrecision::kBF16;
        return std::unique_ptr<PipelineStrategy>(
            make_pipedream_2bw(model, pp, opt, seed, 2, kSteps, "", mp));
      },
      2, /*stream=*/true, Recompute::kNone, DType::kBF16);
}

}  // namespace
}  // namespace llmp
