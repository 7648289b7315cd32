// clip_grad_error: a stage that does not clip refuses --clip_grad by name rather than train
// unclipped. Every stage in stages/ clips (tests/clip_grad_test.sh runs each), so the refusal is
// checked here on a StageSpec that does not.
#include "common/train/launch_checks.h"

#include <gtest/gtest.h>

#include <string>

#include "common/train/train_main.h"

namespace llmp {
namespace {

TEST(ClipGradError, AStageThatDoesNotClipRefusesNamingTheValueAndTheStage) {
  TrainConfig cfg;
  StageSpec spec;
  spec.name = "new_stage";
  cfg.clip_grad = 0.5;
  EXPECT_EQ(clip_grad_error(cfg, spec).rfind("--clip_grad 0.5: new_stage does not clip", 0), 0u)
      << clip_grad_error(cfg, spec);
  cfg.clip_grad = 0;  // off: nothing to refuse
  EXPECT_EQ(clip_grad_error(cfg, spec), "");
}

TEST(ClipGradError, AStageThatClipsTakesIt) {
  TrainConfig cfg;
  StageSpec spec;
  spec.name = "baseline";
  spec.supports_clip_grad = true;
  cfg.clip_grad = 1.0;
  EXPECT_EQ(clip_grad_error(cfg, spec), "");
}

}  // namespace
}  // namespace llmp
