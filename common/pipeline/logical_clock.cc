// LogicalClock (see logical_clock.h): the three rules, compute, send, receive.
//
// Glossary: F forward, B backward, W weight gradient.
#include "common/pipeline/logical_clock.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace llmp {

double LogicalCosts::of(Op op) const {
  switch (op) {
    case Op::kForward: return forward;
    case Op::kBackward: return backward;
    case Op::kBackwardInput: return backward_input;
    case Op::kBackwardWeight: return backward_weight;
    default: return 0.0;  // sends and recvs take no logical time
  }
}

LogicalInterval LogicalClock::compute(Op op) {
  if (!is_compute(op))
    throw std::invalid_argument(std::string("LogicalClock::compute: ") + op_name(op) +
                                " is not a compute op");
  const LogicalInterval t{now_, now_ + costs_.of(op)};
  now_ = t.end;
  return t;
}

LogicalInterval LogicalClock::receive(double arrival) {
  // The op after the recv cannot start before its input exists on the sender.
  const LogicalInterval t{now_, std::max(now_, arrival)};
  now_ = t.end;
  return t;
}

}  // namespace llmp
