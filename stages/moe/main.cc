// bazel run //stages/moe:train  — a mixture-of-experts GPT (moe-mini: 8 experts in every other
// block, top-1) with its experts spread over 4 ranks by all_to_all, every rank reading its own
// quarter of the batch. Flags: bazel run //stages/moe:train -- --help
//   --ep 2: two expert-parallel groups of 2, each expert's gradient all-reduced over the other.
//   --top_k 2 --capacity_factor 1: GShard's top-2 routing with a tighter capacity.
#include <memory>
#include <stdexcept>
#include <string>

#include "common/runtime/check.h"
#include "common/runtime/options.h"
#include "common/train/train_main.h"
#include "stages/moe/moe.h"

namespace {
int ep_flag = 0;  // --ep: expert-parallel size (0: the world size)

int ep_of(const llmp::TrainConfig& cfg) { return ep_flag == 0 ? cfg.world_size : ep_flag; }

/// "" when the run can be split as asked, else the one line naming the values.
std::string split_error(const llmp::TrainConfig& cfg) {
  const int ep = ep_of(cfg);
  const llmp::GPTConfig mc = llmp::model_config(cfg);
  if (mc.experts == 0)
    return "--model " + mc.name + " has no experts (use --model moe-mini, or --experts E)";
  if (ep < 1)
    return "expert-parallel size --ep " + std::to_string(ep) + " must be positive (0: the "
           "world size)";
  if (cfg.world_size % ep != 0)
    return "expert-parallel size --ep " + std::to_string(ep) + " does not divide world size " +
           std::to_string(cfg.world_size);
  if (mc.experts % ep != 0)
    return "experts E=" + std::to_string(mc.experts) +
           " are not divisible by expert-parallel size ep=" + std::to_string(ep);
  if (cfg.partition_activations)
    return "--partition_activations: moe has no tensor-parallel group to partition its "
           "checkpoints over (its tp slot is the expert-parallel group; every rank holds its "
           "checkpoints whole)";
  if (cfg.global_batch % cfg.world_size != 0)
    return "global batch " + std::to_string(cfg.global_batch) + " is not divisible by world "
           "size " + std::to_string(cfg.world_size) + " (every rank reads its own sequences)";
  return "";
}
}  // namespace

int main(int argc, char** argv) {
  llmp::StageSpec spec;
  spec.name = "moe";
  spec.summary = "mixture of experts: experts split over ep ranks (all_to_all to them and back), "
                 "the rest replicated (data parallel over all ranks)";
  spec.supports_moe = true;
  spec.supports_precision = true;  // --precision fp32|bf16|fp16: 16-bit tokens, fp32 router
  spec.supports_device = true;  // --device cuda: the routing on the host (common/nn/moe.h)
  spec.supports_clip_grad = true;  // each dense tensor and each expert counted once in ‖g‖
  spec.default_model = "moe-mini";
  spec.add_flags = [](CLI::App& app) {
    llmp::add_option(app, "--ep", ep_flag,
                     "expert-parallel size: ranks the experts are split over (0: --world_size)");
  };
  // An ep that does not fit keeps the plain grid, so that split_error (below), not the grid's
  // own check, names what is wrong.
  spec.grid = [](const llmp::TrainConfig& cfg) {
    const int ep = ep_of(cfg);
    return ep >= 1 && cfg.world_size % ep == 0 ? llmp::expert_parallel_grid(cfg.world_size, ep)
                                               : llmp::GridShape{cfg.world_size, 1, 1};
  };
  // Before launch: one line, exit 2. Inside the ranks (started by mpiexec directly, which skips
  // the launcher's checks) the same line from every rank, before anything is built.
  spec.validate = [](const llmp::TrainConfig& cfg) {
    if (const std::string err = split_error(cfg); !err.empty()) llmp::user_error(err);
  };
  spec.make = [](const llmp::StageContext& ctx) -> std::unique_ptr<llmp::Strategy> {
    if (const std::string err = split_error(ctx.cfg); !err.empty())
      throw std::invalid_argument(err);
    return std::make_unique<llmp::ExpertParallelStrategy>(ctx.model, ctx.grid, ctx.opt,
                                                          ctx.cfg.seed, ctx.mp);
  };
  return llmp::train_main(argc, argv, spec);
}
