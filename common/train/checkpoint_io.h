// Checkpoints of a training run: the full model state in one safetensors file, whatever stage
// and number of ranks wrote it (a ZeRO run's shards are gathered first), so a run saved by
// zero2 on 4 ranks resumes on the baseline or on 2 ranks.
//
// Tensors (all F32, GPT-2 names, weights stored (in, out) row-major; see common/nn/gpt.h):
//   <name>                          the parameter, e.g. "h.0.attn.c_attn.weight" (C, 3C)
//   optimizer.exp_avg.<name>        AdamW's first moment m, same shape
//   optimizer.exp_avg_sq.<name>     AdamW's second moment v, same shape
// Metadata (strings):
//   format "pt"                     what transformers' from_pretrained requires of a safetensors file
//   llmp_format "llmp-gpt-v2"       this project's layout
//   model, n_layer, n_head, n_embd, vocab_size, n_positions, n_ctx    the model (gpt2_config.h)
//   optimizer "adamw", lr, beta1, beta2, eps, weight_decay, decay ("dim>=2" or "all")
//   step (the last step taken), stage (the stage that wrote it)
//   precision "fp32", "bf16" or "fp16" (Strategy::extra_state; "fp32" when the stage says
//                                   nothing); fp16 adds loss_scale, loss_scale_clean_steps and
//                                   loss_scale_skipped_steps (common/train/mixed_precision.h)
// Under mixed precision the parameters saved are the fp32 MASTER weights (Strategy::get_state),
// with m and v: the full-precision state. The 16-bit working copy is not saved: set_state
// rounds it from the master weights on load, and an fp16 run's loss scaler resumes with its
// scale (Strategy::set_extra_state). A file of one precision loads into a run of another (the
// state is fp32 either way); load_into then logs one line ("loaded a bf16 checkpoint into an
// fp32 run"). A file without "precision" (older runs, foreign files) is fp32.
//
// --load reads (read_checkpoint):
//   llmp-gpt-v2     the configuration is compared with the run's first, field by field;
//   llmp-gpt-v1     (format "llmp-gpt-v1", before the configuration was recorded) still accepted:
//                   its model preset name must be the run's, as v1 checked;
//   foreign         format "pt" or no metadata: files of safetensors' own writers and of
//                   save_pretrained. Names may carry the "transformer." prefix; HF's attention
//                   buffers h.<l>.attn.bias / attn.masked_bias are ignored by name; lm_head.weight,
//                   when present, must equal wte.weight (the head is tied); without optimizer
//                   tensors AdamW's m and v start at zero; the configuration comes from the
//                   metadata, config.json beside the file or the shapes (gpt2_config.h), and a
//                   log line says which. HF's Conv1D stores GPT-2's weights (in, out), as here.
// Every tensor must be finite: a NaN or Inf is refused by name and element.
// A padded vocabulary (GPTConfig::vocab_divisible_by) is the run's layout, not the model: files
// hold wte's V real rows (and theirs of m and v), the pad rows are written nowhere and are zero
// again on load, so padded and unpadded runs read each other's files.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/nn/gpt.h"
#include "common/optim/adamw.h"
#include "common/runtime/checkpoint.h"
#include "common/train/mixed_precision.h"
#include "common/train/strategy.h"

namespace llmp {

/// What read_checkpoint found.
struct ModelCheckpoint {
  Checkpoint file;
  std::string origin;              ///< "llmp-gpt-v2", "llmp-gpt-v1" or "foreign"
  std::string prefix;              ///< "" or "transformer.", before every parameter's name
  GPTConfig config;                ///< the model the file holds
  bool has_optimizer = false;      ///< AdamW's m and v are in the file
  int64_t step = 0;                ///< the last step taken (0 when a foreign file does not say)
  PrecisionCheckpointState precision;  ///< the precision it was saved in (fp32 when unrecorded)
  std::vector<std::string> notes;  ///< what was inferred or defaulted: one log line each

  /// The F32 data of parameter `name` (GPT-2 name, no prefix).
  const float* param(const std::string& name) const { return file.at(prefix + name).f32(); }
};

/// Reads `path` and checks it against the run's `model`: the configuration (one line naming the
/// first differing field: "checkpoint x: n_head is 4, this run has 8"), the tensors (missing,
/// unexpected, shape, dtype), every value finite ("checkpoint x: h.0.ln_1.weight holds a nan at
/// element 5"), the step. Throws std::runtime_error with that one line.
ModelCheckpoint read_checkpoint(const std::string& path, const GPT& model);

/// The same without a run: the configuration comes from the file alone (tools/export_hf). Throws
/// when the file does not tell the head count.
ModelCheckpoint read_checkpoint(const std::string& path);

/// The whole model's state (Ψ floats each, GPTLayout order) from a checkpoint read for `model`;
/// m and v are zeros when the file holds none.
void unpack_state(const ModelCheckpoint& ckpt, const GPT& model, float* params, float* exp_avg,
                  float* exp_avg_sq);

/// Collective: every rank reads `path` and the strategy keeps its part (set_state, then
/// set_extra_state with the file's metadata). Logs the checkpoint's notes (rank 0), a line when
/// the file's precision is not the run's (Strategy::extra_state's "precision", fp32 when it
/// says nothing) and the strategy's set_extra_state line. Returns the step saved.
int64_t load_into(const std::string& path, const GPT& model, Strategy& strategy);

/// Writes the whole state (Ψ floats each) with the metadata above, atomically. `extra`: more
/// metadata (Strategy::extra_state); it may set "precision" (default "fp32") but no other key
/// this function writes (std::invalid_argument naming it).
void write_checkpoint(const std::string& path, const GPT& model, const AdamWConfig& opt,
                      const float* params, const float* exp_avg, const float* exp_avg_sq,
                      int64_t step, const std::string& stage,
                      const std::map<std::string, std::string>& extra = {});

/// Collective (gathers the full state); the rank with `write` true writes `path` atomically,
/// with the strategy's extra_state in the metadata.
void save_from(const std::string& path, const GPT& model, Strategy& strategy,
               const AdamWConfig& opt, int64_t step, const std::string& stage, bool write);

}  // namespace llmp
