// Reading, checking and writing training checkpoints (see checkpoint_io.h).
#include "common/train/checkpoint_io.h"

#include <cstring>
#include <regex>
#include <stdexcept>
#include <vector>

#include "common/runtime/log.h"
#include "common/train/gpt2_config.h"

namespace llmp {
namespace {

const char* kFormatV2 = "llmp-gpt-v2";
const char* kFormatV1 = "llmp-gpt-v1";
const char* kHfPrefix = "transformer.";
const char* kMomentPrefix[2] = {"optimizer.exp_avg.", "optimizer.exp_avg_sq."};

std::runtime_error bad(const std::string& path, const std::string& what) {
  return std::runtime_error("checkpoint " + path + ": " + what);
}

std::string meta(const Checkpoint& c, const char* key) {
  auto it = c.metadata.find(key);
  return it == c.metadata.end() ? std::string() : it->second;
}

bool starts_with(const std::string& s, const std::string& p) { return s.compare(0, p.size(), p) == 0; }

// A tensor as files hold it: without a padded vocabulary's rows (ParamSpec::pad_rows, zero),
// which are at its end, so the saved elements are the first saved_numel() of the buffer's.
std::vector<int64_t> saved_shape(const ParamSpec& p) {
  std::vector<int64_t> shape = p.shape;
  shape.front() -= p.pad_rows;
  return shape;
}
int64_t saved_numel(const ParamSpec& p) { return shape_numel(saved_shape(p)); }

int64_t parse_step(const std::string& path, const std::string& step) {
  try {
    size_t used = 0;
    const long long s = std::stoll(step, &used);
    if (s >= 0 && used == step.size()) return s;
  } catch (const std::exception&) {
  }
  throw bad(path, "metadata step '" + step + "' is not a non-negative integer");
}

// A foreign file's extras: HF's attention buffers (not parameters) and a tied lm_head.
void drop_hf_extras(ModelCheckpoint& ck) {
  static const std::regex kBuffer(R"(h\.\d+\.attn\.(bias|masked_bias))");
  if (const LoadedTensor* head = ck.file.find("lm_head.weight")) {
    const LoadedTensor* wte = ck.file.find(ck.prefix + "wte.weight");
    if (!wte || wte->shape != head->shape || wte->dtype != head->dtype || wte->bytes != head->bytes)
      throw bad(ck.file.path, "lm_head.weight differs from wte.weight: this GPT ties the LM head "
                              "to the token embedding, an untied head cannot be loaded");
  }
  std::vector<LoadedTensor> kept;
  for (LoadedTensor& t : ck.file.tensors) {
    const std::string name = starts_with(t.name, ck.prefix) ? t.name.substr(ck.prefix.size()) : t.name;
    if (t.name == "lm_head.weight" || std::regex_match(name, kBuffer)) continue;
    kept.push_back(std::move(t));
  }
  ck.file.tensors = std::move(kept);
}

// Reads, classifies and checks the file; `run` null: the configuration from the file alone.
ModelCheckpoint read(const std::string& path, const GPTConfig* run) {
  ModelCheckpoint ck;
  ck.file = load_safetensors(path);
  const Checkpoint& f = ck.file;
  const std::string llmp = meta(f, "llmp_format"), format = meta(f, "format");
  if (llmp == kFormatV2) {
    ck.origin = kFormatV2;
  } else if (!llmp.empty()) {
    throw bad(path, "llmp_format '" + llmp + "' is not " + kFormatV2);
  } else if (format == kFormatV1) {
    ck.origin = kFormatV1;
  } else if (format.empty() || format == "pt") {
    ck.origin = "foreign";
    for (const LoadedTensor& t : f.tensors)
      if (starts_with(t.name, kHfPrefix)) ck.prefix = kHfPrefix;
    drop_hf_extras(ck);
  } else {
    throw bad(path, "format '" + format + "' is neither pt (safetensors, Hugging Face) nor " +
                        kFormatV1 + ", and there is no llmp_format " + kFormatV2);
  }

  // 1. The configuration, before any shape: the head count leaves no trace in the shapes.
  if (ck.origin == kFormatV1) {  // v1 recorded only the preset name; it must be the run's
    const std::string model = meta(f, "model");
    if (run && model != run->name)
      throw bad(path, "was saved for model '" + model + "', not --model " + run->name);
    ck.config = run ? *run : GPTConfig::preset(model.substr(0, model.find("-L")));
    std::vector<std::string> ignored;
    const Gpt2Dims d = recorded_dims(f, "", &ignored);  // L from the shapes (a "-L8" suffix)
    ck.config.layers = d.n_layer;
    ck.notes.push_back("checkpoint " + path + ": an llmp-gpt-v1 file (no configuration recorded), "
                       "read as model '" + model + "'");
  } else {
    Gpt2Dims d = recorded_dims(f, ck.prefix, &ck.notes);
    if (run) {
      const Gpt2Dims want = dims_of(*run);
      const std::string diff = dims_mismatch(d, want);
      if (!diff.empty()) {
        const std::string model = meta(f, "model");
        throw bad(path, diff + (model.empty() || model == run->name ? "" :
                                " (saved for model '" + model + "', this run is '" + run->name + "')"));
      }
      if (d.n_head < 0)
        ck.notes.push_back("checkpoint " + path + ": n_head is not recorded and shapes cannot show "
                           "it; taking this run's " + std::to_string(run->heads));
      ck.config = *run;
    } else {
      if (d.n_head < 0)
        throw bad(path, "n_head is not recorded (metadata or config.json) and the shapes cannot "
                        "show it");
      ck.config.name = meta(f, "model").empty() ? "gpt2" : meta(f, "model");
      ck.config.layers = d.n_layer, ck.config.heads = d.n_head, ck.config.d = d.n_embd;
      ck.config.vocab = d.vocab_size, ck.config.ctx = d.n_positions;
    }
  }

  // 2. The tensors: the parameters, and m and v (required in our files, optional in foreign ones).
  // Files hold the unpadded model (saved_shape), whatever padding the run uses.
  GPTConfig unpadded = ck.config;
  unpadded.vocab_divisible_by = 1;
  GPTLayout layout(unpadded);  // throws std::invalid_argument on an impossible configuration
  ck.has_optimizer = ck.origin != "foreign";
  for (const LoadedTensor& t : f.tensors)
    if (starts_with(t.name, "optimizer.")) ck.has_optimizer = true;
  std::vector<ExpectedTensor> expected;
  for (const ParamSpec& p : layout.params()) {
    expected.push_back({ck.prefix + p.name, p.shape, DType::kF32});
    if (ck.has_optimizer)
      for (const char* m : kMomentPrefix) expected.push_back({m + p.name, p.shape, DType::kF32});
  }
  check_tensors(f, expected);
  check_finite(f);
  if (!ck.has_optimizer)
    ck.notes.push_back("checkpoint " + path + ": no optimizer state in the file; AdamW's m and v "
                       "start at zero");

  // 3. The step, and the precision it was saved in (the tensors are fp32 whatever it was).
  const std::string step = meta(f, "step");
  if (ck.origin != "foreign" || !step.empty()) ck.step = parse_step(path, step);
  try {
    ck.precision = parse_precision_state(f.metadata);
  } catch (const std::invalid_argument& e) {
    throw bad(path, std::string("metadata ") + e.what());
  }
  return ck;
}

}  // namespace

ModelCheckpoint read_checkpoint(const std::string& path, const GPT& model) {
  return read(path, &model.config());
}

ModelCheckpoint read_checkpoint(const std::string& path) { return read(path, nullptr); }

void unpack_state(const ModelCheckpoint& ck, const GPT& model, float* params, float* exp_avg,
                  float* exp_avg_sq) {
  const int64_t psi = model.layout().num_params();
  std::memset(exp_avg, 0, psi * sizeof(float));
  std::memset(exp_avg_sq, 0, psi * sizeof(float));
  for (const ParamSpec& p : model.layout().params()) {
    const int64_t saved = saved_numel(p);  // a padded vocabulary's rows, after it, are 0
    const size_t bytes = saved * sizeof(float);
    std::memcpy(params + p.offset, ck.param(p.name), bytes);
    std::memset(params + p.offset + saved, 0, (p.numel - saved) * sizeof(float));
    if (!ck.has_optimizer) continue;
    std::memcpy(exp_avg + p.offset, ck.file.at(kMomentPrefix[0] + p.name).f32(), bytes);
    std::memcpy(exp_avg_sq + p.offset, ck.file.at(kMomentPrefix[1] + p.name).f32(), bytes);
  }
}

int64_t load_into(const std::string& path, const GPT& model, Strategy& strategy) {
  const ModelCheckpoint ck = read_checkpoint(path, model);
  for (const std::string& note : ck.notes) log_info("{}", note);
  const int64_t psi = model.layout().num_params();
  std::vector<float> params(psi), m(psi), v(psi);
  unpack_state(ck, model, params.data(), m.data(), v.data());
  strategy.set_state(params.data(), m.data(), v.data());
  // Another precision's file: the master weights, m and v are fp32 in every precision, so it
  // loads; the 16-bit working copy was just rounded from them (set_state).
  const std::map<std::string, std::string> run = strategy.extra_state();
  const auto it = run.find("precision");
  const std::string mine = it == run.end() ? "fp32" : it->second;
  const std::string theirs = to_string(ck.precision.precision);
  auto article = [](const std::string& p) { return (p == "bf16" ? "a " : "an ") + p; };
  if (theirs != mine)
    log_info("loaded {} checkpoint into {} run ({}: fp32 master weights, m and v; the working "
             "copy is rounded from them)", article(theirs), article(mine), path);
  const std::string note = strategy.set_extra_state(ck.file.metadata);
  if (!note.empty()) log_info("{}", note);
  return ck.step;
}

void write_checkpoint(const std::string& path, const GPT& model, const AdamWConfig& opt,
                      const float* params, const float* exp_avg, const float* exp_avg_sq,
                      int64_t step, const std::string& stage,
                      const std::map<std::string, std::string>& extra) {
  std::vector<CheckpointEntry> entries;
  const std::vector<ParamSpec>& ps = model.layout().params();
  for (const ParamSpec& p : ps) entries.push_back({p.name, saved_shape(p), params + p.offset});
  for (const ParamSpec& p : ps)
    entries.push_back({kMomentPrefix[0] + p.name, saved_shape(p), exp_avg + p.offset});
  for (const ParamSpec& p : ps)
    entries.push_back({kMomentPrefix[1] + p.name, saved_shape(p), exp_avg_sq + p.offset});
  std::map<std::string, std::string> md = dims_metadata(model.config());
  auto num = [](float x) { return fmt::format("{}", x); };  // shortest round-trip form
  md.insert({{"format", "pt"},
             {"llmp_format", kFormatV2},
             {"model", model.config().name},
             {"optimizer", "adamw"},
             {"lr", num(opt.lr)},
             {"beta1", num(opt.beta1)},
             {"beta2", num(opt.beta2)},
             {"eps", num(opt.eps)},
             {"weight_decay", num(opt.weight_decay)},
             {"decay", decay_rule_name(opt.decay)},
             {"step", std::to_string(step)},
             {"stage", stage},
             {"precision", "fp32"}});
  for (const auto& [key, value] : extra) {
    if (key != "precision" && md.count(key))
      throw std::invalid_argument("write_checkpoint: extra metadata '" + key +
                                  "' would replace the checkpoint's own");
    md[key] = value;
  }
  save_safetensors(path, entries, md);
}

void save_from(const std::string& path, const GPT& model, Strategy& strategy,
               const AdamWConfig& opt, int64_t step, const std::string& stage, bool write) {
  const int64_t psi = model.layout().num_params();
  std::vector<float> params(psi), m(psi), v(psi);
  strategy.get_state(params.data(), m.data(), v.data());
  if (write)
    write_checkpoint(path, model, opt, params.data(), m.data(), v.data(), step, stage,
                     strategy.extra_state());
}

}  // namespace llmp
