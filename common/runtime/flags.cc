// Shared trainer flags with CLI11. See flags.h.
#include "common/runtime/flags.h"

#include <CLI/CLI.hpp>

#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "common/runtime/check.h"

namespace llmp {

namespace {

// CLI11 messages are one line already; make sure of it (a stray newline would break the
// "exactly one line" contract that scripts and tests rely on).
std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

std::string format_double(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

}  // namespace

const std::vector<std::string>& known_presets() {
  static const std::vector<std::string> names = {"tiny", "mini", "gpt2", "moe-tiny", "moe-mini"};
  return names;
}

bool is_known_preset(const std::string& name) {
  for (const std::string& n : known_presets())
    if (n == name) return true;
  return false;
}

void add_train_flags(CLI::App& app, TrainConfig& cfg) {
  app.add_option("--world_size", cfg.world_size, "number of ranks N")->capture_default_str();
  app.add_option("--steps", cfg.steps, "optimizer steps")->capture_default_str();
  app.add_option("--global_batch", cfg.global_batch,
                 "sequences per optimizer step, all ranks together (B)")
      ->capture_default_str();
  app.add_option("--model", cfg.model, "model preset: tiny, mini, gpt2, moe-tiny or moe-mini")->capture_default_str();
  app.add_option("--layers", cfg.layers,
                 "override the preset's number of transformer blocks L (0: the preset's)")
      ->capture_default_str();
  app.add_option("--ctx", cfg.ctx,
                 "override the preset's context length T, the positions of every sequence "
                 "(0: the preset's)")
      ->capture_default_str();
  app.add_option("--heads", cfg.heads,
                 "override the preset's number of attention heads H, which must divide C "
                 "(0: the preset's)")
      ->capture_default_str();
  app.add_option("--make_vocab_size_divisible_by", cfg.vocab_divisible_by,
                 "pad the vocabulary (wte's rows, the logits) to a multiple of this, masked: the "
                 "same model and checkpoints (1: no padding; 128 pads gpt2's 50257 to 50304)")
      ->check(CLI::Validator(
          [](std::string& v) {
            try {
              if (std::stoll(v) >= 1) return std::string();
            } catch (const std::exception&) {
            }
            return "must be an integer of at least 1 (1: no padding), got " + v;
          },
          ""))
      ->capture_default_str();
  app.add_option("--experts", cfg.experts,
                 "mixture of experts: E expert MLPs in each MoE block (0: dense; -1: the preset's)");
  app.add_option("--top_k", cfg.top_k, "mixture of experts: experts per token k (-1: the preset's)");
  app.add_option("--moe_every", cfg.moe_every,
                 "mixture of experts: every n-th block is MoE (-1: the preset's)");
  app.add_option("--capacity_factor", cfg.capacity_factor,
                 "mixture of experts: c, slots per expert per sequence ⌈k·T·c/E⌉ (the preset's: "
                 "1.25, moe-tiny 1)");
  app.add_option("--aux_loss_coef", cfg.aux_loss_coef,
                 "mixture of experts: α of the load-balancing loss (the preset's: 0.01)");
  app.add_option("--z_loss_coef", cfg.z_loss_coef,
                 "mixture of experts: β of ST-MoE's router z-loss, mean of (log Σ exp z)² "
                 "(the preset's: 0, off)");
  app.add_option("--data", cfg.data, "corpus: a text file or a folder of them")
      ->capture_default_str();
  // CLI11 2.1 would wrap "-1" into an unsigned 2^64-1; refuse it instead.
  app.add_option("--seed", cfg.seed, "seed for initialisation and sampling")
      ->check(CLI::Validator(
          [](std::string& v) {
            return !v.empty() && v[0] == '-' ? "must not be negative, got " + v : std::string();
          },
          ""))
      ->capture_default_str();
  app.add_option("--lr", cfg.lr, "AdamW learning rate")->capture_default_str();
  app.add_option("--device", cfg.device,
                 "cpu, or cuda: parameters, gradients, optimizer state, activations and kernels "
                 "on the GPU (the stages that support it)")
      ->capture_default_str();
  app.add_option("--backend", cfg.backend,
                 "with --device cuda, what carries device tensors between ranks: nccl (one GPU "
                 "per rank), mpi (host staging; ranks may share a GPU), or auto: nccl when linked "
                 "and each rank of a node has a GPU of its own, else mpi")
      ->capture_default_str();
  app.add_flag("--tf32", cfg.tf32,
               "with --device cuda: fp32 matrix products on TF32 tensor cores (10-bit mantissa "
               "inputs, fp32 sums; faster, less exact); off by default");
  app.add_option("--precision", cfg.precision,
                 "fp32, or mixed precision: bf16 or fp16 (16-bit parameters, gradients and "
                 "activations, fp32 master weights)")
      ->capture_default_str();
  app.add_option("--loss_scale", cfg.loss_scale,
                 "fp16: static loss scale S (0: dynamic; 1: no scaling)")
      ->capture_default_str();
  app.add_option("--initial_loss_scale", cfg.initial_loss_scale, "fp16: dynamic S at the start")
      ->capture_default_str();
  app.add_option("--loss_scale_window", cfg.loss_scale_window,
                 "fp16: clean steps in a row before the dynamic S doubles")
      ->capture_default_str();
  app.add_option("--min_loss_scale", cfg.min_loss_scale, "fp16: the dynamic S never goes below")
      ->capture_default_str();
  app.add_option("--recompute", cfg.recompute,
                 "activation recomputation: none, full (keep block inputs only) or selective "
                 "(recompute attention's softmax only)")
      ->capture_default_str();
  app.add_option("--attention", cfg.attention,
                 "whole-sequence attention: materialized (softmax probabilities B·H·T² kept) or "
                 "flash (online softmax; only the row log-sum-exp B·H·T kept, P made again in "
                 "the backward)")
      ->capture_default_str();
  app.add_option("--recompute_every", cfg.recompute_every,
                 "with --recompute full: keep the input of every k-th block only (k = √L: O(√L) "
                 "activation memory)")
      ->capture_default_str();
  app.add_flag("--partition_activations", cfg.partition_activations,
               "ZeRO-R Pa: with --recompute full on a tensor-parallel stage, keep 1/t of each "
               "checkpointed block input and all-gather it before its recomputation");
  app.add_flag("--cpu_checkpointing", cfg.cpu_checkpointing,
               "ZeRO-R Pa+cpu: with --recompute full and --device cuda, keep each checkpointed "
               "block input in host memory until its recomputation copies it back");
  app.add_option("--weight_decay", cfg.weight_decay, "AdamW decoupled weight decay")
      ->capture_default_str();
  app.add_flag("--decay_all", cfg.decay_all,
               "decay every tensor (default: only those with >= 2 dims, as GPT-2/nanoGPT)");
  app.add_option("--clip_grad", cfg.clip_grad,
                 "clip the gradients to this global L2 norm (GPT-2/3: 1.0; 0: no clipping)")
      ->capture_default_str();
  app.add_option("--eval_every", cfg.eval_every, "validation loss every this many steps (0: never)")
      ->capture_default_str();
  app.add_option("--eval_batches", cfg.eval_batches, "global batches per validation loss")
      ->capture_default_str();
  app.add_option("--save", cfg.save, "write a safetensors checkpoint here at the end");
  app.add_option("--load", cfg.load, "start from this safetensors checkpoint");
  app.add_option("--log_every", cfg.log_every, "a progress line every this many steps")
      ->capture_default_str();
  app.add_option("--trace", cfg.trace, "write a Chrome trace (chrome://tracing, Perfetto) here");
  app.add_flag("--quiet", cfg.quiet, "no progress bar or info lines");
  app.add_option("--timeout", cfg.timeout,
                 "seconds a rank may wait in one collective or receive before the job ends "
                 "(exit 124); 0: never")
      ->capture_default_str();
  app.add_flag("--oversubscribe", cfg.oversubscribe,
               "allow more than " + std::to_string(kMaxRanksPerCore) +
                   " ranks per CPU core (refused otherwise; more ranks than cores warns)");
  app.add_option("--arena_bytes", cfg.arena_bytes,
                 "carve each rank's tensors out of one fixed block of this many bytes, first fit "
                 "(0: the plain allocator)")
      ->capture_default_str();
  app.add_flag("--defrag", cfg.defrag,
               "with --arena_bytes: long-lived tensors (model states, activation checkpoints) in "
               "their own region, apart from short-lived ones (ZeRO-R)");
}

void parse_flags_or_exit(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& e) {  // --help, --help-all, --version
    if (world_rank() == 0) {
      std::ostringstream out, err;
      app.exit(e, out, err);
      std::fputs(out.str().c_str(), stdout);
      std::fflush(stdout);
    }
    if (mpi_up()) MPI_Finalize();
    std::exit(0);
  } catch (const CLI::ParseError& e) {
    // Every rank parsed the same argv and failed the same way; all_ranks_ok makes one print.
    all_ranks_ok(false, one_line(e.what()));
    std::exit(2);  // not reached: all_ranks_ok(false, ...) exits
  }
}

std::string validation_error(const TrainConfig& cfg, int dp_size) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const int dp = dp_size > 0 ? dp_size : cfg.world_size;
  if (cfg.world_size < 1) return "world size " + std::to_string(cfg.world_size) + " must be at least 1";
  if (cfg.global_batch < 1) return "global batch " + std::to_string(cfg.global_batch) + " must be positive";
  if (cfg.global_batch % dp != 0)
    return "global batch " + std::to_string(cfg.global_batch) +
           " is not divisible by data-parallel size " + std::to_string(dp);
  if (cfg.steps < 0) return "steps " + std::to_string(cfg.steps) + " must not be negative";
  if (!(cfg.lr > 0) || !std::isfinite(cfg.lr))
    return "learning rate " + format_double(cfg.lr) + " must be positive";
  if (!(cfg.weight_decay >= 0) || !std::isfinite(cfg.weight_decay))
    return "weight decay " + format_double(cfg.weight_decay) + " must not be negative";
  if (!(cfg.clip_grad >= 0) || !std::isfinite(cfg.clip_grad))
    return "--clip_grad " + format_double(cfg.clip_grad) +
           " must be a finite gradient norm >= 0 (0: no clipping)";
  if (cfg.eval_every < 0) return "eval_every " + std::to_string(cfg.eval_every) + " must not be negative";
  if (cfg.eval_batches < 1) return "eval_batches " + std::to_string(cfg.eval_batches) + " must be at least 1";
  if (cfg.layers < 0) return "layers " + std::to_string(cfg.layers) + " must not be negative";
  if (cfg.ctx < 0) return "ctx " + std::to_string(cfg.ctx) + " must not be negative";
  if (cfg.heads < 0) return "heads " + std::to_string(cfg.heads) + " must not be negative";
  for (const auto& [flag, v] : {std::pair<const char*, int>{"experts", cfg.experts},
                                {"top_k", cfg.top_k}, {"moe_every", cfg.moe_every}})
    if (v < -1) return std::string(flag) + " " + std::to_string(v) + " must not be negative";
  if (cfg.moe_every == 0) return "moe_every 0 must be at least 1";
  if (cfg.top_k == 0) return "top_k 0 must be at least 1 (-1: the preset's)";
  if (!std::isnan(cfg.capacity_factor) && !(cfg.capacity_factor > 0 && std::isfinite(cfg.capacity_factor)))
    return "capacity factor " + format_double(cfg.capacity_factor) + " must be > 0";
  if (!std::isnan(cfg.aux_loss_coef) && !(cfg.aux_loss_coef >= 0 && std::isfinite(cfg.aux_loss_coef)))
    return "aux loss coefficient " + format_double(cfg.aux_loss_coef) + " must not be negative";
  if (!std::isnan(cfg.z_loss_coef) && !(cfg.z_loss_coef >= 0 && std::isfinite(cfg.z_loss_coef)))
    return "z-loss coefficient " + format_double(cfg.z_loss_coef) + " must not be negative";
  if (cfg.log_every < 1) return "log_every " + std::to_string(cfg.log_every) + " must be at least 1";
  if (!(cfg.timeout >= 0) || !std::isfinite(cfg.timeout))
    return "timeout " + format_double(cfg.timeout) + " s must be 0 (off) or positive";
  if (cfg.device != "cpu" && cfg.device != "cuda")
    return "unknown device '" + cfg.device + "' (expected cpu or cuda)";
  if (cfg.backend != "auto" && cfg.backend != "mpi" && cfg.backend != "nccl")
    return "--backend " + cfg.backend + ": expected auto, mpi or nccl";
  if (cfg.backend == "nccl" && cfg.device != "cuda")
    return "--backend nccl needs --device cuda (NCCL moves device tensors; a CPU run's "
           "collectives are MPI's)";
  if (cfg.tf32 && cfg.device == "cpu")
    return "--tf32 needs --device cuda (TF32 is a mode of the GPU's tensor cores; the CPU "
           "computes in fp32)";
  if (cfg.precision != "fp32" && cfg.precision != "bf16" && cfg.precision != "fp16")
    return "unknown precision '" + cfg.precision + "' (expected fp32, bf16 or fp16)";
  if (cfg.recompute != "none" && cfg.recompute != "full" && cfg.recompute != "selective")
    return "unknown recompute '" + cfg.recompute + "' (expected none, full or selective)";
  if (cfg.recompute_every < 1)
    return "recompute_every " + std::to_string(cfg.recompute_every) + " must be at least 1";
  if (cfg.recompute_every > 1 && cfg.recompute != "full")
    return "--recompute_every " + std::to_string(cfg.recompute_every) +
           " needs --recompute full (got " + cfg.recompute + ")";
  if (cfg.attention != "materialized" && cfg.attention != "flash")
    return "unknown attention '" + cfg.attention + "' (expected materialized or flash)";
  if (cfg.attention == "flash" && cfg.recompute == "selective")
    return "--recompute selective makes again the probabilities that --attention flash never "
           "keeps: choose one";
  if (cfg.partition_activations && cfg.recompute != "full")
    return "--partition_activations needs --recompute full (got " + cfg.recompute +
           "): only recomputation's checkpoints are partitioned";
  if (cfg.cpu_checkpointing && cfg.recompute != "full")
    return "--cpu_checkpointing needs --recompute full (got " + cfg.recompute +
           "): only recomputation's checkpoints wait on the host";
  if (cfg.cpu_checkpointing && cfg.device != "cuda")
    return "--cpu_checkpointing moves activation checkpoints off a GPU: it needs --device cuda "
           "(got --device " + cfg.device + ", whose checkpoints are in host memory already)";
  if (!(cfg.loss_scale >= 0) || !std::isfinite(cfg.loss_scale))
    return "loss scale " + format_double(cfg.loss_scale) + " must be 0 (dynamic) or positive";
  if (!(cfg.initial_loss_scale > 0) || !std::isfinite(cfg.initial_loss_scale))
    return "initial loss scale " + format_double(cfg.initial_loss_scale) + " must be positive";
  if (!(cfg.min_loss_scale > 0) || !std::isfinite(cfg.min_loss_scale))
    return "min loss scale " + format_double(cfg.min_loss_scale) + " must be positive";
  if (cfg.loss_scale_window < 1)
    return "loss_scale_window " + std::to_string(cfg.loss_scale_window) + " must be at least 1";
  if (cfg.precision != "fp16") {
    const TrainConfig d;
    // Each names its value: "--loss_scale 128 applies to --precision fp16 only (...)".
    struct Set { const char* flag; bool set; std::string value; };
    for (const Set& f :
         {Set{"--loss_scale", cfg.loss_scale != d.loss_scale, format_double(cfg.loss_scale)},
          Set{"--initial_loss_scale", cfg.initial_loss_scale != d.initial_loss_scale,
              format_double(cfg.initial_loss_scale)},
          Set{"--loss_scale_window", cfg.loss_scale_window != d.loss_scale_window,
              std::to_string(cfg.loss_scale_window)},
          Set{"--min_loss_scale", cfg.min_loss_scale != d.min_loss_scale,
              format_double(cfg.min_loss_scale)}})
      if (f.set)
        return std::string(f.flag) + " " + f.value + " applies to --precision fp16 only (" +
               cfg.precision +
               (cfg.precision == "bf16" ? " keeps fp32's exponent range: no scaling needed)"
                                        : " needs no scaling)");
  }
  if (cfg.arena_bytes != 0 && cfg.arena_bytes < kMinArenaBytes)
    return "arena_bytes " + std::to_string(cfg.arena_bytes) + " must be 0 (off) or at least " +
           std::to_string(kMinArenaBytes);
  if (cfg.arena_bytes != 0 && cfg.device != "cpu")  // the arena sits behind the CPU allocator
    return "--arena_bytes " + std::to_string(cfg.arena_bytes) + " with --device " + cfg.device +
           ": the arena holds host memory (the model states are on the device; run without it)";
  if (cfg.defrag && cfg.arena_bytes == 0)
    return "--defrag needs --arena_bytes N (it arranges the arena's blocks; without one there is "
           "no arena)";
  if (!is_known_preset(cfg.model))
    return "unknown model preset '" + cfg.model +
           "' (expected tiny, mini, gpt2, moe-tiny or moe-mini)";
  if (!fs::exists(cfg.data, ec)) return "data path " + cfg.data + " does not exist";
  const std::string kind = Corpus::kind_error(cfg.data);  // /dev/zero, a FIFO: never read
  if (!kind.empty()) return "--data " + cfg.data + ": " + kind;
  if (!cfg.load.empty() && !fs::exists(cfg.load, ec))
    return "checkpoint to load " + cfg.load + " does not exist";
  return "";
}

void validate(const TrainConfig& cfg, int dp_size) {
  const std::string msg = validation_error(cfg, dp_size);
  all_ranks_ok(msg.empty(), msg);
}

}  // namespace llmp
