// The table's methods (methods.h).
#include "stages/long_sequences/methods.h"

#include <memory>

#include "common/cp/ulysses.h"

namespace llmp {

std::vector<Method> methods() {
  std::vector<Method> m;
  m.push_back({"Ulysses",
               [](ProcessGroup& g) -> std::unique_ptr<AttentionCore> {
                 return std::make_unique<UlyssesAttention>(g);
               },
               UlyssesAttention::split_error});
  return m;
}

}  // namespace llmp
