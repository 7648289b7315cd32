// safety_probe: a stage whose factory throws on one rank, for tests/safety_test.sh. train_main
// must turn the exception into the one line "error: rank R: <what>" and end every rank with
// exit status 1, not MPICH's "BAD TERMINATION" banner (status 6 from SIGABRT), and the other
// ranks, waiting in a barrier, must not hang.
//   --throw_rank R        the rank that throws (default 1)
//   --throw_in make       throws from the factory (caught by train_main's catch)
//   --throw_in thread     throws from a std::thread (std::terminate: the terminate handler)
//   --throw_in stall      throws nothing: the rank stops itself (SIGSTOP) while the others wait
//                         in all_ranks_ok, a world-wide agreement outside every ProcessGroup;
//                         the watchdog (--timeout) must end the job with exit status 124
//
// Glossary: R world rank.
#include <signal.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <thread>

#include "common/runtime/check.h"
#include "common/runtime/options.h"
#include "common/train/train_main.h"

int main(int argc, char** argv) {
  int throw_rank = 1;
  std::string throw_in = "make";
  llmp::StageSpec spec;
  spec.name = "safety_probe";
  spec.summary = "throws on one rank (a test probe)";
  spec.default_world_size = 2;
  spec.add_flags = [&](CLI::App& app) {
    llmp::add_option_no_default(app, "--throw_rank", throw_rank, "the rank that throws");
    llmp::add_option_no_default(app, "--throw_in", throw_in, "make, thread or stall");
  };
  spec.make = [&](const llmp::StageContext& ctx) -> std::unique_ptr<llmp::Strategy> {
    if (throw_in == "stall") {
      if (ctx.world.rank() == throw_rank) raise(SIGSTOP);
      llmp::all_ranks_ok(true, "unused");  // never completes while throw_rank is stopped
      throw std::logic_error("safety_probe: all_ranks_ok returned");
    }
    if (ctx.world.rank() == throw_rank) {
      const std::string what =
          "safety_probe: thrown on purpose on rank " + std::to_string(throw_rank);
      if (throw_in == "thread") std::thread([what] { throw std::runtime_error(what); }).join();
      throw std::runtime_error(what);
    }
    ctx.world.barrier();  // never completes: the throwing rank must end the job
    throw std::logic_error("safety_probe: the barrier returned");
  };
  return llmp::train_main(argc, argv, spec);
}
