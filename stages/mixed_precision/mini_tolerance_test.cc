// 200 steps of mini (the stage's default run, B = 16, seed 1337): bf16 and fp16 with dynamic
// loss scaling stay within a stated tolerance of fp32, and all of them learn.
//
// Measured (validation loss; the batches and the arithmetic are deterministic):
//
//   run                               step 50   step 200   Δ200 vs fp32   skipped   final S
//   fp32                              3.3728    2.7484      —              —         —
//   bf16                              3.3822    2.7868     +0.038          0         1
//   fp16, dynamic, S₀ = 4096          3.3998    2.7841     +0.036          0         4096
//   fp16, dynamic, S₀ = 65536         3.4067    3.2909     +0.54           4         4096
//
// Why two horizons. Until about step 50 the loss falls smoothly and every run tracks fp32 within
// 0.04 nats: rounding (2^-9 relative for bf16, 2^-12 for fp16, at every stored value) only
// nudges the trajectory. Between steps 50 and 200 mini sits on a plateau near 3.2 and leaves it
// at a time that depends chaotically on the trajectory: one skipped step is enough to move the
// final loss by half a nat (measured with the overflow test hook on fp16, S₀ = 4096: skipping
// step 1, 3 or 7 ends at 2.72, 3.12 or 3.36). So the runs that follow fp32's batch by batch
// (bf16; fp16 whose dynamic scaler starts at 2^12, where nothing overflows) are held to 0.05
// nats at step 200, and every run, the default scaler included (it starts at 2^16, overflows on
// four steps between 11 and 20, backs off to 2^12 and then trains on), to 0.06 at step 50; at
// step 200 that one must have learned (below 3.4, from ln 256 = 5.5) and skipped exactly four
// steps. (0.02, the example, is met by no 16-bit run at step 200 for the reason above.)
//
// A second platform. The same code built on a later development VM (the same flags,
// -march=x86-64-v3, its system libraries installed fresh by tools/setup.sh) gives the same
// step-50 figures to within 0.01 but other step-200 ones: fp32 2.7476, bf16 2.8260 (+0.078),
// fp16 with S₀ = 2^12 2.7843 (+0.037), the default fp16 3.1047 (four skips). The fp32 baseline
// itself moved (2.7484 → 2.7476; the session that measured it had not touched the code the
// baseline runs), so the platform's arithmetic differs (where exactly was not traced: the system
// libraries or the CPU), and the plateau amplifies it. bf16, whose rounding is 8× coarser than
// fp16's, left the plateau later there: its step-200 bound is 0.10 (what a skipped step or a
// wrong rounding, half a nat, still fails), fp16's stays 0.05. Since bf16 also rounds
// attention's P and dS and the head's dlogits (common/nn/sublayer.h rounded_products), bf16 ends
// at 2.7713 on that VM (+0.024; 3.3789 at step 50); fp32 and fp16 are unchanged.
//
// A third platform (2026-11-25, a VM with an AMD EPYC CPU, the same Debian packages): fp32 and
// fp16 give the first platform's figures to the last digit (2.7484; 2.7841 and 3.2909), bf16
// 3.3931 at step 50 (+0.020) and 2.8785 at step 200 (+0.130; train loss 2.8981, +0.125). The
// code was not the cause: commit fb39e8f and the commit after it, whose CPU arithmetic is the
// same, wrote bit-identical checkpoints after these 200 bf16 steps there. bf16's step-200 bounds
// are 0.15 since (a skipped step, half a nat, still fails them); fp16's stay 0.05 and 0.1.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "stages/mixed_precision/precision_test_util.h"

namespace llmp {
namespace {

struct End {
  double val50, train, val;
  int64_t skipped;
};

End run(TrainConfig cfg) {
  PrecisionRunner r("mini", 16, cfg);
  double train = 0, val50 = 0;
  for (int t = 1; t <= 200; ++t) {
    train = r.step(t);
    if (t == 50) val50 = r.validation();
  }
  const End e{val50, train, r.validation(), r.mp().skipped_steps()};
  std::printf("%s (S0 %g): val loss %.4f at step 50; train loss %.4f, val loss %.4f at 200, "
              "skipped %lld, final S %g\n",
              cfg.precision.c_str(), cfg.initial_loss_scale, e.val50, e.train, e.val,
              static_cast<long long>(e.skipped), r.mp().loss_scale());
  return e;
}

// The four runs share nothing, so each trains in its own forked process and hands its End back
// through a pipe: on CI's 2 cores the test takes half the wall time of running them one after the
// other (~70 s instead of ~145 s). A child that fails (or dies) fails the test with its status.
std::vector<End> run_in_parallel(const std::vector<TrainConfig>& cfgs) {
  std::vector<pid_t> pids;
  std::vector<int> fds;
  for (const TrainConfig& cfg : cfgs) {
    int fd[2];
    if (pipe(fd) != 0) ADD_FAILURE() << "pipe failed";
    std::fflush(stdout);
    const pid_t pid = fork();
    if (pid == 0) {
      close(fd[0]);
      const End e = run(cfg);
      std::fflush(stdout);
      const bool ok = write(fd[1], &e, sizeof e) == static_cast<ssize_t>(sizeof e);
      _exit(ok ? 0 : 1);
    }
    close(fd[1]);
    pids.push_back(pid);
    fds.push_back(fd[0]);
  }
  std::vector<End> ends(cfgs.size());
  for (size_t i = 0; i < cfgs.size(); ++i) {
    const ssize_t n = read(fds[i], &ends[i], sizeof ends[i]);
    close(fds[i]);
    int status = 0;
    waitpid(pids[i], &status, 0);
    EXPECT_TRUE(n == static_cast<ssize_t>(sizeof ends[i]) && WIFEXITED(status) &&
                WEXITSTATUS(status) == 0)
        << cfgs[i].precision << " (S0 " << cfgs[i].initial_loss_scale
        << "): the run's process failed, status " << status;
  }
  return ends;
}

TEST(MixedPrecisionMini, Bf16AndFp16EndNearFp32) {
  TrainConfig fp16_4096 = precision_config("fp16");
  fp16_4096.initial_loss_scale = 4096;
  const std::vector<End> ends = run_in_parallel(
      {precision_config("fp32"), precision_config("bf16"), fp16_4096, precision_config("fp16")});
  const End &fp32 = ends[0], &bf16 = ends[1], &fp16 = ends[2], &fp16_default = ends[3];
  EXPECT_LT(fp32.val, 2.8);  // it learned: ln 256 = 5.545 at initialisation
  // Step 50: every run, skipped steps and all, tracks fp32.
  for (const End* e : {&bf16, &fp16, &fp16_default}) EXPECT_NEAR(e->val50, fp32.val50, 0.06);
  // Step 200: the runs that saw fp32's every batch.
  EXPECT_NEAR(bf16.val, fp32.val, 0.15);  // +0.038, +0.078 and +0.130 on three platforms
  EXPECT_NEAR(fp16.val, fp32.val, 0.05);
  EXPECT_EQ(fp16.skipped, 0);
  // The default scaler's run skipped four early steps and went its own way on the plateau.
  EXPECT_EQ(fp16_default.skipped, 4);
  EXPECT_LT(fp16_default.val, 3.4);
  // The last step's train loss: one batch, noisier (±0.15 between neighbouring steps).
  EXPECT_NEAR(bf16.train, fp32.train, 0.15);  // +0.125 on the third platform
  EXPECT_NEAR(fp16.train, fp32.train, 0.1);
}

}  // namespace
}  // namespace llmp
