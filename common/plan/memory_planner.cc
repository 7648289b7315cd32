#include "common/plan/memory_planner.h"

#include <cmath>
#include <stdexcept>

namespace llmp {

const char* to_string(DPStage s) {
  switch (s) {
    case DPStage::kBaseline: return "baseline";
    case DPStage::kNaiveDP: return "naive_dp";
    case DPStage::kDDP: return "ddp";
    case DPStage::kZeRO1: return "zero1";
    case DPStage::kZeRO2: return "zero2";
    case DPStage::kZeRO3: return "zero3";
  }
  return "?";
}

int64_t shard_size(int64_t psi, int ranks) {
  if (ranks < 1) throw std::invalid_argument("ranks must be >= 1, got " + std::to_string(ranks));
  return (psi + ranks - 1) / ranks;
}

MemoryPlan plan_memory(DPStage stage, double psi, int ranks, Precision prec, bool padded) {
  if (ranks < 1) throw std::invalid_argument("ranks must be >= 1, got " + std::to_string(ranks));
  const double shard = padded ? static_cast<double>(shard_size(static_cast<int64_t>(psi), ranks))
                              : psi / ranks;
  MemoryPlan m;
  m.params = prec.param_bytes * psi;
  m.grads = prec.grad_bytes * psi;
  m.optimizer = prec.K * psi;
  switch (stage) {
    case DPStage::kBaseline:
    case DPStage::kNaiveDP:
    case DPStage::kDDP:
      break;
    case DPStage::kZeRO3:
      m.params = prec.param_bytes * shard;
      [[fallthrough]];
    case DPStage::kZeRO2:
      m.grads = prec.grad_bytes * shard;
      [[fallthrough]];
    case DPStage::kZeRO1:
      m.optimizer = prec.K * shard;
      break;
  }
  return m;
}

double plan_bytes_per_step(DPStage stage, double psi, int ranks, double grad_bytes) {
  const double ring = static_cast<double>(ranks - 1) / ranks * psi * grad_bytes;  // (N-1)/N·Ψ·b
  switch (stage) {
    case DPStage::kBaseline: return 0.0;
    case DPStage::kZeRO3: return 3.0 * ring;
    default: return 2.0 * ring;
  }
}

}  // namespace llmp
