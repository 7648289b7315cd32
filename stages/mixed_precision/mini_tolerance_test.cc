// 200 steps of mini (the stage's default run): bf16 and fp16 with dynamic loss scaling end
// within a stated tolerance of fp32 (validation and train loss), while every one of them has
// learned (the loss fell far below ln 256 = 5.545 at initialisation).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "stages/mixed_precision/precision_test_util.h"

namespace llmp {
namespace {

struct End {
  double train, val;
};

End run(const std::string& precision) {
  PrecisionRunner r("mini", 16, precision_config(precision));
  double train = 0;
  for (int t = 1; t <= 200; ++t) train = r.step(t);
  const End e{train, r.validation()};
  std::printf("%s: train loss %.4f, val loss %.4f, skipped %lld, final S %g\n",
              precision.c_str(), e.train, e.val,
              static_cast<long long>(r.mp().skipped_steps()), r.mp().loss_scale());
  return e;
}

TEST(MixedPrecisionMini, Bf16AndFp16EndNearFp32) {
  const End fp32 = run("fp32"), bf16 = run("bf16"), fp16 = run("fp16");
  EXPECT_LT(fp32.val, 3.0);  // it learned
  // TOLERANCE (see the README's table).
  EXPECT_NEAR(bf16.val, fp32.val, 0.02);
  EXPECT_NEAR(fp16.val, fp32.val, 0.02);
  EXPECT_NEAR(bf16.train, fp32.train, 0.05);
  EXPECT_NEAR(fp16.train, fp32.train, 0.05);
}

}  // namespace
}  // namespace llmp
