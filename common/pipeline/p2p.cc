// send_forward / recv_forward / send_backward / recv_backward over ProcessGroup's isend/irecv
// (see p2p.h). The peer rank and the tag come from the schedule, so the two ends always agree.
#include "common/pipeline/p2p.h"

#include <algorithm>

#include "common/runtime/check.h"

namespace llmp {
namespace {

/// The group rank of the other end of `a`, and the message's tag.
std::pair<int, int> route(const PipeLink& link, const Action& a) {
  return {link.schedule.peer(link.rank, a).rank, link.schedule.message_tag(link.rank, a)};
}

}  // namespace

void PendingSends::poll() {
  sends_.erase(std::remove_if(sends_.begin(), sends_.end(),
                              [](const auto& s) { return s.first->test(); }),
               sends_.end());
}

void PendingSends::wait_all() {
  for (auto& s : sends_) s.first->wait();
  sends_.clear();
}

void send_forward(const PipeLink& link, const Action& a, const Tensor& y, PendingSends* pending) {
  LLMP_CHECK(a.op == Op::kSendForward, to_string(a));
  const auto [peer, tag] = route(link, a);
  pending->add(link.pp.isend(y, peer, tag), y);  // counted as "send": 4·b·T·C bytes
}

void recv_forward(const PipeLink& link, const Action& a, Tensor& x) {
  LLMP_CHECK(a.op == Op::kRecvForward, to_string(a));
  const auto [peer, tag] = route(link, a);
  auto work = link.pp.irecv(x, peer, tag);
  work->set_label("recv_forward");  // the watchdog: "timed out ... in recv_forward from rank p"
  work->wait();
}

void send_backward(const PipeLink& link, const Action& a, const Tensor& dx, PendingSends* pending) {
  LLMP_CHECK(a.op == Op::kSendBackward, to_string(a));
  const auto [peer, tag] = route(link, a);
  pending->add(link.pp.isend(dx, peer, tag), dx);  // counted as "send": 4·b·T·C bytes
}

void recv_backward(const PipeLink& link, const Action& a, Tensor& dy) {
  LLMP_CHECK(a.op == Op::kRecvBackward, to_string(a));
  const auto [peer, tag] = route(link, a);
  auto work = link.pp.irecv(dy, peer, tag);
  work->set_label("recv_backward");
  work->wait();
}

}  // namespace llmp
