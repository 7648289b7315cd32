// Input checks shared by the GPT's entry points: fail fast with the function name and the values.
//
// Glossary: B batch, T sequence length, ctx maximum T, V vocabulary, s sequence shards.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "common/nn/gpt.h"

namespace llmp {

/// Throws std::invalid_argument("fn: B=.. T=.. (need B > 0, 0 < T <= ctx ..)"), also when T is
/// not divisible by the s sequence shards of sequence parallelism.
inline void check_batch_shape(const char* fn, const GPTConfig& cfg, int B, int T, int s = 1) {
  if (B <= 0 || T <= 0 || T > cfg.ctx)
    throw std::invalid_argument(std::string(fn) + ": B=" + std::to_string(B) +
                                " T=" + std::to_string(T) + " (need B > 0, 0 < T <= ctx " +
                                std::to_string(cfg.ctx) + ")");
  if (T % s != 0)
    throw std::invalid_argument(std::string(fn) + ": T=" + std::to_string(T) +
                                " is not divisible by the " + std::to_string(s) +
                                " sequence-parallel ranks");
}

/// Throws std::invalid_argument("fn: token 300 at (b=0, t=5) is outside [0, 256)") for the first
/// id of ids (B,T) outside [0, V).
inline void check_ids(const char* fn, const char* what, const int32_t* ids, int B, int T, int V) {
  for (int i = 0; i < B * T; ++i)
    if (ids[i] < 0 || ids[i] >= V)
      throw std::invalid_argument(std::string(fn) + ": " + what + " " + std::to_string(ids[i]) +
                                  " at (b=" + std::to_string(i / T) +
                                  ", t=" + std::to_string(i % T) + ") is outside [0, " +
                                  std::to_string(V) + ")");
}

}  // namespace llmp
