// The long-sequence table's methods and measurements (table.h).
#include "stages/long_sequences/table.h"

#include <memory>
#include <vector>

#include "common/cp/ring_attention.h"
#include "common/cp/ring_self_attention.h"
#include "common/cp/ring_waits.h"
#include "common/cp/ulysses.h"
#include "common/data/corpus.h"
#include "common/data/sampler.h"
#include "common/nn/unit_runner.h"
#include "common/runtime/clock.h"
#include "common/tensor/memory.h"

namespace llmp {

std::vector<Method> methods() {
  std::vector<Method> m;
  m.push_back({"ring self-attention",
               [](ProcessGroup& g) -> std::unique_ptr<AttentionCore> {
                 return std::make_unique<RingSelfAttention>(g);
               },
               RingSelfAttention::split_error, /*ring=*/true});
  m.push_back({"ring attention (balanced)",
               [](ProcessGroup& g) -> std::unique_ptr<AttentionCore> {
                 return std::make_unique<RingAttention>(g, RingAttention::Split::kBalanced);
               },
               RingAttention::split_error, /*ring=*/true});
  m.push_back({"Ulysses",
               [](ProcessGroup& g) -> std::unique_ptr<AttentionCore> {
                 return std::make_unique<UlyssesAttention>(g);
               },
               UlyssesAttention::split_error});
  return m;
}

namespace {
const char* kCorpus = "/usr/share/games/fortunes";
}  // namespace

GPTConfig table_model(int T) {
  GPTConfig c = GPTConfig::preset("tiny");
  c.heads = 4;
  c.ctx = T;
  c.name = "tiny-T" + std::to_string(T) + "-H4";
  return c;
}

/// The baseline on rank 0 alone: whole sequences, one walk per step.
Row measure_baseline(const GPTConfig& c, int B, int timed, Device device) {
  const GPT m = GPT(c).with_device(device);
  const int64_t psi = m.layout().num_params();
  Tensor init = Tensor::empty({psi}, DType::kF32, MemCategory::kOther);
  m.init_params(init.f32(), 1);
  Tensor params = Tensor::empty({psi}, DType::kF32, MemCategory::kParameters, device);
  params.copy_from(init);
  Tensor grads = Tensor::zeros({psi}, DType::kF32, MemCategory::kGradients, device);
  const Corpus corpus = Corpus::load(kCorpus, c.ctx);
  const int T = c.ctx;
  std::vector<int32_t> tok(B * T), tgt(B * T);
  Row r{c.attention == AttentionMethod::kFlash ? "flash attention (1 rank)" : "baseline (1 rank)"};
  double t0 = 0;
  for (int s = 0; s <= timed; ++s) {
    sample(corpus.train(), 7, s + 1, 0, B, T, tok.data(), tgt.data());
    if (s == 1) t0 = wall_seconds();  // step 0 warms up
    MemoryTracker::instance().reset_peak();
    forward_backward(m, params.f32(), grads.f32(), tok.data(), tgt.data(), B, T,
                     1.0f / (B * T));
    wait_for_device(device);
    r.score_peak = MemoryTracker::instance().peak(MemTag::kAttentionScores);
    r.kept = RecomputeMeter::instance().bytes_per_block();
  }
  r.tokens_per_s = double(timed) * B * T / (wall_seconds() - t0);
  return r;
}

/// One method on every rank of `world`: the largest figure over the ranks.
Row measure_method(const Method& me, const GPTConfig& c, int B, int timed, ProcessGroup& world,
                   Device device) {
  const GPT m = GPT(c).with_device(device);
  ContextParallelStrategy s(m, world, me.make, AdamWConfig{}, 1);
  const Corpus corpus = Corpus::load(kCorpus, c.ctx);
  const int T = c.ctx;
  std::vector<int32_t> tok(B * T), tgt(B * T);
  double t0 = 0;
  for (int step = 0; step <= timed; ++step) {
    sample(corpus.train(), 7, step + 1, 0, B, T, tok.data(), tgt.data());
    if (step == 1) {
      t0 = wall_seconds();
      RingWaits::instance().reset();
    }
    s.train_step(tok.data(), tgt.data(), B, T, step + 1);
  }
  wait_for_device(device);
  const double dt = wall_seconds() - t0;
  Row r{me.label};
  for (const ReportRow& row : s.report()) {
    if (row.what == "peak attention scores") r.score_peak = row.measured;
    if (row.what == "attention sent/step") r.sent = row.measured;
    if (row.what.rfind("activations kept per block", 0) == 0) r.kept = row.measured;  // any policy
  }
  r.calls = s.last_attention_calls();
  // The slowest rank sets the pace; the largest figures are the ones a machine must hold.
  Tensor v = Tensor::empty({6}, DType::kF64);
  double* d = v.f64();
  d[0] = r.score_peak, d[1] = r.sent, d[2] = r.kept, d[3] = dt, d[4] = double(r.calls);
  d[5] = 1e3 * RingWaits::instance().seconds / timed;
  world.all_reduce(v, ReduceOp::kMax);
  r.score_peak = d[0], r.sent = d[1], r.kept = d[2], r.calls = int64_t(d[4]), r.wait_ms = d[5];
  r.tokens_per_s = double(timed) * B * T / d[3];
  return r;
}

}  // namespace llmp
