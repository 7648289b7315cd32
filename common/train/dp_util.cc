#include "common/train/dp_util.h"

#include <algorithm>

#include "common/tensor/memory.h"

namespace llmp {

ShardLayout::ShardLayout(int64_t psi_, int ranks) : psi(psi_), padded(shard_size(psi_, ranks)) {
  for (int i = 0; i < ranks; ++i) {
    const int64_t b = std::min<int64_t>(i * padded, psi);
    begin.push_back(b);
    count.push_back(std::min<int64_t>(padded, psi - b));
  }
}

std::vector<int64_t> ShardLayout::split_range(int64_t a, int64_t b) const {
  std::vector<int64_t> counts(begin.size());
  for (size_t i = 0; i < begin.size(); ++i) {
    const int64_t lo = std::max(a, begin[i]), hi = std::min(b, begin[i] + count[i]);
    counts[i] = std::max<int64_t>(0, hi - lo);
  }
  return counts;
}

MetricsReducer::MetricsReducer(ProcessGroup& group) {
  MPI_CHECK(MPI_Comm_dup(group.comm(), &comm_));
}

MetricsReducer::~MetricsReducer() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Comm_free(&comm_);
}

double MetricsReducer::sum(double local) {
  double global = 0;
  MPI_CHECK(MPI_Allreduce(&local, &global, 1, MPI_DOUBLE, MPI_SUM, comm_));
  return global;
}

std::vector<ReportRow> memory_rows(const MemoryPlan& plan, const char* params_text,
                                   const char* grads_text, const char* optimizer_text) {
  const auto& mt = MemoryTracker::instance();
  return {
      {"parameters", static_cast<double>(mt.current(MemCategory::kParameters)), plan.params,
       params_text},
      {"gradients", static_cast<double>(mt.current(MemCategory::kGradients)), plan.grads,
       grads_text},
      {"optimizer state", static_cast<double>(mt.current(MemCategory::kOptimizerState)),
       plan.optimizer, optimizer_text},
  };
}

}  // namespace llmp
