// Tests for the shared trainer flags: defaults, parsing, stage-specific flags and defaults,
// exit statuses and one-line messages (death tests), and validation messages.
#include "common/runtime/flags.h"

#include <CLI/CLI.hpp>

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace llmp {
namespace {

// Parses `args` (without argv[0]) into a fresh config; a stage flag --bucket_mb rides along.
struct Parsed {
  TrainConfig cfg;
  double bucket_mb = 25;
};

void parse(Parsed* p, std::vector<std::string> args) {
  CLI::App app{"test trainer"};
  add_train_flags(app, p->cfg);
  app.add_option("--bucket_mb", p->bucket_mb, "bucket size (MiB)");
  std::vector<char*> argv = {const_cast<char*>("train")};
  for (std::string& a : args) argv.push_back(a.data());
  parse_flags_or_exit(app, static_cast<int>(argv.size()), argv.data());
}

TEST(Flags, Defaults) {
  Parsed p;
  parse(&p, {});
  EXPECT_EQ(p.cfg.world_size, 4);
  EXPECT_EQ(p.cfg.steps, 200);
  EXPECT_EQ(p.cfg.global_batch, 16);
  EXPECT_EQ(p.cfg.model, "mini");
  EXPECT_EQ(p.cfg.data, kDefaultCorpusPath);
  EXPECT_EQ(p.cfg.seed, 1337u);
  EXPECT_DOUBLE_EQ(p.cfg.lr, 1e-3);
  EXPECT_DOUBLE_EQ(p.cfg.weight_decay, 0.01);
  EXPECT_EQ(p.cfg.trace, "");
  EXPECT_FALSE(p.cfg.quiet);
}

TEST(Flags, ParsesEveryFlagAndAStageFlag) {
  Parsed p;
  parse(&p, {"--world_size", "2", "--steps=7", "--global_batch", "8", "--model", "tiny",
             "--data", "/tmp", "--seed", "9", "--lr", "0.01", "--weight_decay", "0",
             "--eval_every", "3", "--eval_batches", "2", "--save", "a.st", "--load", "b.st",
             "--log_every", "5", "--trace", "t.json", "--quiet",
             "--bucket_mb", "1.5"});
  EXPECT_EQ(p.cfg.world_size, 2);
  EXPECT_EQ(p.cfg.steps, 7);
  EXPECT_EQ(p.cfg.global_batch, 8);
  EXPECT_EQ(p.cfg.model, "tiny");
  EXPECT_EQ(p.cfg.data, "/tmp");
  EXPECT_EQ(p.cfg.seed, 9u);
  EXPECT_DOUBLE_EQ(p.cfg.lr, 0.01);
  EXPECT_DOUBLE_EQ(p.cfg.weight_decay, 0.0);
  EXPECT_EQ(p.cfg.eval_every, 3);
  EXPECT_EQ(p.cfg.eval_batches, 2);
  EXPECT_EQ(p.cfg.save, "a.st");
  EXPECT_EQ(p.cfg.load, "b.st");
  EXPECT_EQ(p.cfg.log_every, 5);
  EXPECT_EQ(p.cfg.trace, "t.json");
  EXPECT_TRUE(p.cfg.quiet);
  EXPECT_DOUBLE_EQ(p.bucket_mb, 1.5);
}

TEST(Flags, AStageSetsItsOwnDefaultAndHelpShowsIt) {
  TrainConfig cfg;
  cfg.world_size = 2;
  CLI::App app{"stage"};
  add_train_flags(app, cfg);
  EXPECT_NE(app.help().find("--world_size INT=2"), std::string::npos) << app.help();
  std::vector<char*> argv = {const_cast<char*>("train")};
  parse_flags_or_exit(app, 1, argv.data());
  EXPECT_EQ(cfg.world_size, 2);
}

using FlagsDeathTest = ::testing::Test;

TEST(FlagsDeathTest, HelpExitsZero) {
  EXPECT_EXIT({ Parsed p; parse(&p, {"--help"}); }, ::testing::ExitedWithCode(0), "");
}

TEST(FlagsDeathTest, UnknownFlagIsOneLineAndExitTwo) {
  EXPECT_EXIT({ Parsed p; parse(&p, {"--bogus", "3"}); }, ::testing::ExitedWithCode(2),
              "^error: [^\n]*--bogus[^\n]*\n$");
}

TEST(FlagsDeathTest, BadValueNamesFlagAndValue) {
  EXPECT_EXIT({ Parsed p; parse(&p, {"--steps", "ten"}); }, ::testing::ExitedWithCode(2),
              "^error: [^\n]*--steps[^\n]*ten[^\n]*\n$");
  EXPECT_EXIT({ Parsed p; parse(&p, {"--lr", "fast"}); }, ::testing::ExitedWithCode(2),
              "^error: [^\n]*--lr[^\n]*fast[^\n]*\n$");
  EXPECT_EXIT({ Parsed p; parse(&p, {"--seed", "-1"}); }, ::testing::ExitedWithCode(2),
              "^error: --seed: must not be negative, got -1\n$");
  EXPECT_EXIT({ Parsed p; parse(&p, {"--steps"}); }, ::testing::ExitedWithCode(2),
              "^error: [^\n]*--steps[^\n]*\n$");
}

TEST(Flags, ValidationMessages) {
  TrainConfig ok;
  ok.data = ::testing::TempDir();
  EXPECT_EQ(validation_error(ok), "");

  TrainConfig c = ok;
  c.global_batch = 30;
  EXPECT_EQ(validation_error(c), "global batch 30 is not divisible by data-parallel size 4");
  EXPECT_EQ(validation_error(c, 3), "") << "an explicit dp size overrides world_size";
  EXPECT_EQ(validation_error(c, 7), "global batch 30 is not divisible by data-parallel size 7");

  c = ok;
  c.steps = -1;
  EXPECT_EQ(validation_error(c), "steps -1 must not be negative");
  c = ok;
  c.lr = 0;
  EXPECT_EQ(validation_error(c), "learning rate 0 must be positive");
  c = ok;
  c.lr = -0.5;
  EXPECT_EQ(validation_error(c), "learning rate -0.5 must be positive");
  c = ok;
  c.model = "huge";
  EXPECT_EQ(validation_error(c), "unknown model preset 'huge' (expected tiny, mini, gpt2, moe-tiny or moe-mini)");
  c = ok;
  c.data = "/no/such/corpus";
  EXPECT_EQ(validation_error(c), "data path /no/such/corpus does not exist");
  c = ok;
  c.load = "/no/such/ckpt.safetensors";
  EXPECT_EQ(validation_error(c), "checkpoint to load /no/such/ckpt.safetensors does not exist");
  c = ok;
  c.world_size = 0;
  EXPECT_EQ(validation_error(c), "world size 0 must be at least 1");
  c = ok;
  c.log_every = 0;
  EXPECT_EQ(validation_error(c), "log_every 0 must be at least 1");
  c = ok;
  c.layers = -2;
  EXPECT_EQ(validation_error(c), "layers -2 must not be negative");
  c = ok;
  c.timeout = -1;
  EXPECT_EQ(validation_error(c), "timeout -1 s must be 0 (off) or positive");
  c.timeout = 0;
  EXPECT_EQ(validation_error(c), "") << "0 turns the watchdog off";
  c = ok;
  c.data = "/dev/zero";
  EXPECT_EQ(validation_error(c),
            "--data /dev/zero: not a regular file or directory (a character device)");
}

// --precision and the loss-scale flags: an unknown precision, a negative scale, and a scaling
// flag without fp16 are each one line naming the value.
TEST(Flags, PrecisionAndLossScaleFlags) {
  Parsed p;
  parse(&p, {});
  EXPECT_EQ(p.cfg.precision, "fp32");
  EXPECT_EQ(p.cfg.loss_scale, 0) << "0: dynamic";
  parse(&p, {"--precision", "fp16", "--loss_scale", "128", "--loss_scale_window", "7"});
  EXPECT_EQ(p.cfg.precision, "fp16");
  EXPECT_DOUBLE_EQ(p.cfg.loss_scale, 128);
  EXPECT_EQ(p.cfg.loss_scale_window, 7);

  TrainConfig ok;
  ok.data = ::testing::TempDir();
  TrainConfig c = ok;
  for (const char* good : {"fp32", "bf16", "fp16"}) {
    c.precision = good;
    EXPECT_EQ(validation_error(c), "") << good;
  }
  for (const char* bad : {"fp8", "FP16", "bfloat16", ""}) {
    c.precision = bad;
    EXPECT_EQ(validation_error(c),
              "unknown precision '" + std::string(bad) + "' (expected fp32, bf16 or fp16)");
  }
  c = ok;
  c.precision = "fp16";
  c.loss_scale = -1;
  EXPECT_EQ(validation_error(c), "loss scale -1 must be 0 (dynamic) or positive");
  c.loss_scale = 128;
  EXPECT_EQ(validation_error(c), "") << "a static scale with fp16";
  c.precision = "bf16";
  EXPECT_EQ(validation_error(c), "--loss_scale 128 applies to --precision fp16 only (bf16 keeps "
                                 "fp32's exponent range: no scaling needed)");
  c = ok;
  c.loss_scale_window = 10;
  EXPECT_EQ(validation_error(c),
            "--loss_scale_window 10 applies to --precision fp16 only (fp32 needs no scaling)");
  c = ok;
  c.precision = "fp16";
  c.initial_loss_scale = 0;
  EXPECT_EQ(validation_error(c), "initial loss scale 0 must be positive");
}

TEST(FlagsDeathTest, UnknownPrecisionExitsTwoWithOneLine) {
  TrainConfig c;
  c.data = ::testing::TempDir();
  c.precision = "fp8";
  EXPECT_EXIT(validate(c), ::testing::ExitedWithCode(2),
              "^error: unknown precision 'fp8' \\(expected fp32, bf16 or fp16\\)\n$");
}

TEST(Flags, WatchdogAndOversubscribeFlags) {
  Parsed p;
  parse(&p, {});
  EXPECT_DOUBLE_EQ(p.cfg.timeout, 600) << "generous by default";
  EXPECT_FALSE(p.cfg.oversubscribe);
  parse(&p, {"--timeout", "2.5", "--oversubscribe"});
  EXPECT_DOUBLE_EQ(p.cfg.timeout, 2.5);
  EXPECT_TRUE(p.cfg.oversubscribe);
}

TEST(Flags, ArenaFlags) {
  Parsed p;
  parse(&p, {});
  EXPECT_EQ(p.cfg.arena_bytes, 0) << "off: the plain allocator";
  EXPECT_FALSE(p.cfg.defrag);
  parse(&p, {"--arena_bytes", "1048576", "--defrag"});
  EXPECT_EQ(p.cfg.arena_bytes, 1048576);
  EXPECT_TRUE(p.cfg.defrag);
  TrainConfig c;
  c.data = ::testing::TempDir();
  c.arena_bytes = kMinArenaBytes;
  EXPECT_EQ(validation_error(c), "");
  c.arena_bytes = -5;
  EXPECT_EQ(validation_error(c), "arena_bytes -5 must be 0 (off) or at least 65536");
  c.arena_bytes = kMinArenaBytes - 1;
  EXPECT_EQ(validation_error(c), "arena_bytes 65535 must be 0 (off) or at least 65536");
  c.arena_bytes = 0;
  c.defrag = true;
  EXPECT_EQ(validation_error(c).rfind("--defrag needs --arena_bytes N", 0), 0u);
  c.defrag = false;
  c.arena_bytes = kMinArenaBytes;
  c.device = "cpu";
  c.arena_bytes = 0;
  c.tf32 = true;  // TF32 is the GPU's
  EXPECT_EQ(validation_error(c).rfind("--tf32 needs --device cuda", 0), 0u);
  c.tf32 = false;
  c.backend = "gloo";
  EXPECT_EQ(validation_error(c), "--backend gloo: expected auto, mpi or nccl");
  c.backend = "nccl";  // NCCL moves device tensors only
  EXPECT_EQ(validation_error(c).rfind("--backend nccl needs --device cuda", 0), 0u);
  c.backend = "auto";
  c.arena_bytes = kMinArenaBytes;
  c.device = "cuda";  // the arena is host memory behind the CPU allocator
  EXPECT_EQ(validation_error(c).rfind("--arena_bytes 65536 with --device cuda: the arena holds "
                                      "host memory", 0), 0u);
}

TEST(Flags, KnownPresets) {
  EXPECT_TRUE(is_known_preset("tiny"));
  EXPECT_TRUE(is_known_preset("mini"));
  EXPECT_TRUE(is_known_preset("gpt2"));
  EXPECT_TRUE(is_known_preset("moe-tiny"));
  EXPECT_TRUE(is_known_preset("moe-mini"));
  EXPECT_FALSE(is_known_preset("Mini"));
  EXPECT_EQ(known_presets().size(), 5u);
}

TEST(Flags, MixtureOfExpertsValues) {
  TrainConfig c;
  c.data = ::testing::TempDir();
  c.capacity_factor = 0;
  EXPECT_EQ(validation_error(c), "capacity factor 0 must be > 0");
  c.capacity_factor = -0.5;
  EXPECT_EQ(validation_error(c), "capacity factor -0.5 must be > 0");
  c.capacity_factor = 1.5;
  EXPECT_EQ(validation_error(c), "");
  c.top_k = -3;
  EXPECT_EQ(validation_error(c), "top_k -3 must not be negative");
  c.top_k = 0;
  EXPECT_EQ(validation_error(c), "top_k 0 must be at least 1 (-1: the preset's)");
  c.top_k = -1;
  c.moe_every = 0;
  EXPECT_EQ(validation_error(c), "moe_every 0 must be at least 1");
  c.moe_every = -1;
  c.aux_loss_coef = -1;
  EXPECT_EQ(validation_error(c), "aux loss coefficient -1 must not be negative");
  c.aux_loss_coef = 0.01;
  c.z_loss_coef = -0.5;
  EXPECT_EQ(validation_error(c), "z-loss coefficient -0.5 must not be negative");
}

TEST(FlagsDeathTest, ValidateExitsTwoWithOneLine) {
  TrainConfig c;
  c.data = ::testing::TempDir();
  c.global_batch = 30;
  EXPECT_EXIT(validate(c), ::testing::ExitedWithCode(2),
              "^error: global batch 30 is not divisible by data-parallel size 4\n$");
}

}  // namespace
}  // namespace llmp
