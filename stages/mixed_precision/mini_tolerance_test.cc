// 200 steps of mini (the stage's default run, B = 16, seed 1337): bf16 and fp16 with dynamic
// loss scaling end within a stated tolerance of fp32, and all of them learned.
//
// The tolerances, from the runs themselves (measured on the development VM; the same numbers as
// the README's table, since the batches and the arithmetic are deterministic):
//
//   run                               val loss   Δ vs fp32   skipped   final S
//   fp32                              2.7484      —           —         —
//   bf16                              2.7868     +0.038       0         1
//   fp16, dynamic, S₀ = 4096          2.7841     +0.036       0         4096
//   fp16, dynamic, S₀ = 65536         2.8753     +0.127       4         4096
//
// Rounding perturbs the trajectory from step 1 on and a small model trained 200 steps at
// lr 1e-3 does not forget it: 16-bit runs that skip nothing end ~0.04 nats above fp32 (bf16's
// 8-bit significand and fp16's 11-bit one alike), so they are held to 0.05. The default dynamic
// scaler starts at 2^16, overflows on four consecutive steps between 11 and 20 (S backs off to
// 2^12, where it stays: the window is 1000 steps) and those skipped early steps cost another
// ~0.09 nats by step 200: it is held to 0.15, with its four skips asserted. (0.02, the issue's
// example, is not met by any 16-bit run here: the measured numbers above say why.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "stages/mixed_precision/precision_test_util.h"

namespace llmp {
namespace {

struct End {
  double train, val;
  int64_t skipped;
};

End run(TrainConfig cfg) {
  PrecisionRunner r("mini", 16, cfg);
  double train = 0;
  for (int t = 1; t <= 200; ++t) train = r.step(t);
  const End e{train, r.validation(), r.mp().skipped_steps()};
  std::printf("%s (S0 %g): train loss %.4f, val loss %.4f, skipped %lld, final S %g\n",
              cfg.precision.c_str(), cfg.initial_loss_scale, e.train, e.val,
              static_cast<long long>(e.skipped), r.mp().loss_scale());
  return e;
}

TEST(MixedPrecisionMini, Bf16AndFp16EndNearFp32) {
  TrainConfig fp16_4096 = precision_config("fp16");
  fp16_4096.initial_loss_scale = 4096;
  const End fp32 = run(precision_config("fp32")), bf16 = run(precision_config("bf16")),
            fp16 = run(fp16_4096), fp16_default = run(precision_config("fp16"));
  EXPECT_LT(fp32.val, 2.8);  // it learned: ln 256 = 5.545 at initialisation
  EXPECT_NEAR(bf16.val, fp32.val, 0.05);
  EXPECT_NEAR(fp16.val, fp32.val, 0.05);
  EXPECT_EQ(fp16.skipped, 0);
  EXPECT_NEAR(fp16_default.val, fp32.val, 0.15);
  EXPECT_EQ(fp16_default.skipped, 4);
  // The last step's train loss: one batch, noisier (±0.15 between neighbouring steps).
  EXPECT_NEAR(bf16.train, fp32.train, 0.1);
  EXPECT_NEAR(fp16.train, fp32.train, 0.1);
  EXPECT_NEAR(fp16_default.train, fp32.train, 0.15);
}

}  // namespace
}  // namespace llmp
