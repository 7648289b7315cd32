// bazel run //stages/long_sequences:table  — the long-sequence methods side by side, measured:
// for T = 1024 and 2048 on p = 4 ranks (tiny widths, H = 4), the baseline's attention-score peak
// (one rank, whole sequences) next to each method's per-rank peak, the bytes and calls its
// attention sent per step, its activations kept per block and its tokens/s. Every figure comes
// from the run (MemoryTracker, CommStats, the wall clock of the timed steps); the stage READMEs
// derive the closed forms the stages' own reports check them against.
//
//   bazel run //stages/long_sequences:table -- --ctx 1024 2048 --batch 2 --timed 2
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "common/comm/process_group.h"
#include "common/cp/cp_strategy.h"
#include "common/cp/ring_waits.h"
#include "common/data/corpus.h"
#include "common/data/sampler.h"
#include "common/nn/unit_runner.h"
#include "common/runtime/clock.h"
#include "common/runtime/flags.h"
#include "common/runtime/launch.h"
#include "common/tensor/memory.h"
#include "stages/long_sequences/methods.h"

namespace llmp {
namespace {

struct Row {
  std::string method;
  double score_peak = 0, sent = 0, kept = 0, tokens_per_s = 0;
  double wait_ms = 0;  ///< per timed step, inside the ring cores' waits (ring_waits.h)
  int64_t calls = 0;
};

const char* kCorpus = "/usr/share/games/fortunes";

GPTConfig model(int T) {
  GPTConfig c = GPTConfig::preset("tiny");
  c.heads = 4;
  c.ctx = T;
  c.name = "tiny-T" + std::to_string(T) + "-H4";
  return c;
}

/// The baseline on rank 0 alone: whole sequences, one walk per step.
Row baseline(const GPTConfig& c, int B, int timed) {
  const GPT m(c);
  const int64_t psi = m.layout().num_params();
  std::vector<float> params(psi), grads(psi);
  m.init_params(params.data(), 1);
  const Corpus corpus = Corpus::load(kCorpus, c.ctx);
  const int T = c.ctx;
  std::vector<int32_t> tok(B * T), tgt(B * T);
  Row r{"baseline (1 rank)"};
  double t0 = 0;
  for (int s = 0; s <= timed; ++s) {
    sample(corpus.train(), 7, s + 1, 0, B, T, tok.data(), tgt.data());
    if (s == 1) t0 = wall_seconds();  // step 0 warms up
    MemoryTracker::instance().reset_peak();
    forward_backward(m, params.data(), grads.data(), tok.data(), tgt.data(), B, T,
                     1.0f / (B * T));
    r.score_peak = MemoryTracker::instance().peak(MemTag::kAttentionScores);
    r.kept = RecomputeMeter::instance().bytes_per_block();
  }
  r.tokens_per_s = double(timed) * B * T / (wall_seconds() - t0);
  return r;
}

/// One method on every rank of `world`: the largest figure over the ranks.
Row method(const Method& me, const GPTConfig& c, int B, int timed, ProcessGroup& world) {
  const GPT m(c);
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
  const double dt = wall_seconds() - t0;
  Row r{me.label};
  for (const ReportRow& row : s.report()) {
    if (row.what == "peak attention scores") r.score_peak = row.measured;
    if (row.what == "attention sent/step") r.sent = row.measured;
    if (row.what == "activations kept per block") r.kept = row.measured;
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

std::string mib(double b) { return fmt_mib(b); }

}  // namespace
}  // namespace llmp

int main(int argc, char** argv) {
  using namespace llmp;
  int world_size = 4, batch = 2, timed = 2;
  std::vector<int> ctx = {1024, 2048};
  CLI::App app{"long_sequences: ring self-attention, ring attention and Ulysses against the "
               "baseline at long T, measured"};
  app.add_option("--world_size", world_size, "p ranks")->check(CLI::Range(1, 64))->capture_default_str();
  app.add_option("--ctx", ctx, "the sequence lengths T of the rows")->check(CLI::Range(8, 65536))->capture_default_str();
  app.add_option("--batch", batch, "sequences per step (B)")->check(CLI::Range(1, 4096))->capture_default_str();
  app.add_option("--timed", timed, "timed steps per row (after one warm-up step)")->check(CLI::Range(1, 100))->capture_default_str();
  parse_flags_or_exit(app, argc, argv);
  launch_or_init(argc, argv, world_size);
  auto world = ProcessGroup::world();
  const bool root = world->rank() == 0;
  if (root)
    std::printf("tiny widths (L = 2, C = 32, H = 4), B = %d, p = %d ranks; peaks and sends are the "
                "largest over the ranks, tokens/s over %d timed steps\n\n"
                "| T | method | attention-score peak per rank | attention sent per step | calls "
                "per step | activations kept per block | tokens/s |\n|---|---|---|---|---|---|---|\n",
                batch, world->size(), timed);
  for (int T : ctx) {
    const GPTConfig c = model(T);
    if (root) {
      const Row b = baseline(c, batch, timed);
      std::printf("| %d | %s | %s | - | - | %s | %.0f |\n", T, b.method.c_str(),
                  mib(b.score_peak).c_str(), mib(b.kept).c_str(), b.tokens_per_s);
      std::fflush(stdout);
    }
    world->barrier();
    for (const Method& me : methods()) {
      const std::string err = me.split_error(T, c.heads, world->size());
      if (!err.empty()) {
        if (root) std::printf("| %d | %s | (%s) | | | | |\n", T, me.label.c_str(), err.c_str());
        continue;
      }
      const Row r = method(me, c, batch, timed, *world);
      if (root)
        std::printf("| %d | %s | %s | %s | %lld | %s | %.0f |\n", T, r.method.c_str(),
                    mib(r.score_peak).c_str(), mib(r.sent).c_str(),
                    static_cast<long long>(r.calls), mib(r.kept).c_str(), r.tokens_per_s);
      std::fflush(stdout);
    }
  }
  // The ring cores' overlap, measured: the same runs with the next block's transfer waited for
  // before the computation (RingWaits::overlap = false) and after it (the cores' order).
  const int T = ctx.back();
  if (root)
    std::printf("\nOverlap of the ring transfers at T = %d (ring_waits.h): time inside the rings' "
                "waits per step (largest over the ranks) and tokens/s\n\n| method | transfer "
                "waited | ring waits ms/step | tokens/s |\n|---|---|---|---|\n", T);
  for (const Method& me : methods()) {
    if (!me.ring || !me.split_error(T, 4, world->size()).empty()) continue;
    for (bool overlap : {false, true}) {
      RingWaits::instance().overlap = overlap;
      const Row r = method(me, model(T), batch, timed, *world);
      if (root)
        std::printf("| %s | %s | %.1f | %.0f |\n", r.method.c_str(),
                    overlap ? "after the block's computation" : "before it (no overlap)",
                    r.wait_ms, r.tokens_per_s);
      std::fflush(stdout);
    }
  }
  RingWaits::instance().overlap = true;
  return 0;
}
