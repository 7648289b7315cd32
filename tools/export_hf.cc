// export_hf: a training checkpoint as a Hugging Face GPT-2 folder (tools/hf_export.h).
//
//   bazel run //tools:export_hf -- --load /tmp/mini.safetensors --out /tmp/mini_hf
//
// Reads --load (ours, v2 or v1, or any GPT-2 safetensors file --load accepts), writes
// config.json and model.safetensors into --out. With --eval_batch B > 0 it also writes
// eval.json: B validation sequences of the --data corpus (tokens and targets, (B, T), T the
// model's ctx) and this project's mean cross-entropy on them (forward_loss), which
// tools/hf_check.py compares with transformers' loss on the same tokens.
// A mixed-precision (bf16 / fp16) checkpoint exports as it is: its parameters are the fp32 master
// weights, and the loss here and in transformers is computed in fp32.
// Bad input prints one line "error: ..." and exits 2.
//
// Glossary: B sequences, T tokens per sequence, V vocab.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/data/corpus.h"
#include "common/data/sampler.h"
#include "common/nn/unit_runner.h"
#include "common/runtime/check.h"
#include "common/runtime/flags.h"
#include "common/runtime/options.h"
#include "common/train/checkpoint_io.h"
#include "tools/hf_export.h"

int main(int argc, char** argv) {
  using namespace llmp;
  std::string load, out, data = kDefaultCorpusPath;
  int eval_batch = 4;
  uint64_t seed = 1;
  const AppPtr app = make_app(
      "Write a checkpoint as a Hugging Face GPT-2 folder (config.json, model.safetensors)");
  required(add_option_no_default(*app, "--load", load, "checkpoint to export"));
  required(add_option_no_default(*app, "--out", out, "folder to write"));
  add_option(*app, "--data", data, "corpus for eval.json's sequences");
  add_option(*app, "--eval_batch", eval_batch, "sequences in eval.json (0: no eval.json)");
  add_option(*app, "--seed", seed, "which validation sequences");
  parse_flags_or_exit(*app, argc, argv);
  if (eval_batch < 0) user_error("--eval_batch " + std::to_string(eval_batch) + " must be >= 0");
  try {
    const ModelCheckpoint ck = read_checkpoint(load);
    for (const std::string& n : ck.notes) std::printf("%s\n", n.c_str());
    export_hf(ck, out);
    std::printf("wrote %s/config.json and %s/model.safetensors (%s, L=%d H=%d C=%d V=%d ctx=%d)\n",
                out.c_str(), out.c_str(), ck.config.name.c_str(), ck.config.layers,
                ck.config.heads, ck.config.d, ck.config.vocab, ck.config.ctx);
    if (eval_batch == 0) return 0;
    const GPT model(ck.config);
    std::vector<float> params(model.layout().num_params());
    for (const ParamSpec& p : model.layout().params())
      std::copy(ck.param(p.name), ck.param(p.name) + p.numel, params.begin() + p.offset);
    const int B = eval_batch, T = ck.config.ctx;
    const Corpus corpus = Corpus::load(data, T);
    std::vector<int32_t> tok(B * T), tgt(B * T);
    sample(corpus.val(), seed, 0, 0, B, T, tok.data(), tgt.data());
    const double loss = forward_loss(model, params.data(), tok.data(), tgt.data(), B, T);
    nlohmann::json j;
    j["B"] = B, j["T"] = T, j["loss"] = loss;
    j["tokens"] = tok, j["targets"] = tgt;
    const std::string path = (std::filesystem::path(out) / "eval.json").string();
    std::ofstream(path) << j.dump() << "\n";
    std::printf("wrote %s: our mean cross-entropy on %d x %d validation tokens is %.6f\n",
                path.c_str(), B, T, loss);
  } catch (const std::exception& e) {
    user_error(e.what());
  }
  return 0;
}
