// A one-rank run of PrecisionStrategy on the project's corpus for the tests: the batches and the
// validation train_main uses (sample(split, seed, step, ...), --eval_batches fixed validation
// batches), without the process around it.
//
// Glossary: B global batch (sequences), T sequence length.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/data/corpus.h"
#include "common/data/sampler.h"
#include "common/runtime/flags.h"
#include "stages/mixed_precision/precision_strategy.h"

namespace llmp {

struct PrecisionRunner {
  /// `precision`: "fp32", "bf16", "fp16"; `cfg`'s loss-scale fields apply to fp16. `device`:
  /// where the model walks (a device's kernels must be registered; the ids stay on the host).
  PrecisionRunner(const std::string& preset, int B, TrainConfig cfg,
                  Device device = Device::kCPU)
      : model(GPT(GPTConfig::preset(preset), TpComm::none(),
                  storage_dtype(parse_precision(cfg.precision)))
                  .with_device(device)),
        corpus(Corpus::load(kDefaultCorpusPath, model.config().ctx)),
        B(B),
        T(model.config().ctx),
        seed(cfg.seed),
        tok(B * T),
        tgt(B * T) {
    AdamWConfig opt;
    opt.lr = static_cast<float>(cfg.lr);
    opt.weight_decay = static_cast<float>(cfg.weight_decay);
    strategy = std::make_unique<PrecisionStrategy>(model, opt, cfg.seed,
                                                   mixed_precision_config(cfg));
  }

  /// Optimizer step t (1-based) on train batch t; the mean loss.
  double step(int64_t t) {
    sample(corpus.train(), seed, t, 0, B, T, tok.data(), tgt.data());
    return strategy->train_step(tok.data(), tgt.data(), B, T, t);
  }

  /// Mean loss over `batches` fixed validation batches (train_main's validation).
  double validation(int batches = 4) {
    double sum = 0;
    for (int k = 0; k < batches; ++k) {
      sample(corpus.val(), seed, k, 0, B, T, tok.data(), tgt.data());
      sum += strategy->eval_loss(tok.data(), tgt.data(), B, T);
    }
    return sum / batches;
  }

  MixedPrecision& mp() { return strategy->mixed_precision(); }

  const GPT model;
  const Corpus corpus;
  const int B, T;
  const uint64_t seed;
  std::vector<int32_t> tok, tgt;
  std::unique_ptr<PrecisionStrategy> strategy;
};

/// A TrainConfig with --precision `precision` and --loss_scale `loss_scale` (0: dynamic).
inline TrainConfig precision_config(const std::string& precision, double loss_scale = 0) {
  TrainConfig cfg;
  cfg.precision = precision;
  cfg.loss_scale = loss_scale;
  return cfg;
}

}  // namespace llmp
