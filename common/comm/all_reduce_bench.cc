// all_reduce_bench: time per all_reduce and bus bandwidth over the MPI backend, nccl-tests style.
//
//   bazel run //common/comm:all_reduce_bench -- --ranks=4 [--iters=200]
//   LLMP_COMM_YIELD=0 bazel run //common/comm:all_reduce_bench -- --ranks=4   (busy-poll waits)
//
// Bus bandwidth = 2(N-1)/N·S / time, the per-rank traffic of a ring all_reduce (process_group.h),
// so numbers are comparable across N. With more ranks than cores, compare LLMP_COMM_YIELD=0
// (MPICH's busy-poll) with the default (waits yield the CPU): mpi_util.h says why it matters.
//
// Glossary: N ranks, S bytes per all_reduce operand.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/comm/mpi_util.h"
#include "common/comm/process_group.h"
#include "common/runtime/launch.h"

namespace {
int int_flag(int argc, char** argv, const char* name, int fallback) {
  const std::string prefix = std::string("--") + name + "=";
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], prefix.c_str(), prefix.size()) == 0)
      return std::atoi(argv[i] + prefix.size());
  return fallback;
}
}  // namespace

int main(int argc, char** argv) {
  llmp::launch_or_init(argc, argv, int_flag(argc, argv, "ranks", 4));
  const int iters = int_flag(argc, argv, "iters", 200);
  auto world = llmp::ProcessGroup::world();
  const int N = world->size();
  if (world->rank() == 0)
    std::printf("all_reduce over %d ranks, %d iterations, yielding waits: %s\n", N, iters,
                llmp::mpi_yield_when_waiting() ? "on" : "off");
  for (int64_t bytes : {int64_t(1) << 10, int64_t(1) << 16, int64_t(1) << 22}) {
    llmp::Tensor t = llmp::Tensor::zeros({bytes / 4});
    world->all_reduce(t);  // warm-up
    world->barrier();
    const auto start = std::chrono::steady_clock::now();
    const int n = bytes >= (1 << 22) ? std::max(1, iters / 20) : iters;
    for (int i = 0; i < n; ++i) world->all_reduce(t);
    world->barrier();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double per = s / n;
    if (world->rank() == 0)
      std::printf("  S = %8lld bytes: %10.1f us/call   bus bandwidth %8.3f GB/s\n",
                  static_cast<long long>(bytes), per * 1e6,
                  2.0 * (N - 1) / N * bytes / per / 1e9);
  }
  world.reset();
  llmp::shutdown();
  return 0;
}
