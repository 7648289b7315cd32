// Names of the recomputation policies (recompute.h).
#include "common/nn/recompute.h"

#include <stdexcept>

namespace llmp {

const char* to_string(Recompute r) {
  switch (r) {
    case Recompute::kNone: return "none";
    case Recompute::kFull: return "full";
    case Recompute::kSelective: return "selective";
  }
  return "?";
}

RecomputeMeter& RecomputeMeter::instance() {
  static RecomputeMeter meter;
  return meter;
}

Recompute parse_recompute(const std::string& s) {
  if (s == "none") return Recompute::kNone;
  if (s == "full") return Recompute::kFull;
  if (s == "selective") return Recompute::kSelective;
  throw std::invalid_argument("--recompute '" + s + "' (expected none, full or selective)");
}

}  // namespace llmp
