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

/// The tensor and, on the clock group, its logical time: same peer, same tag.
void send_with_time(const PipeLink& link, const Action& a, const Tensor& t, double logical_time,
                    PendingSends* pending) {
  const auto [peer, tag] = route(link, a);
  pending->add(link.pp.isend(t, peer, tag), t);  // counted as "send": e·b·T·C bytes
  // A float holds the logical times exactly: sums of F = 1, B = 2, W = 1, far below 2^24.
  Tensor time = Tensor::empty({1}, DType::kF32, MemCategory::kCommBuffers);
  time.f32()[0] = static_cast<float>(logical_time);
  pending->add(link.clock.isend(time, peer, tag), time);  // bookkeeping: not in pp's CommStats
}

/// `label` names the wait for the watchdog: "timed out ... in recv_forward from rank p".
double recv_with_time(const PipeLink& link, const Action& a, Tensor& t, const char* label) {
  const auto [peer, tag] = route(link, a);
  Tensor time = Tensor::empty({1}, DType::kF32, MemCategory::kCommBuffers);
  std::shared_ptr<Work> data = link.pp.irecv(t, peer, tag);
  data->set_label(label);
  std::shared_ptr<Work> clock = link.clock.irecv(time, peer, tag);
  clock->set_label(label);
  clock->wait();
  data->wait();
  return time.f32()[0];
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

void send_forward(const PipeLink& link, const Action& a, const Tensor& y, double logical_time,
                  PendingSends* pending) {
  LLMP_CHECK(a.op == Op::kSendForward, to_string(a));
  send_with_time(link, a, y, logical_time, pending);
}

double recv_forward(const PipeLink& link, const Action& a, Tensor& x) {
  LLMP_CHECK(a.op == Op::kRecvForward, to_string(a));
  return recv_with_time(link, a, x, "recv_forward");
}

void send_backward(const PipeLink& link, const Action& a, const Tensor& dx, double logical_time,
                   PendingSends* pending) {
  LLMP_CHECK(a.op == Op::kSendBackward, to_string(a));
  send_with_time(link, a, dx, logical_time, pending);
}

double recv_backward(const PipeLink& link, const Action& a, Tensor& dy) {
  LLMP_CHECK(a.op == Op::kRecvBackward, to_string(a));
  return recv_with_time(link, a, dy, "recv_backward");
}

}  // namespace llmp
