// The checks of a run's flags against its stage (see launch_checks.h).
#include "common/train/launch_checks.h"

#include <fmt/format.h>

#include <exception>
#include <string>
#include <utility>

#include "common/data/corpus.h"
#include "common/runtime/check.h"
#include "common/runtime/paths.h"
#include "common/train/checkpoint_io.h"
#include "common/train/resources.h"
#include "kernels/ops/kernel_ops.h"

namespace llmp {

std::string output_paths_error(const TrainConfig& cfg) {
  for (const auto& [flag, path] : {std::pair<const char*, const std::string&>{"--save", cfg.save},
                                   {"--trace", cfg.trace}}) {
    const std::string err = output_path_error(flag, path);
    if (!err.empty()) return err;
  }
  return "";
}

std::string device_error(const TrainConfig& cfg, const StageSpec& spec, bool check_available) {
  if (!spec.supports_device)
    return "--device " + cfg.device + ": " + spec.name +
           " runs on the CPU only so far (README.md, \"On a GPU\", lists the stages that run on "
           "one)";
  if (!check_available) return "";
  const std::string why = device_unavailable_reason(Device::kCUDA);
  return why.empty() ? "" : "--device " + cfg.device + ": " + why;
}

std::string clip_grad_error(const TrainConfig& cfg, const StageSpec& spec) {
  if (cfg.clip_grad == 0 || spec.supports_clip_grad) return "";
  return fmt::format("--clip_grad {}: {} does not clip gradients (every stage in stages/ does; "
                     "a stage that clips sets StageSpec::supports_clip_grad)",
                     cfg.clip_grad, spec.name);
}

void validate_before_launch(const TrainConfig& cfg, const StageSpec& spec) {
  if (cfg.world_size >= 1) {  // else validate() names the world size itself
    const std::string err = grid_mismatch(spec.grid(cfg), cfg.world_size);
    if (!err.empty()) user_error(err);
  }
  validate(cfg, spec.grid(cfg).dp);
  if (!cfg.trace.empty() && !spec.supports_trace)
    user_error("--trace " + cfg.trace + ": " + spec.name +
               " does not write traces (the pipeline stages do)");
  if (cfg.precision != "fp32" && !spec.supports_precision)  // on every device alike
    user_error("--precision " + cfg.precision + ": " + spec.name +
               " trains in fp32 only (mixed precision: baseline, naive_dp, ddp, zero1, zero2, "
               "zero3, mixed_precision, naive_pp, gpipe, 1f1b, interleaved_1f1b, zero_bubble, "
               "chimera, pipedream_2bw (bf16), tensor_parallel, sequence_parallel, hybrid_3d, "
               "ulysses, ring_attention, ring_self_attention, moe)");
  if (cfg.device != "cpu")
    if (const std::string err = device_error(cfg, spec, /*check_available=*/false); !err.empty())
      user_error(err);
  if (const std::string err = clip_grad_error(cfg, spec); !err.empty()) user_error(err);
  {
    GPTConfig m;
    try {
      m = model_config(cfg);
    } catch (const std::exception& e) {
      user_error(e.what());
    }
    if (m.experts > 0 && !spec.supports_moe)
      user_error("--model " + m.name + " (experts=" + std::to_string(m.experts) + "): " +
                 spec.name + " trains dense models only (a mixture of experts: baseline, moe)");
  }
  if (cfg.partition_activations && spec.grid(cfg).tp == 1)
    user_error("--partition_activations: " + spec.name +
               " has no tensor-parallel group (tp = 1): nothing is replicated to partition "
               "(tensor_parallel partitions its checkpoints; sequence_parallel already splits them)");
  // Output paths now, not after training: a run must not spend hours to fail at its save.
  if (const std::string err = output_paths_error(cfg); !err.empty()) user_error(err);
  GPTConfig mc;  // first: a stage's own checks may build the model config too
  try {
    mc = model_config(cfg);
  } catch (const std::exception& e) {
    user_error(e.what());
  }
  if (spec.validate) spec.validate(cfg);
  if (cfg.device != "cpu")  // the device itself, last (see device_error)
    if (const std::string err = device_error(cfg, spec); !err.empty()) user_error(err);
  // Cores, and memory by common/plan's closed forms, before anything is allocated (resources.h).
  check_resources(mc, cfg, spec.grid(cfg), spec.name);
  try {
    Corpus::load(cfg.data, mc.ctx);
  } catch (const std::exception& e) {
    user_error(e.what());
  }
  if (!cfg.load.empty()) {
    try {
      const GPT model(mc);
      read_checkpoint(cfg.load, model);  // parse and check it all; the ranks read it again
    } catch (const std::exception& e) {
      user_error(e.what());
    }
  }
  warn_if_oversubscribed(cfg);  // last: a refused run prints its error line alone
}

}  // namespace llmp
