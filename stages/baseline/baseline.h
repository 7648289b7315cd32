// The single-rank reference trainer: every other stage must reproduce its losses and parameters.
//
// One rank holds everything: parameters (Ψ), gradients (Ψ) and AdamW's m and v (2Ψ), all fp32,
// 16Ψ bytes (K = 8). A step is forward, backward, optimizer, nothing else: no communication.
// With --precision bf16 / fp16 (common/train/mixed_precision.h): 16-bit parameters and
// gradients (2Ψ + 2Ψ) and an fp32 master copy with m and v (12Ψ): 16Ψ bytes again, K = 12.
//
// The trainer itself is common/train/single_rank.h (start reading there: train_step is three
// lines), shared with the mixed_precision stage, which runs it in four precisions side by side.
//
// Glossary: B global batch, T sequence length, Ψ parameter count.
#pragma once

#include "common/train/single_rank.h"

namespace llmp {

/// The baseline stage's strategy: the single-rank trainer.
using BaselineStrategy = SingleRankStrategy;

}  // namespace llmp
