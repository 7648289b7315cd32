// Schedule bookkeeping: names and labels of actions, virtual-stage arithmetic, message tags, the
// append_* building blocks every generator uses, and make_schedule. The generators themselves
// live one per file: schedule_gpipe.cc (naive, GPipe), schedule_1f1b.cc, schedule_interleaved.cc,
// schedule_zero_bubble.cc.
//
// Glossary: p pipeline stages, m micro-batches, v model chunks per rank, s = c·p + r the virtual
// stage of chunk c on rank r.
#include "common/pipeline/schedule.h"

#include <cctype>
#include <sstream>
#include <stdexcept>

namespace llmp {

const char* op_name(Op op) {
  switch (op) {
    case Op::kForward: return "forward";
    case Op::kBackward: return "backward";
    case Op::kBackwardInput: return "backward_input";
    case Op::kBackwardWeight: return "backward_weight";
    case Op::kSendForward: return "send_forward";
    case Op::kRecvForward: return "recv_forward";
    case Op::kSendBackward: return "send_backward";
    case Op::kRecvBackward: return "recv_backward";
  }
  return "?";
}

bool is_compute(Op op) {
  return op == Op::kForward || op == Op::kBackward || op == Op::kBackwardInput ||
         op == Op::kBackwardWeight;
}

const char* op_category(Op op) {
  switch (op) {
    case Op::kForward: return "forward";
    case Op::kBackward:
    case Op::kBackwardInput:
    case Op::kBackwardWeight: return "backward";
    case Op::kSendForward:
    case Op::kSendBackward: return "send";
    case Op::kRecvForward:
    case Op::kRecvBackward: return "recv";
  }
  return "?";
}

std::string to_string(const Action& a) {
  return std::string(op_name(a.op)) + "(mb=" + std::to_string(a.microbatch) +
         ", chunk=" + std::to_string(a.chunk) + ")";
}

std::string action_label(const Action& a, int v) {
  std::string prefix;
  switch (a.op) {
    case Op::kForward: prefix = "F"; break;
    case Op::kBackward:
    case Op::kBackwardInput: prefix = "B"; break;
    case Op::kBackwardWeight: prefix = "W"; break;
    case Op::kSendForward: prefix = "sf"; break;
    case Op::kRecvForward: prefix = "rf"; break;
    case Op::kSendBackward: prefix = "sb"; break;
    case Op::kRecvBackward: prefix = "rb"; break;
  }
  if (is_compute(a.op) && a.chunk % 2 == 1) prefix[0] = static_cast<char>(std::tolower(prefix[0]));
  std::string label = prefix + std::to_string(a.microbatch);
  const bool show_chunk = is_compute(a.op) ? v > 2 : v > 1;
  if (show_chunk) label += "." + std::to_string(a.chunk);
  return label;
}

StageRef Schedule::peer(int rank, const Action& a) const {
  const int s = virtual_stage(rank, a.chunk);
  int other = 0;
  switch (a.op) {
    case Op::kSendForward:
    case Op::kRecvBackward: other = s + 1; break;
    case Op::kRecvForward:
    case Op::kSendBackward: other = s - 1; break;
    default:
      throw std::invalid_argument("peer() of compute action " + to_string(a) + " on rank " +
                                  std::to_string(rank));
  }
  if (other < 0 || other >= num_virtual_stages()) {
    throw std::invalid_argument(to_string(a) + " on rank " + std::to_string(rank) +
                                " (virtual stage " + std::to_string(s) + " of " +
                                std::to_string(num_virtual_stages()) + ") has no peer stage");
  }
  return stage_of(other, placement().pipeline_of(a.chunk));
}

int Schedule::message_tag(int rank, const Action& a) const {
  const StageRef other = peer(rank, a);
  const bool sending = a.op == Op::kSendForward || a.op == Op::kSendBackward;
  const int receiver = sending ? virtual_stage(other.rank, other.chunk) : virtual_stage(rank, a.chunk);
  const int direction = (a.op == Op::kSendForward || a.op == Op::kRecvForward) ? 0 : 1;
  const int pipeline = placement().pipeline_of(a.chunk);
  return (direction * p * v + pipeline * num_virtual_stages() + receiver) * m + a.microbatch;
}

size_t Schedule::num_actions() const {
  size_t n = 0;
  for (const auto& r : ranks) n += r.size();
  return n;
}

std::string to_string(const Schedule& s) {
  std::ostringstream os;
  os << s.name << " p=" << s.p << " m=" << s.m << " v=" << s.v << "\n";
  for (int r = 0; r < static_cast<int>(s.ranks.size()); ++r) {
    os << "rank " << r << ":";
    for (const Action& a : s.ranks[r]) os << " " << action_label(a, s.v);
    os << "\n";
  }
  return os.str();
}

Schedule empty_schedule(const std::string& name, int p, int m, int v) {
  if (p < 1 || m < 1 || v < 1) {
    throw std::invalid_argument(name + ": needs p >= 1, m >= 1, v >= 1; got p=" +
                                std::to_string(p) + ", m=" + std::to_string(m) +
                                ", v=" + std::to_string(v));
  }
  Schedule s;
  s.name = name;
  s.p = p;
  s.m = m;
  s.v = v;
  s.ranks.resize(p);
  return s;
}

void append_forward(Schedule& s, int rank, int mb, int chunk) {
  auto& out = s.ranks.at(rank);
  if (!s.is_first_stage(rank, chunk)) out.push_back({Op::kRecvForward, mb, chunk});
  out.push_back({Op::kForward, mb, chunk});
  if (!s.is_last_stage(rank, chunk)) out.push_back({Op::kSendForward, mb, chunk});
}

namespace {
void append_backward_op(Schedule& s, int rank, int mb, int chunk, Op op) {
  auto& out = s.ranks.at(rank);
  if (!s.is_last_stage(rank, chunk)) out.push_back({Op::kRecvBackward, mb, chunk});
  out.push_back({op, mb, chunk});
  if (!s.is_first_stage(rank, chunk)) out.push_back({Op::kSendBackward, mb, chunk});
}
}  // namespace

void append_backward(Schedule& s, int rank, int mb, int chunk) {
  append_backward_op(s, rank, mb, chunk, Op::kBackward);
}

void append_backward_input(Schedule& s, int rank, int mb, int chunk) {
  append_backward_op(s, rank, mb, chunk, Op::kBackwardInput);
}

void append_backward_weight(Schedule& s, int rank, int mb, int chunk) {
  s.ranks.at(rank).push_back({Op::kBackwardWeight, mb, chunk});
}

std::vector<std::string> schedule_names() {
  return {"naive", "gpipe", "1f1b", "interleaved_1f1b", "zb_h1", "chimera"};
}

Schedule make_schedule(const std::string& name, int p, int m, int v) {
  if (name == "interleaved_1f1b") return interleaved_1f1b(p, m, v);
  if (name == "chimera") {
    if (v != 1 && v != 2)
      throw std::invalid_argument("schedule chimera runs two chunks per rank, one per pipeline; "
                                  "got v=" + std::to_string(v));
    return chimera(p, m);
  }
  bool known = false;
  for (const auto& n : schedule_names()) known = known || n == name;
  if (!known) {
    std::string list;
    for (const auto& n : schedule_names()) list += (list.empty() ? "" : ", ") + n;
    throw std::invalid_argument("unknown pipeline schedule '" + name + "'; known: " + list);
  }
  if (v != 1) {
    throw std::invalid_argument("schedule " + name + " runs one model chunk per rank; got v=" +
                                std::to_string(v) + " (use interleaved_1f1b for v > 1)");
  }
  if (name == "naive") return naive(p, m);
  if (name == "gpipe") return gpipe(p, m);
  if (name == "1f1b") return one_f_one_b(p, m);
  return zb_h1(p, m);
}

void check_layers_divisible(int num_layers, int p, int v, int pipelines) {
  if (pipelines == 2) {
    if (p < 1 || num_layers < 1 || num_layers % p != 0)
      throw std::invalid_argument("layers " + std::to_string(num_layers) +
                                  " not divisible by p = " + std::to_string(p) +
                                  " stages per pipeline (chimera)");
    return;
  }
  if (p < 1 || v < 1 || num_layers < 1 || num_layers % (p * v) != 0) {
    throw std::invalid_argument("layers " + std::to_string(num_layers) +
                                " not divisible by p·v = " + std::to_string(p * v) + " (p=" +
                                std::to_string(p) + ", v=" + std::to_string(v) + ")");
  }
}

LayerRange layer_range(int num_layers, int p, int v, int rank, int chunk) {
  check_layers_divisible(num_layers, p, v);
  if (rank < 0 || rank >= p || chunk < 0 || chunk >= v) {
    throw std::invalid_argument("layer_range: rank " + std::to_string(rank) + " / chunk " +
                                std::to_string(chunk) + " out of range for p=" +
                                std::to_string(p) + ", v=" + std::to_string(v));
  }
  const int per_stage = num_layers / (p * v);
  const int s = chunk * p + rank;
  return {s * per_stage, (s + 1) * per_stage};
}

Span make_span(int rank, const Action& a, int v, double start, double end) {
  return Span{rank, start, end, action_label(a, v), op_category(a.op)};
}

}  // namespace llmp
