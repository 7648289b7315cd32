// Command-line flags shared by every trainer, parsed with CLI11.
//
// A stage builds its own CLI::App, sets any defaults it wants to differ in a TrainConfig, adds
// the shared flags with add_train_flags, adds its own (--bucket_mb, --micro_batches, ...), then
// calls parse_flags_or_exit and validate:
//
//   TrainConfig cfg;
//   cfg.world_size = 2;                      // this stage's default; --help shows it
//   AppPtr app = make_app("ZeRO-1 data parallelism");   // options.h
//   add_train_flags(*app, cfg);
//   double bucket_mb = 25;
//   add_option(*app, "--bucket_mb", bucket_mb, "gradient bucket size (MiB)");  // options.h
//   parse_flags_or_exit(*app, argc, argv);
//   validate(cfg);
//
// Exit statuses: --help prints the help and exits 0; a bad command line prints one line
// "error: <what is wrong>" and exits 2 (the same status as user_error in check.h).
//
// Glossary: B global batch (sequences per optimizer step over all ranks), N world size (ranks),
// lr learning rate (AdamW step size), wd weight decay (decoupled, Loshchilov & Hutter 2019).
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "common/data/corpus.h"
#include "common/runtime/options.h"  // CLI::App declared, not included (see there)

namespace llmp {

/// Everything a trainer needs to know from the command line. Defaults are the values below; a
/// stage may overwrite any of them before add_train_flags so that --help shows its own.
/// One thread per rank by design (Eigen is built with EIGEN_DONT_PARALLELIZE): parallelism
/// comes from ranks, which is what the stages teach.
struct TrainConfig {
  int world_size = 4;          ///< --world_size: N ranks (data-parallel size unless the stage splits it)
  int64_t steps = 200;         ///< --steps: optimizer steps; 0 only evaluates / saves
  int global_batch = 16;       ///< --global_batch: B sequences per step, all ranks together
  std::string model = "mini";  ///< --model: GPT preset, one of known_presets()
  int layers = 0;             ///< --layers: > 0 overrides the preset's number of blocks L
  /// --ctx: > 0 overrides the preset's context length, the T every sequence is trained at (and
  /// wpe's rows): long sequences on a tiny model (--model tiny --ctx 2048).
  int ctx = 0;
  /// --heads: > 0 overrides the preset's number of attention heads H (must divide C): Ulysses
  /// needs p | H (--model tiny --heads 4 on 4 ranks).
  int heads = 0;
  /// --make_vocab_size_divisible_by: pad wte's rows to a multiple of this (Megatron-LM's flag;
  /// common/nn/gpt.h GPTConfig::vocab_divisible_by): 1 pads nothing. The padding is masked, so
  /// the model, its losses and its checkpoints are the unpadded one's; it lets t ranks split a
  /// vocabulary t does not divide, and aligns a GPU's logits (128 pads gpt2 to 50,304).
  int vocab_divisible_by = 1;
  // Mixture of experts (common/nn/moe.h; the stages that train it set StageSpec::supports_moe).
  // Each overrides the preset's value when set: -1 (or NaN) means "the preset's".
  int experts = -1;        ///< --experts: E expert MLPs per MoE block (0: a dense model)
  int top_k = -1;          ///< --top_k: k experts per token (1 ≤ k ≤ E)
  int moe_every = -1;      ///< --moe_every: every n-th block is MoE (n ≥ 1)
  double capacity_factor = std::numeric_limits<double>::quiet_NaN();  ///< --capacity_factor c > 0
  double aux_loss_coef = std::numeric_limits<double>::quiet_NaN();    ///< --aux_loss_coef α ≥ 0
  double z_loss_coef = std::numeric_limits<double>::quiet_NaN();      ///< --z_loss_coef β ≥ 0
  std::string data = kDefaultCorpusPath;  ///< --data: corpus file or folder (common/data)
  uint64_t seed = 1337;        ///< --seed: initialisation and sampling seed
  /// --lr: AdamW learning rate. 1e-3 (not GPT-2's 6e-4 or the 3e-4 "Karpathy constant"):
  /// models under ~10M parameters tolerate and profit from the larger step; nanoGPT's
  /// character-level Shakespeare config uses 1e-3 for the same reason, and the ~0.8M-parameter
  /// "mini" preset then reaches a clearly falling loss within the default 200 steps.
  double lr = 1e-3;
  /// --weight_decay: decoupled AdamW decay. 0.01 is torch.optim.AdamW's default; non-zero so
  /// every equivalence test also exercises the decay term.
  double weight_decay = 0.01;
  /// --decay_all: decay every tensor, biases and LayerNorm included (the old behaviour); by
  /// default only tensors with ≥ 2 dimensions are decayed, as GPT-2/nanoGPT do
  /// (common/optim/decay_mask.h).
  bool decay_all = false;
  /// --clip_grad c: clip the gradients by the whole model's norm, g ← g·min(1, c/(‖g‖ + 1e-6))
  /// (Megatron-LM's --clip-grad; GPT-2/3 train with 1.0); 0 (the default) = no clipping.
  /// Taken by the stages with StageSpec::supports_clip_grad (common/optim/grad_clip.h).
  double clip_grad = 0;
  int eval_every = 50;         ///< --eval_every: validation loss every this many steps; 0 = never
  int eval_batches = 4;        ///< --eval_batches: global batches averaged per validation loss
  std::string save;            ///< --save: write a safetensors checkpoint here at the end ("" = no)
  std::string load;            ///< --load: start from this safetensors checkpoint ("" = no)
  int log_every = 10;          ///< --log_every: a progress line every this many steps (no TTY)
  std::string trace;           ///< --trace: Chrome-trace JSON output path ("" = no trace)
  bool quiet = false;          ///< --quiet: no progress bar or info lines, only warnings/errors
  /// --timeout: seconds a rank may wait in one collective, send or receive before the watchdog
  /// ends the job (one line naming rank, operation and peer; exit 124); 0 = off. Generous by
  /// default (as PyTorch's 10-minute process-group timeout): a step never waits this long.
  double timeout = 600;
  /// --oversubscribe: allow more than kMaxRanksPerCore ranks per CPU core (refused otherwise).
  bool oversubscribe = false;

  /// --device: cpu (the default), or cuda: the model's states, activations and math on the GPU
  /// (GPT::with_device, kernels/ops/kernel_ops.h) for the stages with StageSpec::supports_device.
  std::string device = "cpu";
  /// --backend (with --device cuda): auto, mpi or nccl; what carries device tensors between
  /// ranks (common/comm/backend.h).
  std::string backend = "auto";
  /// --tf32 (with --device cuda): fp32 matrix products on TF32 tensor cores (KernelOps::set_tf32);
  /// off by default, so a GPU run matches the CPU within fp32 rounding.
  bool tf32 = false;

  // Mixed precision (common/tensor/precision.h; the stages that take it set
  // StageSpec::supports_precision). Loss-scaler flags follow Megatron-LM's and DeepSpeed's.
  std::string precision = "fp32";  ///< --precision: fp32, bf16 or fp16
  /// --loss_scale: fp16's static loss scale S > 0; 0 (the default) = dynamic scaling
  /// (DeepSpeed's "loss_scale: 0"). --loss_scale 1 is fp16 without scaling.
  double loss_scale = 0;
  double initial_loss_scale = 65536;  ///< --initial_loss_scale: dynamic S at step 1 (2^16)
  int loss_scale_window = 1000;       ///< --loss_scale_window: clean steps before S doubles
  double min_loss_scale = 1;          ///< --min_loss_scale: S never backs off below this

  // Activation recomputation (common/nn/recompute.h), in the shared walk: every stage takes it.
  /// --recompute: none, full (keep only block inputs, run each block's forward again before its
  /// backward) or selective (recompute attention's softmax probabilities only).
  std::string recompute = "none";
  /// --attention: materialized (P kept) or flash (online softmax, lse kept;
  /// common/nn/flash_attention.h), in the shared walk.
  std::string attention = "materialized";
  /// --recompute_every: with full, keep the input of every k-th block only (1: every block).
  int recompute_every = 1;
  /// --partition_activations: ZeRO-R's Pa (DeepSpeed's name): with --recompute full on a
  /// tensor-parallel stage, each kept block input split over the group, all-gathered before use.
  bool partition_activations = false;
  /// --cpu_checkpointing: ZeRO-R's Pa+cpu (DeepSpeed's cpu_checkpointing): with --recompute full
  /// and --device cuda, each checkpointed block input (its 1/t part with --partition_activations)
  /// waits in host memory between its forward and its recomputation (GPTConfig::cpu_checkpoints).
  bool cpu_checkpointing = false;

  // ZeRO-R memory defragmentation (common/tensor/arena.h).
  /// --arena_bytes: > 0 carves every tensor of a rank out of one fixed block of this many bytes
  /// (first fit, as a device allocator does; a request no free block fits ends the run with
  /// "out of memory in the arena: ..."); 0 (the default) = the plain host allocator.
  int64_t arena_bytes = 0;
  /// --defrag: the arena keeps long-lived tensors (model states, activation checkpoints) in a
  /// region of their own, grown from its top, apart from short-lived ones. Needs --arena_bytes.
  bool defrag = false;
};

/// The smallest --arena_bytes accepted (64 KiB): below it not even the tiny preset's parameters fit.
inline constexpr int64_t kMinArenaBytes = int64_t{64} << 10;

/// More ranks than this many per core (std::thread::hardware_concurrency, or the CPUs this
/// process may run on) are refused unless --oversubscribe; more ranks than cores only warn.
inline constexpr int kMaxRanksPerCore = 4;

/// The model presets the trainers understand: {"tiny", "mini", "gpt2"}. Kept here (and checked
/// against GPTConfig::preset by common/nn's tests) so flags do not depend on the model library.
const std::vector<std::string>& known_presets();

/// True when `name` is one of known_presets().
bool is_known_preset(const std::string& name);

/// Adds the shared flags (the fields of TrainConfig, same names with "--") to `app`, each bound
/// to the field of `cfg` and showing its current value as the default in --help. `cfg` must
/// outlive the parse.
void add_train_flags(CLI::App& app, TrainConfig& cfg);

/// Parses argv into the options bound on `app`. --help (-h): prints the help to stdout and
/// exits 0. Any parse error (unknown flag, bad value, missing argument): prints exactly one line
/// "error: <CLI11's message naming the flag and value>" to stderr and exits 2. With MPI up,
/// only the lowest rank prints and every rank leaves (see all_ranks_ok in check.h).
void parse_flags_or_exit(CLI::App& app, int argc, char** argv);

/// The first thing wrong with `cfg`, as one line without the "error: " prefix, or "" if it is
/// fine. Checks: world_size ≥ 1, dp_size divides global_batch ("global batch 30 is not
/// divisible by data-parallel size 4"), steps ≥ 0, lr > 0 and finite, weight_decay ≥ 0,
/// clip_grad ≥ 0 and finite,
/// eval_every ≥ 0, eval_batches ≥ 1, log_every ≥ 1, timeout ≥ 0 and finite, model is a known
/// preset, data and (if set) load exist, precision is fp32/bf16/fp16, the loss-scale flags are
/// positive (loss_scale ≥ 0) and set only with fp16 ("--loss_scale 128 applies to --precision
/// fp16 only (bf16 keeps fp32's exponent range)"), recompute is none/full/selective,
/// recompute_every ≥ 1 and > 1 only with full, partition_activations and cpu_checkpointing
/// only with full (cpu_checkpointing also only with --device cuda),
/// arena_bytes is 0 or ≥ kMinArenaBytes and --defrag comes with it.
/// `dp_size` is the data-parallel size; ≤ 0 means world_size.
std::string validation_error(const TrainConfig& cfg, int dp_size = 0);

/// Exits with "error: <validation_error>" and status 2 when cfg is invalid, else returns.
/// Collective when MPI is initialised (every rank must call it; one prints): all_ranks_ok.
void validate(const TrainConfig& cfg, int dp_size = 0);

}  // namespace llmp
