// The shared training program (see train_main.h for what a stage supplies).
#include "common/train/train_main.h"

#include <CLI/CLI.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <vector>

#include "common/data/corpus.h"
#include "common/data/sampler.h"
#include "common/nn/moe_routing.h"
#include "common/runtime/check.h"
#include "common/tensor/memory.h"
#include "common/tensor/precision.h"
#include "common/runtime/launch.h"
#include "common/runtime/log.h"
#include "common/runtime/paths.h"
#include "common/runtime/progress.h"
#include "common/runtime/signals.h"
#include "common/train/arena_report.h"
#include "common/train/checkpoint_io.h"
#include "common/train/device_setup.h"
#include "common/train/dp_util.h"
#include "common/train/launch_checks.h"
#include "common/train/recompute_report.h"
#include "common/train/report.h"
#include "common/train/resources.h"
#include "kernels/cpu/flops.h"
#include "kernels/ops/kernel_ops.h"

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

}  // namespace

GridShape data_parallel_grid(const TrainConfig& cfg) { return {cfg.world_size, 1, 1}; }

GPTConfig model_config(const TrainConfig& cfg) {
  GPTConfig mc = GPTConfig::preset(cfg.model);
  if (cfg.layers > 0 && cfg.layers != mc.layers) {
    mc.layers = cfg.layers;
    mc.name += "-L" + std::to_string(cfg.layers);
  }
  if (cfg.ctx > 0 && cfg.ctx != mc.ctx) {  // another wpe: another model, by name too
    mc.ctx = cfg.ctx;
    mc.name += "-T" + std::to_string(cfg.ctx);
  }
  if (cfg.heads > 0 && cfg.heads != mc.heads) {  // the same tensors, another split of them
    if (mc.d % cfg.heads != 0)
      throw std::invalid_argument("--heads " + std::to_string(cfg.heads) + " does not divide C=" +
                                  std::to_string(mc.d) + " channels of '" + mc.name + "'");
    mc.heads = cfg.heads;
    mc.name += "-H" + std::to_string(cfg.heads);
  }
  // A padded vocabulary is the run's layout, not another model: the name stays (gpt.h).
  mc.vocab_divisible_by = cfg.vocab_divisible_by;
  // Mixture of experts: E and n change the tensors (so the name); k, c and α the routing only.
  if (cfg.experts >= 0 && cfg.experts != mc.experts) {
    mc.experts = cfg.experts;
    mc.name += "-E" + std::to_string(cfg.experts);
  }
  if (cfg.moe_every > 0 && cfg.moe_every != mc.moe_every && mc.experts > 0) {
    mc.moe_every = cfg.moe_every;
    mc.name += "-every" + std::to_string(cfg.moe_every);
  }
  if (cfg.top_k > 0) mc.top_k = cfg.top_k;
  if (!std::isnan(cfg.capacity_factor)) mc.capacity_factor = cfg.capacity_factor;
  if (!std::isnan(cfg.aux_loss_coef)) mc.aux_loss_coef = cfg.aux_loss_coef;
  if (!std::isnan(cfg.z_loss_coef)) mc.z_loss_coef = cfg.z_loss_coef;
  if (mc.experts > 0) {
    const std::string err = routing_error(mc.experts, mc.top_k, mc.capacity_factor);
    if (!err.empty()) throw std::invalid_argument(err);
  }
  mc.recompute = parse_recompute(cfg.recompute);  // validated: none, full or selective
  mc.recompute_every = cfg.recompute_every;
  mc.attention = parse_attention(cfg.attention);  // validated: materialized or flash
  if (mc.attention == AttentionMethod::kFlash)
    if (const std::string err = flash_attention_error(mc.ctx); !err.empty())
      throw std::invalid_argument(err);
  mc.partition_checkpoints = cfg.partition_activations;
  mc.cpu_checkpoints = cfg.cpu_checkpointing;
  return mc;
}

namespace {

int run(int argc, char** argv, const StageSpec& spec) {
  TrainConfig cfg;
  cfg.world_size = spec.default_world_size;
  cfg.layers = spec.default_layers;
  if (!spec.default_model.empty()) cfg.model = spec.default_model;
  CLI::App app{spec.name + ": " + spec.summary, "train"};
  add_train_flags(app, cfg);
  if (spec.add_flags) spec.add_flags(app);
  parse_flags_or_exit(app, argc, argv);

  // Under mpiexec every rank re-parses the same argv; only the launching process validates,
  // then replaces itself with `mpiexec -n world_size` of the same command (launch.h).
  if (!started_by_mpiexec()) validate_before_launch(cfg, spec);
  const int rank = launch_or_init(argc, argv, cfg.world_size);
  // SIGINT / SIGTERM: exit 130 / 143, one line from rank 0, a save's temporary file unlinked.
  install_signal_handlers(rank == 0);
  set_comm_timeout(cfg.timeout);  // the watchdog of every group's waits (common/comm/watchdog.h)

  set_log_quiet(cfg.quiet);
  // Again inside the ranks (mpiexec may have started them directly, skipping the launcher).
  const std::string path_err = output_paths_error(cfg);
  all_ranks_ok(path_err.empty(), path_err);
  const std::string clip_err = clip_grad_error(cfg, spec);  // never ignored, however started
  all_ranks_ok(clip_err.empty(), clip_err);
  auto world = ProcessGroup::world();

  // The memory check again on every rank, for ranks mpiexec started directly (they skipped
  // validate_before_launch), before the model is built. MPI_LOCALNRANKS: hydra's count of the
  // ranks on this machine, which share its MemAvailable.
  const GPTConfig mc = model_config(cfg);
  if (const char* here = std::getenv("MPI_LOCALNRANKS")) {
    const std::string too_big =
        memory_check_error(mc, cfg, spec.grid(cfg), spec.name, std::atoi(here));
    all_ranks_ok(too_big.empty(), too_big);
  }
  // --arena_bytes: from here on every tensor of this rank lives in one fixed block (arena.h).
  install_arena_if_asked(cfg);
  // Under --precision bf16 / fp16 the activations are stored in 16 bits (common/nn/f32_view.h);
  // the stage keeps its parameters and gradients in the same dtype.
  // --device cuda: checked again here (a run started by mpiexec directly skipped the launcher).
  if (cfg.device != "cpu")
    if (const std::string err = device_error(cfg, spec); !err.empty()) all_ranks_ok(false, err);
  const Device device = cfg.device == "cuda" ? Device::kCUDA : Device::kCPU;
  // One GPU per rank, or ranks sharing them round-robin; the world NCCL's (--backend) or MPI's.
  if (device != Device::kCPU) {
    world = setup_device(cfg, world);
    log_info("collectives of device tensors: {}", world->device() == Device::kCUDA
                                                      ? "NCCL (one GPU per rank)"
                                                      : "MPI, staged through host buffers");
  }
  // Collective; a shape that does not fit ends every rank with one line (all_ranks_ok, exit 2).
  auto grid = std::make_unique<ProcessGrid>(world, spec.grid(cfg));
  const GPT model = GPT(mc, TpComm::none(), storage_dtype(parse_precision(cfg.precision)))
                        .with_device(device);
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
  opt.clip_grad = cfg.clip_grad;  // 0 unless the stage clips (clip_grad_error above)
  std::unique_ptr<Strategy> strategy =
      spec.make(StageContext{model, *world, *grid, cfg, opt, mixed_precision_config(cfg)});

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
  // FLOPs this rank's kernels executed in the timed training steps (kernels/cpu/flops.h: both
  // devices' tables count with the same formulas): with the throughput, what MFU is made of.
  int64_t timed_flops = 0;
  RecomputeMeter last_step_meter;  // what the last step's walks kept and recomputed
  const int64_t first = step + 1, last = step + cfg.steps;
  const double t_start = now_s();
  defer_signals(true);  // SIGINT / SIGTERM end the run at the end of a step, on every rank
  for (int64_t s = first; s <= last; ++s) {
    set_step_for_signals(s);
    sample(corpus.train(), cfg.seed, s, slice.first_seq, slice.num_seqs, T, tok.data(), tgt.data());
    RecomputeMeter::instance().reset();
    const int64_t flops_before = cpu::flops_done();
    loss = strategy->train_step(tok.data(), tgt.data(), B, T, s);
    if (s != first || cfg.steps == 1) timed_flops += cpu::flops_done() - flops_before;
    last_step_meter = RecomputeMeter::instance();
    // Divergence: a NaN or infinite loss ends the run on every rank, before anything is saved
    // (a good checkpoint at --save stays). Collective, so all ranks agree even where the loss is
    // known on one rank only: all_ranks_ok reduces a flag over the world (one MPI_Allreduce of
    // an int per step, outside the stage's groups and their byte counts).
    // fp16: the loss scaler handles overflowing *gradients* inside train_step (skip the update,
    // halve the scale) instead of ending the run; a loss that is itself non-finite ends it here.
    all_ranks_ok(std::isfinite(loss),
                 fmt::format("step {}: loss is {} (diverged; try a smaller --lr)", s,
                             std::isnan(loss) ? std::string("nan") : fmt::format("{}", loss)),
                 kExitDiverged);
    if (s == first) t_first = now_s();
    progress.set_note(strategy->step_note());
    progress.update(s, loss);
    if (cfg.eval_every > 0 && (s % cfg.eval_every == 0 || s == last)) {
      val = validation_loss(*strategy, corpus, cfg, T);
      progress.print(fmt::format("step {} | train loss {:.4f} | val loss {:.4f}", s, loss, val));
    }
    stop_if_interrupted(s);  // collective: exit 130 / 143 on every rank when one was signalled
  }
  defer_signals(false);
  const double t_end = now_s();
  progress.finish();

  // Throughput over the steps after the first (which pays for first-touch page faults and
  // warm-up); a one-step run times its only step.
  const bool skip_first = cfg.steps > 1;
  const int64_t timed = skip_first ? cfg.steps - 1 : cfg.steps;
  const double elapsed = t_end - (skip_first ? t_first : t_start);
  // FLOP/token: the products every rank's kernels executed in the timed steps (kernels/cpu/
  // flops.h), summed over the world (bookkeeping, not a stage's group), per token of the global
  // batch: the model's FLOPs per token whatever the split (the baseline's figure; measured equal
  // for hybrid_3d, tensor_parallel, 1f1b and zero2 on mini), plus what recomputation runs again.
  // At world size 1 it is the MFU numerator of tools/gpu_bench.sh. Collective over the world.
  const double all_flops = MetricsReducer(*world).sum(static_cast<double>(timed_flops));
  if (cfg.steps > 0)
    log_info("done: {} steps | train loss {:.4f} | val loss {} | {:.0f} tokens/s | {:.1f} ms/step"
             " | {:.6g} FLOP/token",
             cfg.steps, loss, std::isnan(val) ? std::string("-") : fmt::format("{:.4f}", val),
             timed * double(B) * T / elapsed, 1e3 * elapsed / timed,
             all_flops / (double(timed) * B * T));

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
    std::vector<ReportRow> rows = strategy->report();
    if (!strategy->reports_recomputation())
      for (ReportRow& r : recompute_rows(model.config(), spec.grid(cfg), B, T,
                                         static_cast<int>(dtype_size(model.activation_dtype())),
                                         last_step_meter))
        rows.push_back(std::move(r));
    for (const ReportRow& row : arena_report_rows()) rows.push_back(row);
    // On a device the memory rows measure device bytes: the model states live there.
    print_report(*world, cfg.device == "cpu" ? spec.name : spec.name + " on " + cfg.device, psi,
                 rows);
    if (device != Device::kCPU && world->rank() == 0) print_device_memory(device);
    print_arena_summary(*world);  // --arena_bytes: fragmentation at peak, per rank
    strategy->finish();  // the stage's end-of-run lines and files (Strategy::finish)
  }
  strategy.reset();  // its groups and buffers go before MPI does
  grid.reset();
  world.reset();
  shutdown();
  return kExitOk;
}

}  // namespace

int train_main(int argc, char** argv, const StageSpec& spec) {
  // An exception on any rank ends the whole job with "error: rank R: <what>" and exit 1, not
  // MPICH's banner: caught here, or (thrown from a thread, a destructor or a noexcept function)
  // by the terminate handler.
  install_terminate_handler();
  try {
    return run(argc, argv, spec);
  } catch (const std::exception& e) {
    report_exception(e.what());
  } catch (...) {
    report_exception("an exception that is not a std::exception");
  }
}

}  // namespace llmp
