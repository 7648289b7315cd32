// The dense-vs-MoE table's training runs, measurements and closed form (table.h).
//
// Both models follow the shared trainer's loop exactly (common/train/train_main.cc): step s
// (1-based) reads global batch s of the training split, validation reads batches 0..K-1 of the
// validation split, all from one seed; so two rows differ only in their model.
//
// Glossary as in table.h: B sequences per step, T sequence length, K validation batches.
#include "stages/moe/table.h"

#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <time.h>
#include <vector>

#include "common/data/sampler.h"
#include "common/nn/moe_routing.h"
#include "common/optim/adamw.h"
#include "common/runtime/clock.h"
#include "common/train/moe_report.h"
#include "common/train/single_rank.h"
#include "kernels/cpu/flops.h"

namespace llmp {

namespace {

constexpr uint64_t kFnvBasis = 1469598103934665603ull, kFnvPrime = 1099511628211ull;

/// FNV-1a over `bytes` bytes, continuing from `h`.
uint64_t fnv1a(const void* data, size_t bytes, uint64_t h) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < bytes; ++i) h = (h ^ p[i]) * kFnvPrime;
  return h;
}

/// Seconds of CPU time this process has run, all threads (the kernels run on one: Eigen is
/// built with EIGEN_DONT_PARALLELIZE).
double cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

std::string str(int64_t v) { return std::to_string(v); }

/// 5179392 -> "5,179,392"; a fraction keeps one decimal.
std::string grouped(double v) {
  char buf[64];
  const double whole = std::floor(v);
  std::snprintf(buf, sizeof buf, "%.0f", whole);
  std::string s = buf, out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i > 0 && (s.size() - i) % 3 == 0) out += ',';
    out += s[i];
  }
  if (v != whole) {
    std::snprintf(buf, sizeof buf, "%.1f", v - whole);
    out += buf + 1;  // ".x"
  }
  return out;
}

}  // namespace

int64_t training_step_flops(const GPTConfig& c, int B) {
  if (B < 1) throw std::invalid_argument("training_step_flops: batch B=" + str(B) + " must be >= 1");
  const int64_t V = c.vocab, T = c.ctx, C = c.d, L = c.layers, Lm = c.moe_blocks(), Ld = L - Lm;
  const int64_t n = int64_t{B} * T;  // tokens per step
  // Embedding-tied head (V,C), the dense blocks' 12C² and the MoE blocks' attention 4C²: forward
  // 2·n·Ψ_mm, input gradient 2·n·Ψ_mm, weight gradient 2·n·Ψ_mm.
  int64_t f = 6 * n * (V * C + 12 * C * C * Ld + 4 * C * C * Lm);
  // Attention per sequence and block: fwd Q Kᵀ 2T²·hs·H + P V T(T+1)·hs·H; bwd dY Vᵀ 2T²·C and
  // three triangles 3T(T+1)·C; together 4·C·T·(2T+1), i.e. 4·C·(2T+1) per token.
  f += 4 * n * L * C * (2 * T + 1);
  if (Lm > 0) {
    const int64_t E = c.experts;
    const int64_t cap = expert_capacity(c.top_k, c.ctx, c.capacity_factor, c.experts);
    f += 6 * n * C * E * Lm;                    // router (n,C) @ (C,E), 3 passes
    f += 6 * n * c.top_k * C * Lm;  // combine per token: gates (1,k) @ Yg (k,C), fwd, dgate, dYg
    f += 48 * C * C * Lm * E * int64_t{B} * cap;  // every slot of (E,B,cap,C): C->4C->C, 3 passes
  }
  return f;
}

ModelRow measure_model(const GPTConfig& c, const TableRun& run) {
  if (run.steps < 1 || run.global_batch < 1 || run.eval_batches < 1 || run.eval_every < 0)
    throw std::invalid_argument("dense-vs-MoE table: steps " + str(run.steps) + ", global batch " +
                                str(run.global_batch) + ", eval batches " +
                                str(run.eval_batches) + " must be >= 1 and eval_every " +
                                str(run.eval_every) + " >= 0");
  const GPT model(c);
  const int T = c.ctx, B = run.global_batch;
  const Corpus corpus = Corpus::load(run.data, T);
  AdamWConfig opt;
  opt.lr = static_cast<float>(run.lr);
  opt.weight_decay = static_cast<float>(run.weight_decay);
  opt.decay = DecayRule::kMatrices;
  SingleRankStrategy s(model, opt, run.seed);

  ModelRow r;
  r.model = c.name;
  r.params = model.layout().num_params();
  r.tokens = int64_t{B} * T;
  r.steps = run.steps;
  r.init_digest = fnv1a(s.params(), model.layout().unit_numel(0) * sizeof(float), kFnvBasis);
  r.data_digest = kFnvBasis;
  std::vector<int32_t> tok(r.tokens), tgt(r.tokens);
  const size_t batch_bytes = tok.size() * sizeof(int32_t);

  // The mean of eval_loss over validation batches 0..K-1 (train_main's validation_loss).
  auto validation = [&] {
    double sum = 0;
    for (int k = 0; k < run.eval_batches; ++k) {
      sample(corpus.val(), run.seed, k, 0, B, T, tok.data(), tgt.data());
      r.data_digest = fnv1a(tgt.data(), batch_bytes, fnv1a(tok.data(), batch_bytes, r.data_digest));
      sum += s.eval_loss(tok.data(), tgt.data(), B, T);
    }
    return sum / run.eval_batches;
  };

  double timed = 0, timed_cpu = 0;
  for (int64_t step = 1; step <= run.steps; ++step) {
    sample(corpus.train(), run.seed, step, 0, B, T, tok.data(), tgt.data());
    r.data_digest = fnv1a(tgt.data(), batch_bytes, fnv1a(tok.data(), batch_bytes, r.data_digest));
    const int64_t f0 = cpu::flops_done();
    const double t0 = wall_seconds(), c0 = cpu_seconds();
    r.train_loss = s.train_step(tok.data(), tgt.data(), B, T, step);
    const double dt = wall_seconds() - t0, dc = cpu_seconds() - c0;
    r.flops_measured += cpu::flops_done() - f0;  // this step's products, every one of them
    if (step > 1 || run.steps == 1) timed += dt, timed_cpu += dc;
    if (run.eval_every > 0 && step % run.eval_every == 0 && step != run.steps)
      r.val_curve.push_back({step, validation()});
    if (run.progress && (step % 50 == 0 || step == run.steps))
      std::fprintf(stderr, "%s: step %lld/%lld | train loss %.4f\n", c.name.c_str(),
                   static_cast<long long>(step), static_cast<long long>(run.steps), r.train_loss);
  }
  r.val_loss = validation();
  r.val_curve.push_back({run.steps, r.val_loss});
  const int64_t timed_steps = run.steps > 1 ? run.steps - 1 : 1;
  r.tokens_per_s = double(timed_steps) * double(r.tokens) / timed;
  r.tokens_per_cpu_s = double(timed_steps) * double(r.tokens) / timed_cpu;
  r.flops_formula = training_step_flops(c, B) * run.steps;
  if (c.experts > 0) r.routing = routing_summary(s.last_routing(), c, T);
  return r;
}

std::vector<ModelRow> dense_vs_moe(const GPTConfig& dense, const GPTConfig& moe,
                                   const TableRun& run) {
  if (dense.experts != 0 || moe.experts == 0 || dense.vocab != moe.vocab ||
      dense.ctx != moe.ctx || dense.d != moe.d || dense.heads != moe.heads ||
      dense.layers != moe.layers)
    throw std::invalid_argument(
        "not a dense/MoE pair: " + dense.name + " (E=" + str(dense.experts) + " V=" +
        str(dense.vocab) + " T=" + str(dense.ctx) + " C=" + str(dense.d) + " H=" +
        str(dense.heads) + " L=" + str(dense.layers) + ") vs " + moe.name + " (E=" +
        str(moe.experts) + " V=" + str(moe.vocab) + " T=" + str(moe.ctx) + " C=" + str(moe.d) +
        " H=" + str(moe.heads) + " L=" + str(moe.layers) + "): the first needs E=0, the second "
        "E>0, and the same V, T, C, H, L");
  return {measure_model(dense, run), measure_model(moe, run)};
}

std::string table_markdown(const std::vector<ModelRow>& rows, const TableRun& run) {
  if (rows.empty()) return "";
  const ModelRow& d = rows.front();
  std::string out;
  char line[512];
  std::snprintf(line, sizeof line,
                "One rank each (the baseline's trainer, SingleRankStrategy, fp32), the same data "
                "and seed %llu: %lld steps of B = %d sequences × T = %lld tokens, AdamW lr %g, "
                "weight decay %g; validation loss = mean of eval_loss over the same %d validation "
                "batches.\n\n",
                static_cast<unsigned long long>(run.seed), static_cast<long long>(run.steps),
                run.global_batch, static_cast<long long>(d.tokens / run.global_batch), run.lr,
                run.weight_decay, run.eval_batches);
  out += line;
  out += "| model | parameters Ψ | FLOPs/token, measured | FLOPs/token, closed form | "
         "FLOPs/token × dense | tokens/s (wall) | tokens per CPU-second | train loss (last step) | "
         "validation loss |\n|---|---|---|---|---|---|---|---|---|\n";
  for (const ModelRow& r : rows) {
    std::snprintf(line, sizeof line, "| %s | %s | %s | %s | %.4f | %.0f | %.0f | %.4f | %.4f |\n",
                  r.model.c_str(), grouped(double(r.params)).c_str(),
                  grouped(r.flops_per_token()).c_str(), grouped(r.formula_per_token()).c_str(),
                  r.flops_per_token() / d.flops_per_token(), r.tokens_per_s, r.tokens_per_cpu_s,
                  r.train_loss,
                  r.val_loss);
    out += line;
  }
  out += "\nValidation loss by step:\n\n| step |";
  for (const ModelRow& r : rows) out += " " + r.model + " |";
  out += "\n|---|";
  for (size_t i = 0; i < rows.size(); ++i) out += "---|";
  out += "\n";
  for (size_t j = 0; j < d.val_curve.size(); ++j) {
    out += "| " + str(d.val_curve[j].first) + " |";
    for (const ModelRow& r : rows) {
      std::snprintf(line, sizeof line, " %.4f |", j < r.val_curve.size() ? r.val_curve[j].second
                                                                          : NAN);
      out += line;
    }
    out += "\n";
  }
  for (const ModelRow& r : rows)
    if (!r.routing.empty()) out += "\n" + r.model + " " + r.routing + "\n";
  return out;
}

}  // namespace llmp
