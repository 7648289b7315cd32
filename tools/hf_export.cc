// Export to a Hugging Face GPT-2 folder (see hf_export.h).
#include "tools/hf_export.h"

#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <vector>

#include "common/train/gpt2_config.h"

namespace llmp {

void export_hf(const ModelCheckpoint& ck, const std::string& out_dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) throw std::runtime_error("export " + out_dir + ": cannot create the folder: " + ec.message());
  const GPTLayout layout(ck.config);
  std::vector<CheckpointEntry> entries;
  for (const ParamSpec& p : layout.params())
    entries.push_back({"transformer." + p.name, p.shape, ck.param(p.name)});
  save_safetensors((fs::path(out_dir) / "model.safetensors").string(), entries, {{"format", "pt"}});
  const std::string cfg = (fs::path(out_dir) / "config.json").string();
  std::ofstream out(cfg);
  out << hf_config_json(ck.config).dump(2) << "\n";
  if (!out.flush()) throw std::runtime_error("export " + cfg + ": cannot write");
}

}  // namespace llmp
