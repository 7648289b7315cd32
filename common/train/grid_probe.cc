// grid_probe: a stage whose grid never fits the world (dp = world size and pp = 2), for
// grid_mismatch_test.sh. train_main must end it with one line before its factory is reached;
// the factory returns no strategy, so a missing check shows as a crash, not a pass.
//
// Glossary: dp, pp, tp grid sizes.
#include <memory>

#include "common/train/train_main.h"

int main(int argc, char** argv) {
  llmp::StageSpec spec;
  spec.name = "grid_probe";
  spec.summary = "asks for a dp × pp grid twice the world size (a test probe)";
  spec.default_world_size = 2;
  spec.grid = [](const llmp::TrainConfig& cfg) { return llmp::GridShape{cfg.world_size, 2, 1}; };
  spec.make = [](const llmp::StageContext&) -> std::unique_ptr<llmp::Strategy> { return nullptr; };
  return llmp::train_main(argc, argv, spec);
}
