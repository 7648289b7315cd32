// --offload (see offload_flag.h).
#include "common/train/offload_flag.h"

#include "common/runtime/check.h"
#include "common/runtime/options.h"

namespace llmp {

void OffloadFlag::add(CLI::App& app) {
  add_option_no_default(app, "--offload", what_,
                        "ZeRO-Offload: 'optimizer' keeps the gradient shard, the fp32 master "
                        "shard and AdamW's m and v on the host and steps AdamW on the CPU (needs "
                        "--device cuda; fp32, bf16 or fp16); "
                        "'none' (default) keeps them beside the parameters",
                        one_of({"none", "optimizer"}));
}

void OffloadFlag::validate(const TrainConfig& cfg) const {
  if (!optimizer()) return;
  if (cfg.device == "cpu")
    user_error("--offload optimizer with --device cpu: the optimizer state is already on the "
               "host (ZeRO-Offload moves it off a GPU: add --device cuda)");
}

}  // namespace llmp
