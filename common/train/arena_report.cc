// install_arena_if_asked and the arena's report (see arena_report.h).
#include "common/train/arena_report.h"

#include <cstdio>
#include <memory>
#include <new>
#include <string>

#include "common/runtime/check.h"
#include "common/tensor/arena.h"
#include "common/tensor/memory.h"

namespace llmp {

void install_arena_if_asked(const TrainConfig& cfg) {
  if (cfg.arena_bytes <= 0) return;
  bool ok = true;
  try {
    install_cpu_arena(cfg.arena_bytes, cfg.defrag ? Arena::Mode::kDefrag : Arena::Mode::kFirstFit);
  } catch (const std::bad_alloc&) {
    ok = false;
  }
  all_ranks_ok(ok, "--arena_bytes " + std::to_string(cfg.arena_bytes) + ": the host cannot give a "
                   "rank a block of " + format_bytes(double(cfg.arena_bytes)));
}

std::vector<ReportRow> arena_report_rows() {
  const Arena* a = installed_cpu_arena();
  if (!a) return {};
  const ArenaStats s = a->stats();
  return {{"arena peak used", double(s.peak_used), double(s.capacity - s.total_free_at_peak),
           "N_a − Σ free blocks at peak"}};
}

void print_arena_summary(ProcessGroup& group) {
  const Arena* a = installed_cpu_arena();
  if (!a) return;
  const ArenaStats s = a->stats();
  // Bookkeeping traffic on a duplicate of the group, never in its CommStats (as print_report).
  std::shared_ptr<ProcessGroup> book = group.duplicate();
  const int N = group.size();
  constexpr int kFields = 4;
  Tensor mine = Tensor::empty({kFields}, DType::kF64), all = Tensor::empty({kFields * N}, DType::kF64);
  mine.f64()[0] = double(s.capacity);
  mine.f64()[1] = double(s.peak_used);
  mine.f64()[2] = double(s.total_free_at_peak);
  mine.f64()[3] = double(s.largest_free_at_peak);
  book->all_gather(mine, all);
  if (group.rank() == 0) {
    const char* mode = a->mode() == Arena::Mode::kDefrag ? "defrag" : "first fit";
    for (int r = 0; r < N; ++r) {
      const double* f = all.f64() + kFields * r;
      std::printf("arena (%s) rank %d: capacity %s, peak used %s, at peak %s free in total, "
                  "largest free block %s: largest / total free %.2f\n",
                  mode, r, format_bytes(f[0]).c_str(), format_bytes(f[1]).c_str(),
                  format_bytes(f[2]).c_str(), format_bytes(f[3]).c_str(),
                  f[2] > 0 ? f[3] / f[2] : 1.0);
    }
    std::fflush(stdout);
  }
  book->barrier();
}

}  // namespace llmp
