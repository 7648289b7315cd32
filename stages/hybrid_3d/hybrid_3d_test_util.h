// Test helpers of the hybrid_3d stage: a HybridStrategy over the whole test world cut into a
// dp × pp × tp grid, as a StrategyFactory for tests/equivalence.h, and the tiny models the tests
// train.
//
// Glossary: dp/pp/tp the grid, m micro-batches per replica, v chunks per pipeline rank.
#pragma once

#include "common/comm/grid.h"
#include "stages/hybrid_3d/hybrid_3d.h"
#include "tests/equivalence.h"

namespace llmp {

/// The grid of `shape` over the test world (every rank), built once per shape and kept for the
/// whole binary (a strategy keeps references to its groups). Collective the first time.
ProcessGrid& hybrid_test_grid(GridShape shape);

/// A HybridStrategy on hybrid_test_grid(shape) with options `o`.
StrategyFactory hybrid_factory(GridShape shape, HybridOptions o);

/// tiny (L = 2, C = 32, H = 2, V = 256, T = 16), B = 12, 10 steps; `layers` > 0 overrides L.
EquivalenceConfig hybrid_equivalence_config(int layers = 0);

}  // namespace llmp
