// Test helpers shared by the tensor_parallel and sequence_parallel stages' tests: the model they
// train, the factory of the strategy over the test world, a few training steps, and the check
// that every rank's copy of the replicated parameters is bit-identical.
//
// The model: tiny with H = 4 heads (t = 4 holds one head per rank), hs = 8, T = 16.
// Glossary: t tensor-parallel ranks, B global batch, T sequence.
#pragma once

#include <cstdint>

#include "common/nn/gpt.h"
#include "common/tp/tp_strategy.h"
#include "tests/equivalence.h"

namespace llmp {

/// tiny with H = 4 heads.
GPTConfig tiny_h4();

/// TensorParallelStrategy over test_world() (sequence parallelism on or off).
StrategyFactory tensor_parallel_on_world(bool sequence_parallel);

/// Trains `steps` steps (step k on training batch k of the fortunes corpus sampled with `seed`,
/// the whole global batch of B sequences on every rank, T = the model's ctx).
void train_steps(TensorParallelStrategy& s, int B, int steps, uint64_t seed);

/// Collective. Expects (gtest, fatal per tensor) every replicated tensor of this rank (its own
/// copy) to equal, bit for bit, the copy get_state returns (the last rank's): LayerNorms, wpe and
/// the row-parallel biases must not drift apart between ranks. Returns the tensors checked.
int expect_replicated_params_identical(TensorParallelStrategy& s);

}  // namespace llmp
