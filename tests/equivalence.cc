#include "tests/equivalence.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "common/data/corpus.h"
#include "common/data/sampler.h"
#include "common/testing/max_or_nan.h"
#include "stages/baseline/baseline.h"

namespace llmp {

namespace {
// max_i |a_i - b_i| and max_i |b_i| of one range: a relative difference is their ratio, and the
// ratio over several ranges is max(diff) / max(scale) of theirs.
struct Diff {
  double diff = 0, scale = 0;
  double rel() const { return scale == 0 ? diff : diff / scale; }
};

Diff diff_of(const float* a, const float* b, int64_t n) {
  Diff d;
  for (int64_t i = 0; i < n; ++i) {
    // A NaN on either side stays NaN (max_or_nan.h): a diverged stage never reads as a match.
    d.diff = testing::max_or_nan(d.diff, std::fabs(static_cast<double>(a[i]) - b[i]));
    d.scale = testing::max_or_nan(d.scale, std::fabs(static_cast<double>(b[i])));
  }
  return d;
}
}  // namespace

double max_rel_diff(const float* a, const float* b, int64_t n) { return diff_of(a, b, n).rel(); }

GPTConfig equivalence_model(const EquivalenceConfig& cfg) {
  GPTConfig m = GPTConfig::preset(cfg.preset);
  if (cfg.vocab > 0) m.vocab = cfg.vocab;
  if (cfg.layers > 0) m.layers = cfg.layers;
  if (cfg.heads > 0) m.heads = cfg.heads;
  if (cfg.channels > 0) m.d = cfg.channels;
  if (cfg.ctx > 0) m.ctx = cfg.ctx;
  return m;
}

EquivalenceConfig non_default_hyperparameters(EquivalenceConfig cfg) {
  cfg.opt.lr = 3e-3f;
  cfg.opt.weight_decay = 0.1f;
  return cfg;
}

EquivalenceConfig padded_model(EquivalenceConfig cfg) {
  cfg.channels = 35;
  cfg.heads = 5;
  cfg.vocab = 267;
  return cfg;
}

EquivalenceResult run_against_baseline(const StrategyFactory& make, ProcessGroup& group,
                                       const EquivalenceConfig& cfg) {
  // Mixed precision: the model stores its activations in the precision's 16-bit dtype, and the
  // stage's factory must pass cfg.mp to the stage as the baseline gets it here.
  const GPT model(equivalence_model(cfg), TpComm::none(), storage_dtype(cfg.mp.precision));
  const Corpus corpus = Corpus::load(cfg.data, cfg.T);
  const int B = cfg.global_batch, T = cfg.T;
  const bool print = group.rank() == 0;
  EquivalenceResult res;

  // 1. The reference: the whole global batch on this rank alone.
  BaselineStrategy base(model, cfg.opt, cfg.seed, cfg.mp);
  std::vector<int32_t> tokens(B * T), targets(B * T);
  for (int s = 1; s <= cfg.steps; ++s) {
    sample(corpus.train(), cfg.seed, s, 0, B, T, tokens.data(), targets.data());
    res.baseline_losses.push_back(base.train_step(tokens.data(), targets.data(), B, T, s));
  }

  // 2. The stage under test, each rank on its slice of the same batches.
  std::unique_ptr<Strategy> stage = make(model, cfg.opt, cfg.seed);
  const BatchSlice slice = stage->batch_slice(B);
  std::vector<int32_t> ltok(slice.num_seqs * T), ltgt(slice.num_seqs * T);
  for (int s = 1; s <= cfg.steps; ++s) {
    sample(corpus.train(), cfg.seed, s, slice.first_seq, slice.num_seqs, T, ltok.data(),
           ltgt.data());
    res.losses.push_back(stage->train_step(ltok.data(), ltgt.data(), B, T, s));
    const double rel = std::fabs(res.losses.back() - res.baseline_losses[s - 1]) /
                       std::fabs(res.baseline_losses[s - 1]);
    res.max_loss_rel = testing::max_or_nan(res.max_loss_rel, rel);
    if (print)
      std::printf("step %2d  baseline loss %.6f  stage loss %.6f  rel diff %.2e\n", s,
                  res.baseline_losses[s - 1], res.losses.back(), rel);
  }

  // 3. Final parameters: the model-wide relative difference, and tensor by tensor.
  const int64_t psi = model.layout().num_params();
  std::vector<float> params(psi), m(psi), v(psi), base_params(psi);
  stage->get_state(params.data(), m.data(), v.data());  // fp32 (mixed: the master weights)
  {
    std::vector<float> bm(psi), bv(psi);
    base.get_state(base_params.data(), bm.data(), bv.data());
  }
  Diff all{-1, 0};  // over every tensor: the tensors cover the Ψ parameters
  for (const ParamSpec& p : model.layout().params()) {
    const Diff d = diff_of(params.data() + p.offset, base_params.data() + p.offset, p.numel);
    // A NaN wins, and the first tensor holding one is named.
    if (!std::isnan(all.diff) && !(d.diff <= all.diff)) all.diff = d.diff, res.worst_param = p.name;
    all.scale = testing::max_or_nan(all.scale, d.scale);
    if (!std::isnan(res.max_tensor_rel) && !(d.rel() < res.max_tensor_rel))
      res.max_tensor_rel = d.rel(), res.worst_tensor = p.name;
  }
  res.max_param_rel = all.rel();
  if (print)
    std::printf("ranks %d: largest relative difference: losses %.3e, parameters %.3e (largest "
                "|diff| in %s); worst single tensor %.3e (%s)\n",
                group.size(), res.max_loss_rel, res.max_param_rel, res.worst_param.c_str(),
                res.max_tensor_rel, res.worst_tensor.c_str());
  std::fflush(stdout);
  return res;
}

}  // namespace llmp
