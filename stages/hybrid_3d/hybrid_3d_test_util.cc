// hybrid_3d test helpers (see hybrid_3d_test_util.h).
#include "stages/hybrid_3d/hybrid_3d_test_util.h"

#include <map>
#include <memory>
#include <tuple>

namespace llmp {

ProcessGrid& hybrid_test_grid(GridShape shape) {
  static const std::shared_ptr<ProcessGroup> world = ProcessGroup::world();
  static std::map<std::tuple<int, int, int>, std::unique_ptr<ProcessGrid>> grids;
  std::unique_ptr<ProcessGrid>& g = grids[{shape.dp, shape.pp, shape.tp}];
  if (!g) g = std::make_unique<ProcessGrid>(world, shape);
  return *g;
}

StrategyFactory hybrid_factory(GridShape shape, HybridOptions o) {
  return [shape, o](const GPT& model, AdamWConfig opt, uint64_t seed) -> std::unique_ptr<Strategy> {
    return std::make_unique<HybridStrategy>(model.config(), hybrid_test_grid(shape), opt, seed, o);
  };
}

EquivalenceConfig hybrid_equivalence_config(int layers) {
  EquivalenceConfig c;
  c.layers = layers;
  c.global_batch = 12;  // divisible by dp·m for dp ∈ {1, 2, 4}, m ∈ {1, 3}, and by dp·m = 2·2, 2·6
  c.steps = 10;
  return c;
}

}  // namespace llmp
