// The table's methods (methods.h).
#include "stages/long_sequences/methods.h"

#include <memory>

#include "common/cp/ring_attention.h"
#include "common/cp/ring_self_attention.h"
#include "common/cp/ulysses.h"

namespace llmp {

std::vector<Method> methods() {
  std::vector<Method> m;
  m.push_back({"ring self-attention",
               [](ProcessGroup& g) -> std::unique_ptr<AttentionCore> {
                 return std::make_unique<RingSelfAttention>(g);
               },
               RingSelfAttention::split_error, /*ring=*/true});
  m.push_back({"ring attention (balanced)",
               [](ProcessGroup& g) -> std::unique_ptr<AttentionCore> {
                 return std::make_unique<RingAttention>(g, RingAttention::Split::kBalanced);
               },
               RingAttention::split_error, /*ring=*/true});
  m.push_back({"Ulysses",
               [](ProcessGroup& g) -> std::unique_ptr<AttentionCore> {
                 return std::make_unique<UlyssesAttention>(g);
               },
               UlyssesAttention::split_error});
  return m;
}

}  // namespace llmp
