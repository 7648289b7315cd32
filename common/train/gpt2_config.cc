// GPT-2 configuration of a checkpoint: recorded, read from config.json, or inferred (see
// gpt2_config.h).
#include "common/train/gpt2_config.h"

#include <filesystem>
#include <fstream>
#include <set>
#include <stdexcept>

#include "kernels/cpu/layernorm.h"

namespace llmp {

const std::vector<std::pair<const char*, int Gpt2Dims::*>>& gpt2_fields() {
  static const std::vector<std::pair<const char*, int Gpt2Dims::*>> f = {
      {"n_layer", &Gpt2Dims::n_layer},       {"n_head", &Gpt2Dims::n_head},
      {"n_embd", &Gpt2Dims::n_embd},         {"vocab_size", &Gpt2Dims::vocab_size},
      {"n_positions", &Gpt2Dims::n_positions}};
  return f;
}

Gpt2Dims dims_of(const GPTConfig& c) { return {c.layers, c.heads, c.d, c.vocab, c.ctx}; }

std::map<std::string, std::string> dims_metadata(const GPTConfig& c) {
  std::map<std::string, std::string> m;
  const Gpt2Dims d = dims_of(c);
  for (const auto& [name, field] : gpt2_fields()) m[name] = std::to_string(d.*field);
  m["n_ctx"] = std::to_string(c.ctx);
  return m;
}

namespace {

std::runtime_error bad(const std::string& path, const std::string& what) {
  return std::runtime_error("checkpoint " + path + ": " + what);
}

int positive(const std::string& path, const std::string& key, const std::string& v) {
  try {
    size_t used = 0;
    const long long x = std::stoll(v, &used);
    if (used == v.size() && x > 0 && x < (1LL << 31)) return static_cast<int>(x);
  } catch (const std::exception&) {
  }
  throw bad(path, "metadata " + key + " '" + v + "' is not a positive integer");
}

// From the shapes: wte (V, C), wpe (ctx, C), the blocks h.<l>.
Gpt2Dims from_shapes(const Checkpoint& ckpt, const std::string& prefix) {
  Gpt2Dims d;
  if (const LoadedTensor* wte = ckpt.find(prefix + "wte.weight"); wte && wte->shape.size() == 2)
    d.vocab_size = static_cast<int>(wte->shape[0]), d.n_embd = static_cast<int>(wte->shape[1]);
  if (const LoadedTensor* wpe = ckpt.find(prefix + "wpe.weight"); wpe && wpe->shape.size() == 2)
    d.n_positions = static_cast<int>(wpe->shape[0]);
  std::set<std::string> blocks;
  const std::string h = prefix + "h.";
  for (const LoadedTensor& t : ckpt.tensors)
    if (t.name.compare(0, h.size(), h) == 0) blocks.insert(t.name.substr(0, t.name.find('.', h.size())));
  d.n_layer = static_cast<int>(blocks.size());
  return d;
}

}  // namespace

Gpt2Dims recorded_dims(const Checkpoint& ckpt, const std::string& prefix,
                       std::vector<std::string>* notes) {
  Gpt2Dims d;
  int recorded = 0;
  for (const auto& [name, field] : gpt2_fields())
    if (auto it = ckpt.metadata.find(name); it != ckpt.metadata.end())
      d.*field = positive(ckpt.path, name, it->second), ++recorded;
  if (recorded == static_cast<int>(gpt2_fields().size())) return d;

  // save_pretrained's folder: config.json beside model.safetensors.
  const std::filesystem::path cfg = std::filesystem::path(ckpt.path).parent_path() / "config.json";
  if (recorded == 0 && std::filesystem::is_regular_file(cfg)) {
    std::ifstream in(cfg);
    const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (j.is_object()) {
      for (const auto& [name, field] : gpt2_fields())
        if (j.contains(name) && j[name].is_number_integer()) d.*field = j[name].get<int>(), ++recorded;
      if (recorded > 0) notes->push_back("checkpoint " + ckpt.path + ": configuration read from " + cfg.string());
    }
  }
  // What is still unknown comes from the shapes, except the head count.
  const Gpt2Dims s = from_shapes(ckpt, prefix);
  std::string inferred;
  for (const auto& [name, field] : gpt2_fields())
    if (d.*field < 0 && s.*field >= 0) {
      d.*field = s.*field;
      inferred += std::string(inferred.empty() ? "" : ", ") + name + " " + std::to_string(d.*field);
    }
  if (!inferred.empty())
    notes->push_back("checkpoint " + ckpt.path + ": configuration not recorded, inferred from the "
                     "tensor shapes: " + inferred);
  return d;
}

std::string dims_mismatch(const Gpt2Dims& file, const Gpt2Dims& run) {
  for (const auto& [name, field] : gpt2_fields())
    if (file.*field >= 0 && file.*field != run.*field)
      return std::string(name) + " is " + std::to_string(file.*field) + ", this run has " +
             std::to_string(run.*field);
  return "";
}

nlohmann::ordered_json hf_config_json(const GPTConfig& c) {
  nlohmann::ordered_json j;
  j["model_type"] = "gpt2";
  j["architectures"] = {"GPT2LMHeadModel"};
  j["n_layer"] = c.layers;
  j["n_head"] = c.heads;
  j["n_embd"] = c.d;
  j["vocab_size"] = c.vocab;
  j["n_positions"] = c.ctx;
  j["n_ctx"] = c.ctx;
  j["n_inner"] = nullptr;                   // 4·n_embd, as ours
  j["activation_function"] = "gelu_new";    // 0.5x(1 + tanh(√(2/π)(x + 0.044715x³))), ours
  static_assert(cpu::kLayerNormEps == 1e-5f, "config.json's layer_norm_epsilon must be ours");
  j["layer_norm_epsilon"] = 1e-5;
  j["resid_pdrop"] = 0.0;                   // no dropout here
  j["embd_pdrop"] = 0.0;
  j["attn_pdrop"] = 0.0;
  j["scale_attn_weights"] = true;           // scores / √hs, as ours
  j["tie_word_embeddings"] = true;          // logits = ln_f(x) @ wteᵀ
  j["bos_token_id"] = c.vocab - 1;
  j["eos_token_id"] = c.vocab - 1;
  return j;
}

}  // namespace llmp
