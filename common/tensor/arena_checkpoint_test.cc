// ZeRO-R MD in the walk (common/nn/unit_runner.cc): under --recompute full with a --defrag arena,
// each kept block input (activation checkpoint) is copied into the arena's long-lived region (its
// top) as it is produced, apart from the short-lived activations at the bottom; and the
// gradients stay bit-identical to a walk on the plain host allocator.
#include <vector>

#include <gtest/gtest.h>

#include "common/nn/gpt.h"
#include "common/nn/random_ids.h"
#include "common/nn/unit_runner.h"
#include "common/tensor/arena.h"

namespace llmp {
namespace {

constexpr int kB = 2, kT = 16, kL = 6;

/// Checkpoint offsets in the arena (when one is installed) after the forward, and the gradients
/// after the backward, of one step of the tiny model with L = 6 under full recomputation.
struct Walked {
  std::vector<int64_t> checkpoint_offsets;
  int64_t lowest_activation_offset = -1;
  std::vector<float> grads;
};

Walked walk(int every) {
  GPTConfig cfg = GPTConfig::preset("tiny");
  cfg.layers = kL;
  cfg.recompute = Recompute::kFull;
  cfg.recompute_every = every;
  const GPT model(cfg);
  const int64_t n = model.layout().num_params();
  Tensor params = Tensor::empty({n}, DType::kF32, MemCategory::kParameters);
  model.init_params(params.f32(), 7);
  Tensor grads = Tensor::zeros({n}, DType::kF32, MemCategory::kGradients);
  const auto tok = random_ids(kB * kT, 1, cfg.vocab), tgt = random_ids(kB * kT, 2, cfg.vocab);
  FlatParams fp(model.layout(), params);
  FlatGrads fg(model.layout(), grads);
  UnitRunner runner(model, fp, &fg);
  const UnitRange whole = UnitRange::whole(kL);
  Tape tape;
  runner.forward(whole, tok.data(), tgt.data(), kB, kT, 1.0f / (kB * kT), true, &tape);
  Walked w;
  if (const Arena* a = installed_cpu_arena()) {
    // x_0 (the embedding's output, made before any block) and x_L (freed by the head) aside:
    // the kept inputs of blocks 1..L-1.
    for (int j = 1; j < kL; ++j)
      if (tape.x[j].defined()) w.checkpoint_offsets.push_back(a->offset_of(tape.x[j].raw()));
    // dy, the head's gradient: a short-lived activation made after every checkpoint.
    w.lowest_activation_offset = a->offset_of(tape.dy.raw());
  }
  runner.backward(whole, tok.data(), kB, kT, &tape);
  w.grads.assign(grads.f32(), grads.f32() + n);
  return w;
}

TEST(ArenaCheckpoints, DefragCopiesEachCheckpointToTheTopAndChangesNoGradient) {
  const Walked plain1 = walk(1), plain2 = walk(2);  // the host allocator: no arena yet
  const int64_t capacity = int64_t{16} << 20;
  install_cpu_arena(capacity, Arena::Mode::kDefrag);
  for (int every : {1, 2}) {
    SCOPED_TRACE("recompute_every " + std::to_string(every));
    const Walked w = walk(every);
    // Kept: blocks 1..5 with every 1; blocks 2 and 4 with every 2.
    ASSERT_EQ(w.checkpoint_offsets.size(), every == 1 ? 5u : 2u);
    for (int64_t off : w.checkpoint_offsets) {
      EXPECT_GT(off, capacity / 2) << "a checkpoint in the short-lived region";
      EXPECT_GT(off, w.lowest_activation_offset);
    }
    EXPECT_LT(w.lowest_activation_offset, capacity / 2);
    const std::vector<float>& ref = every == 1 ? plain1.grads : plain2.grads;
    ASSERT_EQ(w.grads.size(), ref.size());
    for (size_t i = 0; i < ref.size(); ++i)
      ASSERT_EQ(w.grads[i], ref[i]) << "gradient " << i << " differs (not bit-identical)";
  }
  EXPECT_EQ(installed_cpu_arena()->stats().failures, 0);
}

}  // namespace
}  // namespace llmp
