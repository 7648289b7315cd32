// The model configuration a checkpoint records, in GPT-2's (Hugging Face GPT2Config's) terms, and
// how it is found when a file does not record it.
//
//   GPT2Config   this project (GPTConfig)   where a file without metadata still shows it
//   n_layer      layers  L                  the number of distinct h.<l>. prefixes
//   n_head       heads   H                  nowhere: every shape is the same for any H | C
//   n_embd       d       C                  wte.weight (V, C)
//   vocab_size   vocab   V                  wte.weight (V, C)
//   n_positions  ctx                        wpe.weight (ctx, C)   (n_ctx: the same number)
//
// Because the head count leaves no trace in the shapes, a checkpoint of this project records all
// five in its metadata, and --load compares them with the run's before anything else: a file of
// H = 4 loaded into a run of H = 8 would otherwise load without error and compute something else.
// A foreign file (safetensors' own writers, save_pretrained) usually records none; save_pretrained
// writes them to config.json next to model.safetensors, which is read when present.
//
// Glossary: L layers, H heads, C channels, V vocab, ctx positions.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/nn/gpt.h"
#include "common/runtime/checkpoint.h"

namespace llmp {

/// The five GPT2Config fields; -1 where unknown.
struct Gpt2Dims {
  int n_layer = -1, n_head = -1, n_embd = -1, vocab_size = -1, n_positions = -1;
};

/// The fields, in the order they are compared and reported: {"n_layer", &Gpt2Dims::n_layer}, ...
const std::vector<std::pair<const char*, int Gpt2Dims::*>>& gpt2_fields();

Gpt2Dims dims_of(const GPTConfig& c);

/// The fields as checkpoint metadata: {"n_layer": "4", ..., "n_ctx": "64"}.
std::map<std::string, std::string> dims_metadata(const GPTConfig& c);

/// The dims `ckpt` holds, from (1) its metadata, else (2) config.json in the file's folder, else
/// (3) its tensors' shapes (names after `prefix`, e.g. "transformer."); n_head then stays -1.
/// Appends one line per source other than the metadata to `notes`. Throws std::runtime_error
/// "checkpoint <path>: metadata n_head 'x' is not a positive integer" for a bad recorded value.
Gpt2Dims recorded_dims(const Checkpoint& ckpt, const std::string& prefix,
                       std::vector<std::string>* notes);

/// "" when `file` agrees with `run` on every known field, else the first difference:
/// "n_head is 4, this run has 8".
std::string dims_mismatch(const Gpt2Dims& file, const Gpt2Dims& run);

/// Hugging Face's config.json for GPT2LMHeadModel of this model: model_type gpt2, the five
/// dims (and n_ctx), activation_function gelu_new (GELU's tanh form, kernels/cpu/gelu.h),
/// layer_norm_epsilon 1e-5 (kernels/cpu/layernorm.h), tie_word_embeddings true, no dropout.
nlohmann::ordered_json hf_config_json(const GPTConfig& c);

}  // namespace llmp
