// parse_input and validate (see input.h).
#include "tools/plan/input.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "common/nn/gpt.h"

namespace llmp::plan {
namespace {

using nlohmann::json;

std::string num(double x) {
  std::ostringstream s;
  s << x;
  return s.str();
}

// Unknown keys are errors: a typo must not silently fall back to a default.
void only_keys(const json& j, const std::string& where, std::initializer_list<const char*> keys) {
  if (!j.is_object()) throw PlanInputError(where + " must be a JSON object");
  for (auto it = j.begin(); it != j.end(); ++it) {
    bool ok = false;
    for (const char* k : keys) ok = ok || it.key() == k;
    if (!ok) throw PlanInputError("unknown key '" + it.key() + "' in " + where);
  }
}

template <class T>
void get(const json& j, const char* key, T& out, const std::string& where) {
  if (!j.contains(key)) return;
  try {
    out = j.at(key).get<T>();
  } catch (const json::exception&) {
    throw PlanInputError(where + "." + key + " = " + j.at(key).dump() + " has the wrong type");
  }
}

void set_preset(ModelSpec& m, const std::string& name) {
  GPTConfig c;
  try {
    c = GPTConfig::preset(name);
  } catch (const std::invalid_argument& e) {
    throw PlanInputError(e.what());
  }
  if (c.experts > 0) throw PlanInputError("model preset '" + name + "' is a mixture of experts, "
                                          "which the planner does not model");
  m.name = name, m.L = c.layers, m.C = c.d, m.H = c.heads, m.V = c.vocab, m.T = c.ctx;
  m.ctx = c.ctx;
}

void read_json(std::string path, PlanInput& in) {
  // `bazel run` starts the binary in its runfiles: a relative path is the user's, from where
  // bazel was called (BUILD_WORKING_DIRECTORY).
  const char* cwd = std::getenv("BUILD_WORKING_DIRECTORY");
  if (cwd && !path.empty() && path[0] != '/') path = std::string(cwd) + "/" + path;
  std::ifstream f(path);
  if (!f) throw PlanInputError("cannot read config file '" + path + "'");
  json j;
  try {
    j = json::parse(f);
  } catch (const json::parse_error& e) {
    throw PlanInputError("config file '" + path + "' is not JSON: " + e.what());
  }
  only_keys(j, path, {"model", "batch", "cluster", "precision", "top", "max_v", "max_zero",
                      "fix", "comment"});
  if (j.contains("model")) {
    const json& m = j["model"];
    only_keys(m, "model", {"preset", "name", "L", "C", "H", "V", "T", "ctx"});
    if (m.contains("preset")) {
      std::string p;
      get(m, "preset", p, "model");
      set_preset(in.model, p);
    }
    get(m, "name", in.model.name, "model");
    get(m, "L", in.model.L, "model"), get(m, "C", in.model.C, "model");
    get(m, "H", in.model.H, "model"), get(m, "V", in.model.V, "model");
    get(m, "T", in.model.T, "model"), get(m, "ctx", in.model.ctx, "model");
  }
  get(j, "batch", in.batch, "config");
  if (j.contains("cluster")) {
    const json& c = j["cluster"];
    only_keys(c, "cluster", {"gpus_per_node", "nodes", "memory", "peak_flops", "bw_intra",
                             "bw_inter", "latency", "efficiency"});
    Cluster& k = in.cluster;
    get(c, "gpus_per_node", k.gpus_per_node, "cluster"), get(c, "nodes", k.nodes, "cluster");
    get(c, "memory", k.memory, "cluster"), get(c, "peak_flops", k.peak_flops, "cluster");
    get(c, "bw_intra", k.bw_intra, "cluster"), get(c, "bw_inter", k.bw_inter, "cluster");
    get(c, "latency", k.latency, "cluster"), get(c, "efficiency", k.efficiency, "cluster");
  }
  if (j.contains("precision")) {
    std::string p;
    get(j, "precision", p, "config");
    if (p != "mixed" && p != "fp32")
      throw PlanInputError("precision '" + p + "' (expected mixed or fp32)");
    in.options.mixed = p == "mixed";
  }
  get(j, "top", in.top, "config");
  get(j, "max_v", in.options.max_v, "config"), get(j, "max_zero", in.options.max_zero, "config");
  if (j.contains("fix")) {
    const json& x = j["fix"];
    only_keys(x, "fix", {"tp", "pp", "dp", "m", "v", "zero", "sp", "recompute"});
    SearchOptions& o = in.options;
    get(x, "tp", o.tp, "fix"), get(x, "pp", o.pp, "fix"), get(x, "dp", o.dp, "fix");
    get(x, "m", o.m, "fix"), get(x, "v", o.v, "fix"), get(x, "zero", o.zero, "fix");
    if (x.contains("sp")) {
      bool sp = false;
      get(x, "sp", sp, "fix");
      o.sp = sp;
    }
    if (x.contains("recompute")) {
      std::string r;
      get(x, "recompute", r, "fix");
      try {
        o.recompute = int(parse_recompute(r));
      } catch (const std::invalid_argument& e) {
        throw PlanInputError(e.what());
      }
    }
  }
}

}  // namespace

PlanInput parse_input(int argc, const char* const* argv) {
  PlanInput in;
  CLI::App app{"3D-parallelism planner: ranks dp × pp × tp (+ sp, ZeRO, m, v, recompute) "
               "configurations by predicted step time (tools/plan/README.md)"};
  std::string config, preset, precision, recompute;
  ModelSpec m;
  Cluster k;
  int64_t batch = 0;
  SearchOptions o;
  int top = 0, sp = -1;
  app.add_option("--config", config, "JSON config file (input.h); flags override it");
  app.add_option("--preset", preset, "model preset: tiny, mini, gpt2");
  app.add_option("--layers,-L", m.L, "L, transformer blocks");
  app.add_option("--channels,-C", m.C, "C, hidden size");
  app.add_option("--heads,-H", m.H, "H, attention heads");
  app.add_option("--vocab,-V", m.V, "V, vocabulary size");
  app.add_option("--seq,-T", m.T, "T, sequence length (tokens)");
  app.add_option("--batch,-B", batch, "B, global batch (sequences per step)");
  app.add_option("--gpus-per-node", k.gpus_per_node, "GPUs per node");
  app.add_option("--nodes", k.nodes, "nodes");
  app.add_option("--memory", k.memory, "memory per GPU (bytes)");
  app.add_option("--peak-flops", k.peak_flops, "peak FLOP/s per GPU");
  app.add_option("--bw-intra", k.bw_intra, "intra-node bandwidth per GPU (bytes/s)");
  app.add_option("--bw-inter", k.bw_inter, "inter-node bandwidth per GPU (bytes/s)");
  app.add_option("--latency", k.latency, "latency per message α (s)");
  app.add_option("--efficiency", k.efficiency, "fraction of peak the matmuls reach (0, 1]");
  app.add_option("--precision", precision, "mixed or fp32")->check(CLI::IsMember({"mixed", "fp32"}));
  app.add_option("--top", top, "plans printed");
  app.add_option("--max-v", o.max_v, "largest interleaving tried");
  app.add_option("--max-zero", o.max_zero, "largest ZeRO stage tried (0..3)");
  app.add_option("--tp", o.tp, "hold tp fixed");
  app.add_option("--pp", o.pp, "hold pp fixed");
  app.add_option("--dp", o.dp, "hold dp fixed");
  app.add_option("--m", o.m, "hold the micro-batch count fixed");
  app.add_option("--v", o.v, "hold the interleaving fixed");
  app.add_option("--zero", o.zero, "hold the ZeRO stage fixed");
  app.add_option("--sp", sp, "hold sequence parallelism fixed (0 or 1)");
  app.add_option("--recompute", recompute, "hold recomputation fixed: none, selective, full");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    in.help = true, in.help_text = app.help();
    return in;
  } catch (const CLI::ParseError& e) {
    throw PlanInputError(e.what());
  }
  if (!config.empty()) read_json(config, in);
  if (!preset.empty()) set_preset(in.model, preset);
  auto flag = [&](const char* name) { return app.get_option(name)->count() > 0; };
  if (flag("--layers")) in.model.L = m.L;
  if (flag("--channels")) in.model.C = m.C;
  if (flag("--heads")) in.model.H = m.H;
  if (flag("--vocab")) in.model.V = m.V;
  if (flag("--seq")) in.model.T = m.T, in.model.ctx = 0;
  if (in.model.ctx == 0) in.model.ctx = in.model.T;
  if (flag("--batch")) in.batch = batch;
  if (flag("--gpus-per-node")) in.cluster.gpus_per_node = k.gpus_per_node;
  if (flag("--nodes")) in.cluster.nodes = k.nodes;
  if (flag("--memory")) in.cluster.memory = k.memory;
  if (flag("--peak-flops")) in.cluster.peak_flops = k.peak_flops;
  if (flag("--bw-intra")) in.cluster.bw_intra = k.bw_intra;
  if (flag("--bw-inter")) in.cluster.bw_inter = k.bw_inter;
  if (flag("--latency")) in.cluster.latency = k.latency;
  if (flag("--efficiency")) in.cluster.efficiency = k.efficiency;
  if (flag("--precision")) in.options.mixed = precision == "mixed";
  if (flag("--top")) in.top = top;
  if (flag("--max-v")) in.options.max_v = o.max_v;
  if (flag("--max-zero")) in.options.max_zero = o.max_zero;
  for (auto [name, dst, src] : {std::tuple{"--tp", &in.options.tp, o.tp},
                                {"--pp", &in.options.pp, o.pp}, {"--dp", &in.options.dp, o.dp},
                                {"--m", &in.options.m, o.m}, {"--v", &in.options.v, o.v},
                                {"--zero", &in.options.zero, o.zero}})
    if (flag(name)) *dst = src;
  if (flag("--sp")) {
    if (sp != 0 && sp != 1) throw PlanInputError("--sp " + std::to_string(sp) + " (expected 0 or 1)");
    in.options.sp = sp;
  }
  if (flag("--recompute")) {
    try {
      in.options.recompute = int(parse_recompute(recompute));
    } catch (const std::invalid_argument& e) {
      throw PlanInputError(e.what());
    }
  }
  validate(in);
  return in;
}

void validate(const PlanInput& in) {
  const ModelSpec& m = in.model;
  auto positive = [](const char* what, double x) {
    if (!(x > 0)) throw PlanInputError(std::string(what) + " " + num(x) + " (expected > 0)");
  };
  if (m.L == 0 && m.C == 0) throw PlanInputError("no model: give --preset or L, C, H, V, T");
  positive("layers L", double(m.L)), positive("channels C", double(m.C));
  positive("heads H", double(m.H)), positive("vocab V", double(m.V));
  positive("sequence T", double(m.T));
  if (m.C % m.H)
    throw PlanInputError("channels C " + num(m.C) + " not divisible by heads H " + num(m.H));
  if (m.ctx < m.T)
    throw PlanInputError("ctx " + num(m.ctx) + " is shorter than the sequence T " + num(m.T));
  positive("batch", double(in.batch));
  const Cluster& c = in.cluster;
  positive("gpus_per_node", c.gpus_per_node), positive("nodes", c.nodes);
  positive("memory", c.memory), positive("peak_flops", c.peak_flops);
  positive("bw_intra", c.bw_intra), positive("bw_inter", c.bw_inter);
  if (c.latency < 0) throw PlanInputError("latency " + num(c.latency) + " (expected ≥ 0)");
  if (!(c.efficiency > 0 && c.efficiency <= 1))
    throw PlanInputError("efficiency " + num(c.efficiency) + " (expected in (0, 1])");
  positive("top", in.top), positive("max_v", in.options.max_v);
  if (in.options.max_zero < 0 || in.options.max_zero > 3)
    throw PlanInputError("max_zero " + num(in.options.max_zero) + " (expected 0..3)");
  const SearchOptions& o = in.options;
  for (auto [name, x] : {std::pair{"tp", o.tp}, {"pp", o.pp}, {"dp", o.dp}, {"m", o.m},
                         {"v", o.v}})
    if (x < 0) throw PlanInputError(std::string(name) + " " + num(x) + " (expected ≥ 1, or 0: free)");
  if (o.zero > 3) throw PlanInputError("zero " + num(o.zero) + " (expected 0..3)");
}

}  // namespace llmp::plan
