// bazel run //stages/long_sequences:train  — the long-sequence methods side by side, measured:
// for T = 1024 and 2048 on p = 4 ranks (tiny widths, H = 4), the baseline's attention-score peak
// (one rank, whole sequences) next to each method's per-rank peak, the bytes and calls its
// attention sent per step, its activations kept per block and its tokens/s. Every figure comes
// from the run (MemoryTracker, CommStats, the wall clock of the timed steps); the stage READMEs
// derive the closed forms the stages' own reports check them against.
//
//   bazel run //stages/long_sequences:train -- --ctx 1024 2048 --batch 2 --timed 2
// --recompute full measures every row with full recomputation (common/nn/recompute.h): the
// methods' forwards and their communication run again, and each block keeps only its input.
// --device cuda runs every row on the GPU(s): a rank per GPU, or the ranks sharing one with their
// collectives staged through host buffers (common/train/device_setup.h); peaks in device bytes.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "common/comm/process_group.h"
#include "common/cp/ring_waits.h"
#include "common/runtime/check.h"
#include "common/runtime/flags.h"
#include "common/runtime/launch.h"
#include "common/runtime/options.h"
#include "common/tensor/memory.h"
#include "common/train/device_setup.h"
#include "kernels/ops/kernel_ops.h"
#include "stages/long_sequences/table.h"

int main(int argc, char** argv) {
  using namespace llmp;
  int world_size = 4, batch = 2, timed = 2;
  std::vector<int> ctx = {1024, 2048};
  TrainConfig dev_cfg;  // --device, and what setup_device reads of it
  std::string recompute = "none";
  const AppPtr app = make_app("long_sequences: ring self-attention, ring attention and Ulysses "
                               "against the baseline at long T, measured");
  add_option(*app, "--world_size", world_size, "p ranks", in_range(1, 64));
  add_option(*app, "--ctx", ctx, "the sequence lengths T of the rows", in_range(8, 65536));
  add_option(*app, "--batch", batch, "sequences per step (B)", in_range(1, 4096));
  add_option(*app, "--timed", timed, "timed steps per row (after one warm-up step)",
             in_range(1, 100));
  add_option(*app, "--device", dev_cfg.device,
             "where the walks run: cpu, or cuda (peaks in GPU bytes)", one_of({"cpu", "cuda"}));
  add_option(*app, "--recompute", recompute,
             "every row with full recomputation (none or full: the methods recompute whole "
             "blocks only)",
             one_of({"none", "full"}));
  parse_flags_or_exit(*app, argc, argv);
  const Device device = dev_cfg.device == "cuda" ? Device::kCUDA : Device::kCPU;
  if (const std::string why = device_unavailable_reason(device); !why.empty())
    user_error("--device " + dev_cfg.device + ": " + why);  // before any rank starts
  launch_or_init(argc, argv, world_size);
  auto world = ProcessGroup::world();
  if (device != Device::kCPU) world = setup_device(dev_cfg, world);
  const bool root = world->rank() == 0;
  if (root)
    std::printf("tiny widths (L = 2, C = 32, H = 4), B = %d, p = %d ranks on %s, --recompute %s; "
                "peaks and sends are the largest over the ranks, tokens/s over %d timed steps\n\n"
                "| T | method | attention-score peak per rank | attention sent per step | calls "
                "per step | activations kept per block | tokens/s |\n|---|---|---|---|---|---|---|\n",
                batch, world->size(), dev_cfg.device.c_str(), recompute.c_str(), timed);
  for (int T : ctx) {
    GPTConfig c = table_model(T);
    if (recompute == "full") c.recompute = Recompute::kFull;
    for (AttentionMethod a : {AttentionMethod::kMaterialized, AttentionMethod::kFlash}) {
      if (!root) break;  // whole sequences on one rank: the baseline, then --attention flash
      GPTConfig one = c;
      one.attention = a;
      const Row b = measure_baseline(one, batch, timed, device);
      std::printf("| %d | %s | %s | - | - | %s | %.0f |\n", T, b.method.c_str(),
                  format_bytes(b.score_peak).c_str(), format_bytes(b.kept).c_str(), b.tokens_per_s);
      std::fflush(stdout);
    }
    world->barrier();
    for (const Method& me : methods()) {
      const std::string err = me.split_error(T, c.heads, world->size());
      if (!err.empty()) {
        if (root) std::printf("| %d | %s | (%s) | | | | |\n", T, me.label.c_str(), err.c_str());
        continue;
      }
      const Row r = measure_method(me, c, batch, timed, *world, device);
      if (root)
        std::printf("| %d | %s | %s | %s | %lld | %s | %.0f |\n", T, r.method.c_str(),
                    format_bytes(r.score_peak).c_str(), format_bytes(r.sent).c_str(),
                    static_cast<long long>(r.calls), format_bytes(r.kept).c_str(), r.tokens_per_s);
      std::fflush(stdout);
    }
  }
  // The ring cores' overlap, measured: the same runs with the next block's transfer waited for
  // before the computation (RingWaits::overlap = false) and after it (the cores' order).
  const int T = ctx.back();
  if (root)
    std::printf("\nOverlap of the ring transfers at T = %d (ring_waits.h): time inside the rings' "
                "waits per step (largest over the ranks) and tokens/s\n\n| method | transfer "
                "waited | ring waits ms/step | tokens/s |\n|---|---|---|---|\n", T);
  for (const Method& me : methods()) {
    if (!me.ring || !me.split_error(T, 4, world->size()).empty()) continue;
    for (bool overlap : {false, true}) {
      RingWaits::instance().overlap = overlap;
      const Row r = measure_method(me, table_model(T), batch, timed, *world, device);
      if (root)
        std::printf("| %s | %s | %.1f | %.0f |\n", r.method.c_str(),
                    overlap ? "after the block's computation" : "before it (no overlap)",
                    r.wait_ms, r.tokens_per_s);
      std::fflush(stdout);
    }
  }
  RingWaits::instance().overlap = true;
  return 0;
}
