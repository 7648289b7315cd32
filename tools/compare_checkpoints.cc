// compare_checkpoints: how far one run's final parameters are from another's, the equivalence
// check of tests/equivalence.h on two checkpoints that train_main wrote (--save).
//
//   bazel run //tools:compare_checkpoints -- /tmp/zero2.safetensors /tmp/baseline.safetensors
//       --max_rel 1e-4                                    (one command line)
//
// The measure is llm.c's check_tensor style over all Ψ parameters, the second file the
// reference:
//   max_rel = max_i |a_i − b_i| / max_i |b_i|
// (not per tensor: a parameter whose true gradient is exactly zero, c_attn.bias's key part,
// holds amplified rounding noise; tests/equivalence.h says why). It prints one line
//   max_rel 3.1e-06 (largest |a − b| in h.1.attn.c_attn.weight) | steps 5 and 5
// and exits 0 when max_rel <= --max_rel, 1 when it is larger ("differs: ..."), 2 on bad input
// (a missing or malformed file, two different models or step counts in the metadata, a parameter
// one file holds and the other not: one line "error: ..."). The parameters are every tensor but
// AdamW's ("optimizer." names), so mixtures of experts compare too; the stages may differ.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "common/runtime/check.h"
#include "common/runtime/checkpoint.h"
#include "common/runtime/flags.h"
#include "common/runtime/options.h"

namespace {

/// Metadata value `key` of `c`, or "-" when it has none.
std::string meta(const llmp::Checkpoint& c, const std::string& key) {
  const auto it = c.metadata.find(key);
  return it == c.metadata.end() ? "-" : it->second;
}

/// The parameters of a checkpoint: its tensors but AdamW's m and v ("optimizer." names).
bool is_parameter(const llmp::LoadedTensor& t) { return t.name.rfind("optimizer.", 0) != 0; }

}  // namespace

int main(int argc, char** argv) {
  using namespace llmp;
  std::string path_a, path_b;
  double max_rel = 1e-4;
  const AppPtr app =
      make_app("Compare two checkpoints' parameters: max |a - b| / max |b| over all of them");
  required(add_option_no_default(*app, "a", path_a, "checkpoint under test"));
  required(add_option_no_default(*app, "b", path_b, "reference checkpoint"));
  add_option(*app, "--max_rel", max_rel, "largest max|a-b|/max|b| accepted (exit 1 above)");
  parse_flags_or_exit(*app, argc, argv);
  if (!(max_rel >= 0)) user_error("--max_rel " + std::to_string(max_rel) + " must be >= 0");
  try {
    const Checkpoint a = load_safetensors(path_a), b = load_safetensors(path_b);
    for (const char* key : {"model", "n_layer", "n_head", "n_embd", "vocab_size", "n_ctx", "step"})
      if (meta(a, key) != meta(b, key))
        user_error(path_a + " and " + path_b + " differ in " + key + ": " + meta(a, key) +
                   " vs " + meta(b, key));
    double worst_diff = 0, max_ref = 0;
    std::string worst = "-";
    int64_t compared = 0;
    for (const LoadedTensor& y : b.tensors) {
      if (!is_parameter(y)) continue;
      const LoadedTensor& x = a.at(y.name);  // throws "checkpoint a: no tensor ..."
      if (x.shape != y.shape)
        user_error(path_a + ": " + y.name + " has another shape than in " + path_b);
      const float *xs = x.f32(), *ys = y.f32();
      for (int64_t i = 0; i < y.numel(); ++i) {
        const double diff = std::fabs(double(xs[i]) - ys[i]);
        if (!(diff <= worst_diff)) worst_diff = diff, worst = y.name;
        max_ref = std::max(max_ref, std::fabs(double(ys[i])));
      }
      compared += y.numel();
    }
    for (const LoadedTensor& x : a.tensors)
      if (is_parameter(x) && !b.find(x.name))
        user_error(path_a + " holds " + x.name + ", " + path_b + " does not");
    if (compared == 0 || max_ref == 0) user_error(path_b + " holds no nonzero parameter");
    const double rel = worst_diff / max_ref;
    std::printf("max_rel %.3g (largest |a - b| in %s) | %lld parameters | steps %s and %s\n",
                rel, worst.c_str(), static_cast<long long>(compared),
                meta(a, "step").c_str(), meta(b, "step").c_str());
    if (!(rel <= max_rel)) {
      std::printf("differs: max_rel %.3g > %.3g\n", rel, max_rel);
      return 1;
    }
  } catch (const std::exception& e) {
    user_error(e.what());
  }
  return 0;
}
