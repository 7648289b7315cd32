// Point-to-point communication between pipeline stages: send_forward, recv_forward,
// send_backward, recv_backward (the names of Megatron-LM's p2p_communication.py).
//
//   send_forward   activations y (b,T,C) of virtual stage s   ->  rank of s+1     sends e·b·T·C
//   recv_forward   activations x (b,T,C) of virtual stage s   <-  rank of s-1
//   send_backward  gradient dL/dx (b,T,C) of stage s's input  ->  rank of s-1     sends e·b·T·C
//   recv_backward  gradient dL/dy (b,T,C) of stage s's output <-  rank of s+1
//
// e: bytes per element of the walk's activations, 4 in fp32 and 2 under --precision bf16 / fp16
// (the messages are the activations as stored).
//
// The semantics are schedule.h's, which the simulator checks: a send never blocks (isend; the
// message is buffered until the peer takes it), a recv blocks until the matching send has been
// posted (irecv + wait). Every message carries the tag Schedule::message_tag (direction, receiving
// virtual stage, micro-batch), so a message can only be taken by the recv it was meant for and a
// schedule bug shows up as a hang in the simulator's tests, not as silently swapped tensors.
//
// The sender's tensor must stay alive and unchanged until the send completes: PendingSends holds
// it with its Work, and the executor drains the list (test() after each action, wait() at the
// end of the step: "sends complete by the end of the step").
//
// Each message also carries its sender's logical time (logical_clock.h): the send posts a second,
// one-float message with the same peer and tag on `PipeLink::clock`, a duplicate() of the
// pipeline group, and the recv takes both. Within one communicator MPI delivers messages of the
// same (source, tag) in the order they were sent, and each tag names one (direction, virtual
// stage, micro-batch), so the time taken is the time of the tensor taken. Being on another group,
// these 4 bytes per message stay out of the pipeline group's CommStats: the technique's bytes
// per step are exactly the activations and gradients the schedule moves.
//
// Glossary: p pipeline stages, m micro-batches, v chunks per rank, s virtual stage, b micro-batch
// size (sequences), T sequence length, C channels.
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "common/comm/process_group.h"
#include "common/pipeline/schedule.h"
#include "common/tensor/tensor.h"

namespace llmp {

/// Sends that are in flight, each with the tensor it reads from.
class PendingSends {
 public:
  void add(std::shared_ptr<Work> work, Tensor t) { sends_.emplace_back(std::move(work), std::move(t)); }
  /// Drops the sends that have completed (releasing their tensors); does not block.
  void poll();
  /// Blocks until every send has completed, then releases all tensors.
  void wait_all();
  size_t size() const { return sends_.size(); }

 private:
  std::vector<std::pair<std::shared_ptr<Work>, Tensor>> sends_;
};

/// Where and how a rank talks to its neighbours: the pipeline group, the schedule (peers,
/// tags), and the bookkeeping group the logical times travel on (a duplicate() of `pp`, same
/// ranks). `rank` is this rank in `pp`.
struct PipeLink {
  ProcessGroup& pp;
  const Schedule& schedule;
  int rank;
  ProcessGroup& clock;
};

/// send_forward(a): isend of the output activations `y` of chunk a.chunk, micro-batch
/// a.microbatch, to the rank of the next virtual stage, with the sender's logical time
/// `logical_time` (logical_clock.h) on link.clock. Non-blocking; both tensors go to `pending`.
void send_forward(const PipeLink& link, const Action& a, const Tensor& y, double logical_time,
                  PendingSends* pending);

/// recv_forward(a): blocks until the input activations of (a.microbatch, a.chunk) from the
/// previous virtual stage are in `x` (preallocated, b·T·C floats). Returns the logical time
/// the sender attached.
double recv_forward(const PipeLink& link, const Action& a, Tensor& x);

/// send_backward(a): isend of the gradient `dx` w.r.t. the input of (a.microbatch, a.chunk) to
/// the rank of the previous virtual stage, with the sender's logical time. Non-blocking; both
/// tensors go to `pending`.
void send_backward(const PipeLink& link, const Action& a, const Tensor& dx, double logical_time,
                   PendingSends* pending);

/// recv_backward(a): blocks until the gradient w.r.t. the output of (a.microbatch, a.chunk) from
/// the next virtual stage is in `dy` (preallocated, b·T·C floats). Returns the sender's logical
/// time.
double recv_backward(const PipeLink& link, const Action& a, Tensor& dy);

}  // namespace llmp
