// Pipeline schedules as data: which rank runs which forward/backward, and in which order.
//
// A schedule is a list of actions per rank. The executor (MPI + GPT model) walks each rank's list
// in order; the simulator (simulator.h) replays all lists with per-op costs to check them and to
// time them; timeline.h and trace.h draw the result. Nothing here knows about MPI or tensors.
//
// Papers, one generator each:
//   naive            one micro-batch in the pipe at a time (no overlap): the starting point.
//   gpipe            Huang et al. 2019, "GPipe": all m forwards, then all m backwards.
//   1f1b             Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU
//                    Clusters Using Megatron-LM" (PipeDream-Flush, §2.2.1): warm-up, steady state
//                    of one forward then one backward, cool-down.
//   interleaved_1f1b same paper §2.2.2: each rank holds v model chunks (Megatron's schedule).
//   zb_h1            Qi et al. 2023, "Zero Bubble Pipeline Parallelism" §3.1 (ZB-H1): backward
//                    split into B (input gradient) and W (weight gradient); W fills the bubbles.
//   chimera          Li & Hoefler 2021, "Chimera: Efficiently Training Large-Scale Neural
//                    Networks with Bidirectional Pipelines" §3: two pipelines over the same ranks
//                    in opposite directions, each rank one stage of each (schedule_chimera.cc).
//
// Glossary:
//   p  pipeline stages (ranks of the pipeline group), rank r in 0..p-1
//   m  micro-batches per optimizer step, micro-batch i in 0..m-1
//   v  model chunks per rank (v = 1 except interleaved), chunk c in 0..v-1
//   virtual stage s = c·p + r (Megatron's interleaved assignment), 0..p·v-1; layers are cut into
//      p·v equal slices and virtual stage s holds slice s. Data flows s -> s+1 (forward) and
//      s+1 -> s (backward), so the last rank's chunk c feeds rank 0's chunk c+1.
//   pipeline: a chain of virtual stages a micro-batch flows through. Every schedule has one
//      except Chimera, which has two over the same ranks (Placement below): "down", stage s on
//      rank s (chunk 0), and "up", stage s on rank p-1-s (chunk 1). Each holds the whole model
//      cut into p stages, so every stage is held twice (ranks s and p-1-s), and each micro-batch
//      runs through one of the two pipelines (Schedule::microbatch_pipeline).
//   warm-up / steady state / cool-down: the three phases of 1F1B-style schedules.
//   bubble: time a rank sits idle inside one optimizer step (see simulator.h for the fraction).
//
// Communication semantics (what the executor implements with isend/irecv, and the simulator
// checks): a send never blocks (buffered); a recv blocks until the matching send has happened.
// A send_forward from virtual stage s reaches the rank holding s+1; a send_backward reaches s-1.
// The first virtual stage has no recv_forward (it reads tokens) and no send_backward; the last
// has no send_forward and no recv_backward (it computes the loss and starts the backward).
// Generators put each recv right before the compute that needs it and each send right after the
// compute that produced it.
#pragma once

#include <string>
#include <vector>

namespace llmp {

/// What one step of a rank's schedule does.
enum class Op {
  kForward,         ///< F: forward of one micro-batch through one chunk; keeps its activations
  kBackward,        ///< B: full backward (input and weight gradients); frees the activations
  kBackwardInput,   ///< B of zero bubble: input gradient only (what the previous stage waits for)
  kBackwardWeight,  ///< W of zero bubble: weight gradient; frees the activations
  kSendForward,     ///< send_forward: this chunk's output activations to virtual stage s+1
  kRecvForward,     ///< recv_forward: this chunk's input activations from virtual stage s-1
  kSendBackward,    ///< send_backward: gradient w.r.t. this chunk's input, to virtual stage s-1
  kRecvBackward,    ///< recv_backward: gradient w.r.t. this chunk's output, from stage s+1
};

/// One step of a rank's schedule. For sends and recvs, `chunk` is this rank's chunk (the one that
/// produced the data, or the one that will consume it), not the peer's.
struct Action {
  Op op = Op::kForward;
  int microbatch = 0;  ///< 0..m-1
  int chunk = 0;       ///< model chunk on this rank, 0..v-1
  bool operator==(const Action& o) const {
    return op == o.op && microbatch == o.microbatch && chunk == o.chunk;
  }
};

/// A (rank, chunk) pair: where a virtual stage lives.
struct StageRef {
  int rank = 0;
  int chunk = 0;
};

/// Where each virtual stage lives: which (rank, chunk) holds stage s of pipeline q, and back.
/// One pipeline (every schedule but Chimera): stage s = chunk·p + rank, p·v stages. Two
/// pipelines (Chimera, v = 2): chunk c of every rank belongs to pipeline c; pipeline 0 ("down")
/// puts stage s on rank s, pipeline 1 ("up") on rank p-1-s; p stages each. Shared by Schedule
/// (who talks to whom) and GPTPartition (which layers a chunk holds), so both agree.
struct Placement {
  int p = 1;          ///< ranks
  int v = 1;          ///< chunks per rank
  int pipelines = 1;  ///< 1, or 2 for Chimera (then v = 2)

  /// Virtual stages in ONE pipeline: p·v / pipelines (the model is cut into this many slices).
  int num_stages() const { return p * v / pipelines; }
  /// The pipeline chunk `chunk` belongs to: 0, or the chunk itself for Chimera.
  int pipeline_of(int chunk) const { return pipelines == 1 ? 0 : chunk; }
  /// The stage, within its pipeline, of chunk `chunk` on `rank`.
  int stage(int rank, int chunk) const {
    if (pipelines == 1) return chunk * p + rank;
    return chunk == 0 ? rank : p - 1 - rank;
  }
  /// Where stage s of pipeline q lives.
  StageRef where(int s, int q = 0) const {
    if (pipelines == 1) return {s % p, s / p};
    return {q == 0 ? s : p - 1 - s, q};
  }
  /// How many of a rank's chunks one micro-batch passes through: v / pipelines (v for
  /// interleaved, 1 for Chimera). A chunk op costs 1/this of a whole rank's work (simulator.h).
  int chunks_per_microbatch() const { return v / pipelines; }
};

/// The standard name of an op: "forward", "backward", "backward_input", "backward_weight",
/// "send_forward", "recv_forward", "send_backward", "recv_backward".
const char* op_name(Op op);

/// True for F, B and W (the ops that take compute time); false for sends and recvs.
bool is_compute(Op op);

/// Trace category of an op: "forward", "backward" (B and W too), "send" or "recv".
const char* op_category(Op op);

/// "recv_forward(mb=3, chunk=1)": for error messages and logs.
std::string to_string(const Action& a);

/// Short label for timelines and traces: letter F/B/W (zero bubble: B is the input gradient, W
/// the weight gradient) followed by the micro-batch, e.g. "F3", "B3", "W3". Chunks: upper case
/// for even chunks, lower case for odd ("F3" chunk 0, "f3" chunk 1); when v > 2 the chunk is
/// appended too ("f3.1"). Sends/recvs: "sf3", "rf3", "sb3", "rb3" (plus ".c" when v > 1).
std::string action_label(const Action& a, int v);

/// A schedule: p ranks, m micro-batches, v chunks per rank, and each rank's ordered actions.
struct Schedule {
  std::string name;  ///< "naive", "gpipe", "1f1b", "interleaved_1f1b", "zb_h1" or hand-built
  int p = 1;
  int m = 1;
  int v = 1;
  int pipelines = 1;  ///< 2 for Chimera (Placement); then v = 2 and chunk c is pipeline c
  /// Chimera: [i] = the pipeline micro-batch i runs through (0 down, 1 up). Empty: all 0.
  std::vector<int> microbatch_pipeline;
  std::vector<std::vector<Action>> ranks;  ///< ranks[r]: rank r's actions, in execution order

  Placement placement() const { return {p, v, pipelines}; }
  /// Virtual stage of chunk `chunk` on `rank`, within its pipeline: chunk·p + rank (Megatron
  /// interleaved assignment); Chimera: rank (down) or p-1-rank (up).
  int virtual_stage(int rank, int chunk) const { return placement().stage(rank, chunk); }
  /// Virtual stages per pipeline: p·v, or p for Chimera.
  int num_virtual_stages() const { return placement().num_stages(); }
  /// Where virtual stage s of pipeline q lives: rank s mod p, chunk s / p (Chimera: Placement).
  StageRef stage_of(int virtual_stage, int pipeline = 0) const {
    return placement().where(virtual_stage, pipeline);
  }
  /// The pipeline micro-batch i runs through: microbatch_pipeline[i], or 0.
  int pipeline_of_microbatch(int i) const {
    return microbatch_pipeline.empty() ? 0 : microbatch_pipeline.at(i);
  }
  /// True when micro-batch i passes through chunk c (every chunk with one pipeline; Chimera:
  /// the chunk of its pipeline only).
  bool runs_through(int i, int c) const {
    return pipelines == 1 || placement().pipeline_of(c) == pipeline_of_microbatch(i);
  }
  bool is_first_stage(int rank, int chunk) const { return virtual_stage(rank, chunk) == 0; }
  bool is_last_stage(int rank, int chunk) const {
    return virtual_stage(rank, chunk) == num_virtual_stages() - 1;
  }

  /// The other end of a send or recv action `a` on `rank`: send_forward/recv_backward talk to
  /// virtual stage s+1, recv_forward/send_backward to s-1. Throws std::invalid_argument for a
  /// compute op or when the peer stage does not exist (e.g. send_forward on the last stage).
  StageRef peer(int rank, const Action& a) const;

  /// MPI tag for the message carried by send/recv action `a` on `rank`. Sender and receiver
  /// compute the same tag: (direction·p·v + pipeline·S + receiving virtual stage)·m +
  /// micro-batch, where direction is 0 forward, 1 backward and S = num_virtual_stages() (the
  /// pipeline term is 0 but for Chimera). Range 0..2·p·v·m-1.
  int message_tag(int rank, const Action& a) const;

  /// Total number of actions over all ranks.
  size_t num_actions() const;
};

/// One line per rank, "rank 0: F0 sf0 F1 sf1 ... ": for logs and failing tests.
std::string to_string(const Schedule& s);

// ---- building blocks for generators and hand-built schedules.

/// An empty schedule (p ranks with no actions). Throws std::invalid_argument unless p, m, v ≥ 1.
Schedule empty_schedule(const std::string& name, int p, int m, int v = 1);

/// Appends forward (mb, chunk) to `rank`: recv_forward (unless first virtual stage), F,
/// send_forward (unless last virtual stage).
void append_forward(Schedule& s, int rank, int microbatch, int chunk = 0);
/// Appends the full backward: recv_backward (unless last stage), B, send_backward (unless first).
void append_backward(Schedule& s, int rank, int microbatch, int chunk = 0);
/// Zero bubble: recv_backward (unless last stage), B-input, send_backward (unless first).
void append_backward_input(Schedule& s, int rank, int microbatch, int chunk = 0);
/// Zero bubble: W, the weight gradient (local, no communication).
void append_backward_weight(Schedule& s, int rank, int microbatch, int chunk = 0);

// ---- generators. All throw std::invalid_argument with the offending values when p < 1, m < 1
// ---- or the schedule's own constraint fails.

/// Naive pipeline: micro-batch i goes forward through every stage and back before i+1 starts
/// (with m = 1, the whole batch at once). Bubble fraction (p-1)/p.
Schedule naive(int p, int m = 1);

/// GPipe (Huang et al. 2019): every rank runs F0..F(m-1), then B(m-1)..B0 (reverse order, as
/// the gradients return last-in first-out). Peak in-flight micro-batches per rank: m.
Schedule gpipe(int p, int m);

/// 1F1B / PipeDream-Flush (Narayanan et al. 2021 §2.2.1). Rank r: warm-up of
/// min(p-r-1, m) forwards; steady state of one forward then one backward; cool-down of the
/// remaining backwards. Any m ≥ 1 (m < p just shortens the steady state). Peak in-flight
/// micro-batches on rank r: min(p-r, m).
Schedule one_f_one_b(int p, int m);

/// Interleaved 1F1B (Narayanan et al. 2021 §2.2.2, Megatron's
/// forward_backward_pipelining_with_interleaving). Each rank holds v chunks (virtual stages r,
/// r+p, ..., r+(v-1)p). Micro-batches go through the chunks in groups of p, so Megatron requires
/// m % p == 0: "number of micro-batches m=6 is not divisible by pipeline stages p=4;
/// interleaved_1f1b needs m % p == 0". Rank r warm-up: min((p-r-1)·2 + (v-1)·p, m·v) chunk
/// forwards (all m·v when m == p). Bubble time / ideal time = (1/v)·(p-1)/m. Needs v ≥ 1;
/// v = 1 gives exactly one_f_one_b.
Schedule interleaved_1f1b(int p, int m, int v);

/// ZB-H1 (Qi et al. 2023 §3.1): the 1F1B order with each backward split into B (input gradient,
/// sent to the previous stage at once) and W (weight gradient, local). Rank r defers its first
/// r W's, so its steady state is F B W after a warm-up of min(p-r-1, m) forwards and r
/// F B pairs; the deferred W's fill the cool-down. Peak in-flight micro-batches (F done, W not
/// done) min(p, m) on every rank: the same peak as 1F1B's rank 0. Any m ≥ 1.
Schedule zb_h1(int p, int m);

/// Chimera (Li & Hoefler 2021 §3.2-3.5): p ranks (p even), two pipelines in opposite
/// directions (Placement), m micro-batches taken in units of p: in each unit the first p/2 go
/// down, the last p/2 up ("direct concatenation" of basic units when m > p). Needs an even p
/// and m % p == 0: "chimera needs an even p and m % p == 0 (units of p micro-batches, half per
/// direction); got m=6, p=4".
/// The order on each rank is the list schedule of schedule_chimera.cc (unit costs F = B = 1,
/// as the paper's figures): bubble fraction (p-2)/(2m+p-2), against 1F1B's (p-1)/(m+p-1).
Schedule chimera(int p, int m);

/// By name: "naive", "gpipe", "1f1b", "interleaved_1f1b", "zb_h1", "chimera". v must be 1
/// except for interleaved_1f1b (chimera's two chunks are implied: pass v = 1 or 2). Throws std::invalid_argument naming the known schedules for an unknown name.
Schedule make_schedule(const std::string& name, int p, int m, int v = 1);

/// Names accepted by make_schedule, in reading order.
std::vector<std::string> schedule_names();

/// Throws std::invalid_argument("layers 6 not divisible by p·v = 4 (p=2, v=2)") unless
/// num_layers % (p·v) == 0. The executor's check before cutting the model into virtual stages.
/// With two pipelines (Chimera) the model is cut into p·v/2 = p stages: "layers 6 not divisible
/// by p = 4 stages per pipeline (chimera)".
void check_layers_divisible(int num_layers, int p, int v, int pipelines = 1);

/// Layers [first, last) of virtual stage (rank, chunk): slice s = chunk·p + rank of num_layers
/// cut into p·v equal slices. Calls check_layers_divisible.
struct LayerRange {
  int first = 0;
  int last = 0;
};
LayerRange layer_range(int num_layers, int p, int v, int rank, int chunk);

/// One timed interval on one rank: a simulated action (cost units) or a measured one (seconds).
/// The common currency of simulator.h, timeline.h and trace.h; the executor records one per
/// action it runs (and "optimizer" spans for the step), rank 0 gathers them.
struct Span {
  int rank = 0;
  double start = 0.0;
  double end = 0.0;
  std::string label;     ///< "F3", "B3", "W3", "f3", "rf3", "opt", ...
  std::string category;  ///< "forward", "backward", "send", "recv" or "optimizer"
};

/// The span of action `a` of a schedule with v chunks on `rank`: label action_label(a, v),
/// category op_category(a.op).
Span make_span(int rank, const Action& a, int v, double start, double end);

}  // namespace llmp
