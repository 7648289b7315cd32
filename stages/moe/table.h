// The dense-vs-MoE table (table_main.cc): a mixture-of-experts model next to the dense model of
// equal per-token compute, both trained on ONE rank by the baseline's trainer
// (SingleRankStrategy) on the same data, from the same seed, for the same steps, then measured:
// parameters, FLOPs per token (the kernels' counter, kernels/cpu/flops.h, over every training
// step, divided by the tokens), tokens/s, validation loss (Strategy::eval_loss over the same
// validation batches) and the MoE's routing (moe_report.h).
//
// moe-mini is mini with blocks 1 and 3 turned into E = 8 experts, top-1 (Switch Transformer,
// Fedus et al. 2021, §2; GLaM, Du et al. 2022, for "every other block"): each token still goes
// through ONE 4C-wide MLP per block, so mini is the dense model of equal per-token compute, but
// for the router and the capacity padding, which the closed form below counts.
//
// FLOPs of one training step (forward + backward), the kernels' convention (2 per multiply-add,
// every matmul of the walk: forward, input gradient and weight gradient; attention's Q Kᵀ on the
// full square, P V on the triangle; element-wise work not counted):
//
//   per token, dense parts    6·(V·C + 12C²·L_d + 4C²·L_m)     the matmul weights Ψ_mm, 3 passes
//   per token, attention      4·L·C·(2T + 1)                   fwd C·(2T²+T(T+1)), bwd C·(2T²+3T(T+1))
//   per token, router         6·C·E·L_m                        (n,C) @ (C,E), 3 passes
//   per token, combine        6·k·C·L_m                        gates (1,k) @ Yg (k,C): forward,
//                                                             dgate and dYg (common/nn/moe.h)
//   per step,  experts        48·C²·L_m·E·B·cap                every slot of the (E,B,cap,C) buffer
//                                                             through C -> 4C -> C, 3 passes
//   cap = ⌈k·T·c/E⌉; per token the experts cost 48·C²·L_m·E·cap/T ≈ c·k·48·C²·L_m: the
//   capacity padding (E·cap − k·T slots per sequence of zero rows) is multiplied like a token.
//
// Glossary: B sequences per step, T sequence length, V vocabulary, C channels, L blocks, L_m MoE
// blocks, L_d = L − L_m dense blocks, E experts, k experts per token, c capacity factor, cap slots
// per expert per sequence, Ψ parameters, Ψ_mm parameters multiplied by matmuls.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/data/corpus.h"
#include "common/nn/gpt.h"

namespace llmp {

/// How both models are trained and evaluated (the defaults of the shared trainer's flags).
struct TableRun {
  int64_t steps = 300;      ///< optimizer steps, 1-based as train_main counts them
  int global_batch = 8;     ///< B sequences per step
  std::string data = kDefaultCorpusPath;
  uint64_t seed = 1337;     ///< initialisation and sampling
  int eval_batches = 4;     ///< validation batches (the same for both) averaged per loss
  int eval_every = 100;     ///< also a validation loss every this many steps (0: at the end only)
  double lr = 1e-3, weight_decay = 0.01;
  bool progress = false;    ///< a line on stderr every 50 steps
};

/// One trained model, measured.
struct ModelRow {
  std::string model;           ///< the config's name
  int64_t params = 0;          ///< Ψ (the layout's count)
  int64_t tokens = 0;          ///< B·T per step
  int64_t flops_measured = 0;  ///< the counter over all training steps (flops.h)
  int64_t flops_formula = 0;   ///< training_step_flops × steps
  int64_t steps = 0;
  double tokens_per_s = 0;     ///< over the steps after the first (the first warms up), wall clock
  /// The same tokens over the process's CPU time in those steps: what the run costs when other
  /// work shares the cores (the wall clock then counts the time the process waited too).
  double tokens_per_cpu_s = 0;
  double train_loss = 0;       ///< the last step's mean cross-entropy (nats/token)
  double val_loss = 0;         ///< after the last step, mean over the validation batches
  std::vector<std::pair<int64_t, double>> val_curve;  ///< (step, validation loss)
  uint64_t data_digest = 0;    ///< FNV-1a of every token and target read (training, validation)
  uint64_t init_digest = 0;    ///< FNV-1a of the embeddings (wte, wpe) at initialisation
  std::string routing;         ///< the last step's routing line; "" for a dense model

  double flops_per_token() const { return double(flops_measured) / double(steps * tokens); }
  double formula_per_token() const { return double(flops_formula) / double(steps * tokens); }
};

/// The closed form above: FLOPs of one training step of B sequences of the config's T.
/// Throws std::invalid_argument naming B when B < 1.
int64_t training_step_flops(const GPTConfig& c, int B);

/// Trains `c` on one rank (SingleRankStrategy, fp32, AdamW) for run.steps steps and measures it.
/// Throws std::invalid_argument naming the values for steps < 1, B < 1, eval_batches < 1 or an
/// invalid config; std::runtime_error (Corpus::load's line) for a corpus that cannot be read.
ModelRow measure_model(const GPTConfig& c, const TableRun& run);

/// Both rows, dense first. Throws std::invalid_argument in one line naming the values when
/// `dense` has experts, `moe` has none, or their V, T, C, H or L differ (not a like-for-like pair).
std::vector<ModelRow> dense_vs_moe(const GPTConfig& dense, const GPTConfig& moe,
                                   const TableRun& run);

/// The table as Markdown: the rows, then the validation curve and the routing line.
std::string table_markdown(const std::vector<ModelRow>& rows, const TableRun& run);

}  // namespace llmp
