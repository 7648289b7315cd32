// The check of ZeRO-R's constant buffer (common/train/constant_buffer.h) that the data-parallel
// stages' tests share (ddp, zero1, zero2, zero3 with --constant_buffer_mb): the same stage with
// and without the buffer on the tiny model with L layers, over test_world().
//
// Rajbhandari et al. 2020, §6.2 ("Constant Size Buffers").
//
// Glossary: Ψ parameter count, L layers, cap the buffer's bytes, b bytes per element (4: fp32).
#pragma once

#include <cstdint>
#include <string>

#include "common/nn/gpt.h"
#include "tests/equivalence.h"
#include "tests/stage_test_util.h"

namespace llmp {

/// The bound the stages' constant-buffer tests use. 1/64 MiB = 16,384 bytes = 4,096 fp32
/// elements: below tiny's block unit (12,704 elements) and its embeddings (8,704), so both are
/// cut, and below Ψ (34,176 at L = 2; 110,400 at L = 8).
inline constexpr double kCapMb = 1.0 / 64;
inline constexpr int64_t kCapBytes = 16384;

/// The tiny preset with L layers (and its other sizes).
GPTConfig tiny_with_layers(int layers);

/// Collective over test_world(). `with`: the stage with a constant buffer of `cap_bytes` (a
/// multiple of b), `without`: the same stage in its default mode, both training in `mp`'s
/// precision (b = 4 fp32, 2 bf16 / f16; the model's activations in its storage dtype). On tiny
/// with `layers` layers:
///  1. the bound is below the largest unit and below bΨ (so a unit is cut and the buffer is
///     reused), else the test is wrong;
///  2. one step (the second, measure_one_step): the report's "comm buffer, peak in step" row is
///     MemoryTracker's kCommBuffers peak during the step and EQUALS cap_bytes, its formula too;
///     "sent per step" equals the default mode's to the byte (the chunks partition Ψ);
///  3. the full state (parameters, Adam's m and v: get_state) after 3 steps is bit-identical to
///     the default mode's (world size 2: each sum is a + b, whatever message carries it);
///  4. run_against_baseline (in `mp`'s precision) for 3 steps within `max_rel`.
/// Returns the measurement of 2 for stage-specific checks.
OneStepMeasurement expect_constant_buffer_matches_default(const StrategyFactory& with,
                                                          const StrategyFactory& without,
                                                          int layers, int64_t cap_bytes,
                                                          double max_rel = 1e-5,
                                                          MixedPrecisionConfig mp = {});

}  // namespace llmp
