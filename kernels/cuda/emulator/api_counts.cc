// The emulator's call counts (api_counts.h): a table kept while the process runs, written once
// at exit.
#include "kernels/cuda/emulator/api_counts.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <utility>

namespace llmp::cuda::emu {
namespace {

struct Total {
  double calls = 0, bytes = 0, flops = 0;
};

const char* category_name(CallKind c) {
  switch (c) {
    case CallKind::kLaunch:
      return "launch";
    case CallKind::kSync:
      return "sync";
    case CallKind::kGemm:
      return "gemm";
    case CallKind::kCopy:
      return "copy";
    case CallKind::kAlloc:
      return "alloc";
    case CallKind::kNccl:
      return "nccl";
  }
  return "?";
}

struct Counts {
  std::mutex mu;
  std::map<std::pair<std::string, std::string>, Total> rows;
  std::map<uintptr_t, size_t> pinned;  // begin -> bytes
};

Counts& counts() {
  static Counts* c = new Counts;  // never destroyed: calls may come after static destructors
  return *c;
}

// The file to write, or "" when counting is off.
const std::string& out_path() {
  static const std::string path = [] {
    const char* p = std::getenv("LLMP_CUDA_EMULATOR_COUNTS");
    if (p == nullptr || *p == '\0') return std::string();
    const char* rank = std::getenv("PMI_RANK");
    const char* size = std::getenv("PMI_SIZE");
    const bool several = size != nullptr && std::atoi(size) > 1;
    return std::string(p) + (several && rank != nullptr ? std::string(".") + rank : "");
  }();
  return path;
}

void write_counts() {
  Counts& c = counts();
  std::lock_guard<std::mutex> lock(c.mu);
  FILE* f = std::fopen(out_path().c_str(), "w");
  if (f == nullptr) {
    std::fprintf(stderr, "CUDA emulator: cannot write the call counts to %s\n",
                 out_path().c_str());
    return;
  }
  std::fprintf(f, "category\tname\tcalls\tbytes\tflops\n");
  for (const auto& [key, t] : c.rows)
    std::fprintf(f, "%s\t%s\t%.0f\t%.0f\t%.17g\n", key.first.c_str(), key.second.c_str(), t.calls,
                 t.bytes, t.flops);
  std::fclose(f);
}

}  // namespace

void count_call(CallKind category, const std::string& name, double bytes, double flops) {
  static const bool registered = [] {
    return out_path().empty() || std::atexit(write_counts) == 0;
  }();
  (void)registered;
  Counts& c = counts();
  std::lock_guard<std::mutex> lock(c.mu);
  Total& t = c.rows[{category_name(category), name}];
  t.calls += 1;
  t.bytes += bytes;
  t.flops += flops;
}

double counted_calls(CallKind category, const std::string& name) {
  Counts& c = counts();
  std::lock_guard<std::mutex> lock(c.mu);
  auto it = c.rows.find({category_name(category), name});
  return it == c.rows.end() ? 0 : it->second.calls;
}

bool is_pinned_range(const void* p, size_t bytes) {
  Counts& c = counts();
  std::lock_guard<std::mutex> lock(c.mu);
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  auto it = c.pinned.upper_bound(a);
  if (it == c.pinned.begin()) return false;
  --it;
  return a + bytes <= it->first + it->second;
}

void note_pinned(const void* p, size_t bytes, bool live) {
  Counts& c = counts();
  std::lock_guard<std::mutex> lock(c.mu);
  if (live)
    c.pinned[reinterpret_cast<uintptr_t>(p)] = bytes;
  else
    c.pinned.erase(reinterpret_cast<uintptr_t>(p));
}

}  // namespace llmp::cuda::emu
