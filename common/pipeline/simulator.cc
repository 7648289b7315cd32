// The dry run: static checks of a schedule, then an event replay with per-rank clocks.
//
// Pass 1 (per rank, in order): each action is in range and possible on its virtual stage, and
//   its inputs exist earlier on the same rank (F after its recv_forward, B after its F and its
//   recv_backward, W after its B, a send after the compute it sends).
// Pass 2 (across ranks): each send has exactly one recv on the peer that takes it, and each recv
//   exactly one send (matched like MPI tags: direction, micro-batch, receiving virtual stage).
// Pass 3 (per rank): every (micro-batch, chunk) has run one F and one B, or one B-input and one W.
// Pass 4 (replay): ranks advance until blocked at a recv whose send has not been posted; the
//   recv then ends at max(own clock, send time). No rank can move but some have actions left:
//   deadlock. The replay order does not change the times: a recv's end depends only on when its
//   send was posted, and that is fixed by the sender's own earlier actions.
//
// Glossary: p pipeline stages, m micro-batches, v model chunks per rank, T makespan.
#include "common/pipeline/simulator.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

namespace llmp {

double Costs::of(Op op, int v) const {
  switch (op) {
    case Op::kForward: return forward / v;
    case Op::kBackward: return backward / v;
    case Op::kBackwardInput: return backward_input / v;
    case Op::kBackwardWeight: return backward_weight / v;
    default: return 0.0;
  }
}

int SimResult::max_peak_in_flight() const {
  return peak_in_flight.empty() ? 0 : *std::max_element(peak_in_flight.begin(), peak_in_flight.end());
}

double SimResult::peak_activations(int rank) const {
  return static_cast<double>(peak_in_flight.at(rank)) / v;
}

std::vector<Span> SimResult::compute_spans() const {
  std::vector<Span> out;
  for (const Span& s : spans) {
    if (s.category == "forward" || s.category == "backward") out.push_back(s);
  }
  return out;
}

namespace {

[[noreturn]] void fail(const std::string& what, int rank, int index, const Action& a) {
  throw ScheduleError(what + ": rank " + std::to_string(rank) + " action " +
                          std::to_string(index) + " " + to_string(a),
                      rank, index, a);
}

// Pass 1: one rank's actions, in order, against what that rank has done so far.
void check_rank(const Schedule& s, int r) {
  using Key = std::pair<int, int>;  // (micro-batch, chunk)
  std::map<Op, std::set<Key>> done;
  auto has = [&](Op op, const Key& k) { return done[op].count(k) > 0; };
  const auto& actions = s.ranks[r];
  for (int i = 0; i < static_cast<int>(actions.size()); ++i) {
    const Action& a = actions[i];
    const Key k{a.microbatch, a.chunk};
    if (a.microbatch < 0 || a.microbatch >= s.m || a.chunk < 0 || a.chunk >= s.v) {
      fail("micro-batch or chunk out of range (m=" + std::to_string(s.m) + ", v=" +
               std::to_string(s.v) + ")", r, i, a);
    }
    if (!s.runs_through(a.microbatch, a.chunk))
      fail("micro-batch of pipeline " + std::to_string(s.pipeline_of_microbatch(a.microbatch)) +
               " on a chunk of the other pipeline", r, i, a);
    const bool first = s.is_first_stage(r, a.chunk), last = s.is_last_stage(r, a.chunk);
    switch (a.op) {
      case Op::kRecvForward:
        if (first) fail("recv_forward on the first virtual stage (it reads tokens)", r, i, a);
        break;
      case Op::kSendBackward:
        if (first) fail("send_backward on the first virtual stage", r, i, a);
        if (!has(Op::kBackward, k) && !has(Op::kBackwardInput, k)) fail("send_backward before its backward", r, i, a);
        break;
      case Op::kSendForward:
        if (last) fail("send_forward on the last virtual stage (it computes the loss)", r, i, a);
        if (!has(Op::kForward, k)) fail("send_forward before its forward", r, i, a);
        break;
      case Op::kRecvBackward:
        if (last) fail("recv_backward on the last virtual stage", r, i, a);
        break;
      case Op::kForward:
        if (!first && !has(Op::kRecvForward, k)) fail("forward before its recv_forward", r, i, a);
        break;
      case Op::kBackward:
      case Op::kBackwardInput:
        if (!has(Op::kForward, k)) fail("backward before its forward", r, i, a);
        if (!last && !has(Op::kRecvBackward, k)) fail("backward before its recv_backward", r, i, a);
        if (has(Op::kBackward, k) || has(Op::kBackwardInput, k)) fail("second backward", r, i, a);
        break;
      case Op::kBackwardWeight:
        if (!has(Op::kBackwardInput, k)) fail("backward_weight (W) before its backward_input (B)", r, i, a);
        break;
    }
    if (has(a.op, k)) fail("repeated action", r, i, a);
    done[a.op].insert(k);
  }
}

bool is_send(Op op) { return op == Op::kSendForward || op == Op::kSendBackward; }
bool is_recv(Op op) { return op == Op::kRecvForward || op == Op::kRecvBackward; }

// A message: (receiving rank, tag). Sender and receiver compute the same pair.
using Msg = std::pair<int, int>;
Msg message_of(const Schedule& s, int r, const Action& a) {
  const int dest = is_send(a.op) ? s.peer(r, a).rank : r;
  return {dest, s.message_tag(r, a)};
}

// Pass 2: every send has one recv and every recv one send.
void check_matching(const Schedule& s) {
  std::map<Msg, std::pair<int, int>> sends, recvs;  // message -> (rank, index)
  for (int r = 0; r < s.p; ++r) {
    for (int i = 0; i < static_cast<int>(s.ranks[r].size()); ++i) {
      const Action& a = s.ranks[r][i];
      if (!is_send(a.op) && !is_recv(a.op)) continue;
      auto& table = is_send(a.op) ? sends : recvs;
      if (!table.emplace(message_of(s, r, a), std::make_pair(r, i)).second) fail("duplicate message", r, i, a);
    }
  }
  // Report the first offender in (rank, index) order.
  std::vector<std::tuple<int, int, std::string>> bad;
  for (const auto& [msg, at] : sends) {
    if (!recvs.count(msg)) bad.emplace_back(at.first, at.second, "unmatched send: rank " + std::to_string(msg.first) + " never receives it");
  }
  for (const auto& [msg, at] : recvs) {
    if (!sends.count(msg)) bad.emplace_back(at.first, at.second, "unmatched recv: its sender never sends it");
  }
  if (!bad.empty()) {
    const auto& [r, i, why] = *std::min_element(bad.begin(), bad.end());
    fail(why, r, i, s.ranks[r][i]);
  }
}

// Pass 3: every (micro-batch, chunk) forwarded and fully backwarded on rank r. A missing action
// is reported at index = the length of the rank's list (one past its end).
void check_complete(const Schedule& s, int r) {
  std::set<Action, bool (*)(const Action&, const Action&)> done(
      [](const Action& x, const Action& y) {
        return std::tie(x.op, x.microbatch, x.chunk) < std::tie(y.op, y.microbatch, y.chunk);
      });
  for (const Action& a : s.ranks[r]) done.insert(a);
  auto has = [&](Op op, int mb, int c) { return done.count(Action{op, mb, c}) > 0; };
  const int n = static_cast<int>(s.ranks[r].size());
  for (int c = 0; c < s.v; ++c) {
    for (int mb = 0; mb < s.m; ++mb) {
      if (!s.runs_through(mb, c)) continue;  // Chimera: the other pipeline's micro-batch
      if (!has(Op::kForward, mb, c)) fail("missing forward", r, n, {Op::kForward, mb, c});
      if (!has(Op::kBackward, mb, c) && !has(Op::kBackwardInput, mb, c)) {
        fail("missing backward", r, n, {Op::kBackward, mb, c});
      }
      if (has(Op::kBackwardInput, mb, c) && !has(Op::kBackwardWeight, mb, c)) {
        fail("missing backward_weight (W)", r, n, {Op::kBackwardWeight, mb, c});
      }
    }
  }
}

}  // namespace

SimResult simulate(const Schedule& s, const Costs& costs) {
  if (s.p < 1 || s.m < 1 || s.v < 1 || static_cast<int>(s.ranks.size()) != s.p) {
    throw std::invalid_argument("schedule '" + s.name + "': p=" + std::to_string(s.p) + ", m=" +
                                std::to_string(s.m) + ", v=" + std::to_string(s.v) + " with " +
                                std::to_string(s.ranks.size()) + " rank lists");
  }
  for (int r = 0; r < s.p; ++r) check_rank(s, r);
  check_matching(s);
  for (int r = 0; r < s.p; ++r) check_complete(s, r);

  SimResult res;
  res.p = s.p, res.m = s.m, res.v = s.placement().chunks_per_microbatch();
  res.busy.assign(s.p, 0.0);
  res.peak_in_flight.assign(s.p, 0);
  res.start.resize(s.p);
  res.end.resize(s.p);
  std::vector<double> clock(s.p, 0.0);
  std::vector<size_t> pc(s.p, 0);
  std::vector<int> in_flight(s.p, 0);
  std::map<Msg, double> posted;  // message -> time its send was posted
  for (int r = 0; r < s.p; ++r) {
    res.start[r].assign(s.ranks[r].size(), 0.0);
    res.end[r].assign(s.ranks[r].size(), 0.0);
  }

  size_t left = s.num_actions();
  while (left > 0) {
    bool moved = false;
    for (int r = 0; r < s.p; ++r) {
      while (pc[r] < s.ranks[r].size()) {
        const int i = static_cast<int>(pc[r]);
        const Action& a = s.ranks[r][i];
        const double t0 = clock[r];
        if (is_recv(a.op)) {
          auto it = posted.find(message_of(s, r, a));
          if (it == posted.end()) break;  // blocked: the send has not happened yet
          clock[r] = std::max(clock[r], it->second);
        } else if (is_send(a.op)) {
          posted[message_of(s, r, a)] = clock[r];
        } else {
          clock[r] += costs.of(a.op, s.placement().chunks_per_microbatch());
          res.busy[r] += clock[r] - t0;
          if (a.op == Op::kForward) res.peak_in_flight[r] = std::max(res.peak_in_flight[r], ++in_flight[r]);
          if (a.op == Op::kBackward || a.op == Op::kBackwardWeight) --in_flight[r];
        }
        res.start[r][i] = t0;
        res.end[r][i] = clock[r];
        res.spans.push_back(make_span(r, a, s.v, t0, clock[r]));
        ++pc[r], --left, moved = true;
      }
    }
    if (!moved) {
      int r = 0;
      while (pc[r] >= s.ranks[r].size()) ++r;  // the lowest blocked rank
      const Action& a = s.ranks[r][pc[r]];
      const StageRef from = s.peer(r, a);
      std::string why = "deadlock: every rank with actions left waits at a recv; rank " +
                        std::to_string(r) + " waits for rank " + std::to_string(from.rank);
      if (pc[from.rank] < s.ranks[from.rank].size()) {
        why += ", itself blocked at " + to_string(s.ranks[from.rank][pc[from.rank]]);
      }
      fail(why, r, static_cast<int>(pc[r]), a);
    }
  }

  for (int r = 0; r < s.p; ++r) res.makespan = std::max(res.makespan, clock[r]);
  double idle = 0.0, busy = 0.0;
  for (int r = 0; r < s.p; ++r) idle += res.makespan - res.busy[r], busy += res.busy[r];
  res.bubble_fraction = res.makespan > 0 ? idle / (s.p * res.makespan) : 0.0;
  res.bubble_ratio = busy > 0 ? idle / busy : 0.0;
  return res;
}

}  // namespace llmp
