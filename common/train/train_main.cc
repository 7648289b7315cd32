// The shared training program (see train_main.h for what a stage supplies).
#include "common/train/train_main.h"

#include <CLI/CLI.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <vector>

#include "common/data/corpus.h"
#include "common/data/sampler.h"
#include "common/runtime/check.h"
#include "common/runtime/launch.h"
#include "common/runtime/log.h"
#include "common/runtime/progress.h"
#include "common/train/checkpoint_io.h"
#include "common/train/report.h"

namespace llmp {
namespace {

double now_s() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

/// Mean validation loss over `batches` fixed global batches (the same batches at every eval).
double validation_loss(Strategy& s, const Corpus& corpus, const TrainConfig& cfg, int T) {
  const int B = cfg.global_batch;
  const BatchSlice slice = s.batch_slice(B);
  std::vector<int32_t> tok(slice.num_seqs * T), tgt(slice.num_seqs * T);
  double sum = 0;
  for (int k = 0; k < cfg.eval_batches; ++k) {
    sample(corpus.val(), cfg.seed, k, slice.first_seq, slice.num_seqs, T, tok.data(), tgt.data());
    sum += s.eval_loss(tok.data(), tgt.data(), B, T);
  }
  return sum / cfg.eval_batches;
}

/// Everything that can be checked before any rank starts: one clear line, exit 2.
void validate_before_launch(const TrainConfig& cfg, const StageSpec& spec) {
  if (cfg.world_size >= 1) {  // else validate() names the world size itself
    const std::string err = grid_mismatch(spec.grid(cfg), cfg.world_size);
    if (!err.empty()) user_error(err);
  }
  validate(cfg, spec.grid(cfg).dp);
  if (!cfg.trace.empty() && !spec.supports_trace)
    user_error("--trace " + cfg.trace + ": " + spec.name +
               " does not write traces (the pipeline stages do)");
  if (spec.validate) spec.validate(cfg);
  GPTConfig mc;
  try {
    mc = model_config(cfg);
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
}

}  // namespace

GridShape data_parallel_grid(const TrainConfig& cfg) { return {cfg.world_size, 1, 1}; }

GPTConfig model_config(const TrainConfig& cfg) {
  GPTConfig mc = GPTConfig::preset(cfg.model);
  if (cfg.layers > 0 && cfg.layers != mc.layers) {
    mc.layers = cfg.layers;
    mc.name += "-L" + std::to_string(cfg.layers);
  }
  return mc;
}

int train_main(int argc, char** argv, const StageSpec& spec) {
  TrainConfig cfg;
  cfg.world_size = spec.default_world_size;
  cfg.layers = spec.default_layers;
  CLI::App app{spec.name + ": " + spec.summary, "train"};
  add_train_flags(app, cfg);
  if (spec.add_flags) spec.add_flags(app);
  parse_flags_or_exit(app, argc, argv);

  // Under mpiexec every rank re-parses the same argv; only the launching process validates,
  // then replaces itself with `mpiexec -n world_size` of the same command (launch.h).
  if (!started_by_mpiexec()) validate_before_launch(cfg, spec);
  launch_or_init(argc, argv, cfg.world_size);

  set_log_quiet(cfg.quiet);
  auto world = ProcessGroup::world();
  // Collective; a shape that does not fit ends every rank with one line (all_ranks_ok, exit 2).
  auto grid = std::make_unique<ProcessGrid>(world, spec.grid(cfg));

  const GPT model(model_config(cfg));
  const int T = model.config().ctx, B = cfg.global_batch;
  Corpus corpus;
  std::string err;
  try {
    corpus = Corpus::load(cfg.data, T);
  } catch (const std::exception& e) {
    err = e.what();
  }
  all_ranks_ok(err.empty(), err);

  AdamWConfig opt;
  opt.lr = static_cast<float>(cfg.lr);
  opt.weight_decay = static_cast<float>(cfg.weight_decay);
  opt.decay = cfg.decay_all ? DecayRule::kAll : DecayRule::kMatrices;
  std::unique_ptr<Strategy> strategy = spec.make(StageContext{model, *world, *grid, cfg, opt});

  int64_t step = 0;
  if (!cfg.load.empty()) {
    try {
      step = load_into(cfg.load, model, *strategy);
    } catch (const std::exception& e) {
      err = e.what();
    }
    all_ranks_ok(err.empty(), err);
  }

  const int64_t psi = model.layout().num_params();
  log_info("{}: {} ranks | model {} (Ψ = {} parameters, L={} C={} H={} T={}) | global batch {} × {} "
           "tokens",
           spec.name, world->size(), model.config().name, psi, model.config().layers, model.config().d,
           model.config().heads, T, B, T);
  log_info("data: {} ({} files, {} train / {} validation bytes){}", corpus.path(),
           corpus.files().size(), corpus.train().size(), corpus.val().size(),
           step ? " | resumed at step " + std::to_string(step) : "");

  const BatchSlice slice = strategy->batch_slice(B);
  std::vector<int32_t> tok(slice.num_seqs * T), tgt(slice.num_seqs * T);
  Progress progress(step + cfg.steps, static_cast<int64_t>(B) * T, cfg.log_every,
                    Progress::Mode::kAuto, stdout, step);
  double loss = NAN, val = NAN, t_first = 0;
  const int64_t first = step + 1, last = step + cfg.steps;
  const double t_start = now_s();
  for (int64_t s = first; s <= last; ++s) {
    sample(corpus.train(), cfg.seed, s, slice.first_seq, slice.num_seqs, T, tok.data(), tgt.data());
    loss = strategy->train_step(tok.data(), tgt.data(), B, T, s);
    if (s == first) t_first = now_s();
    progress.update(s, loss);
    if (cfg.eval_every > 0 && (s % cfg.eval_every == 0 || s == last)) {
      val = validation_loss(*strategy, corpus, cfg, T);
      progress.print(fmt::format("step {} | train loss {:.4f} | val loss {:.4f}", s, loss, val));
    }
  }
  const double t_end = now_s();
  progress.finish();

  // Throughput over the steps after the first (which pays for first-touch page faults and
  // warm-up); a one-step run times its only step.
  const bool skip_first = cfg.steps > 1;
  const int64_t timed = skip_first ? cfg.steps - 1 : cfg.steps;
  const double elapsed = t_end - (skip_first ? t_first : t_start);
  if (cfg.steps > 0)
    log_info("done: {} steps | train loss {:.4f} | val loss {} | {:.0f} tokens/s | {:.1f} ms/step",
             cfg.steps, loss, std::isnan(val) ? std::string("-") : fmt::format("{:.4f}", val),
             timed * double(B) * T / elapsed, 1e3 * elapsed / timed);

  if (!cfg.save.empty()) {
    try {
      save_from(cfg.save, model, *strategy, opt, last, spec.name, world->rank() == 0);
    } catch (const std::exception& e) {
      err = e.what();
    }
    all_ranks_ok(err.empty(), err);
    log_info("saved {} (step {})", cfg.save, last);
  }

  if (cfg.steps > 0) {
    print_report(*world, spec.name, psi, strategy->report());
    strategy->finish();  // the stage's end-of-run lines and files (Strategy::finish)
  }
  strategy.reset();  // its groups and buffers go before MPI does
  grid.reset();
  world.reset();
  shutdown();
  return 0;
}

}  // namespace llmp
