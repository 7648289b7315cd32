// The emulator's streams and events (stream_queue.h): a stream is a queue of StreamOps run in
// order, an event the count of operations its stream had been given when it was recorded.
//
// Glossary: a stream's `given` counts the operations ever queued on it, `finished` those done; an
// event recorded on stream s is complete once s.finished >= the event's mark (s.given then).
#include <sched.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <string>

#include "kernels/cuda/emulator/stream_queue.h"

struct CUstream_st {
  uint64_t id = 0;
  std::deque<std::unique_ptr<llmp::cuda::emu::StreamOp>> queue;
  bool head_started = false;
  uint64_t given = 0, finished = 0;
};

struct CUevent_st {
  uint64_t stream_id = 0;  // 0: never recorded (complete)
  uint64_t mark = 0;
};

namespace llmp::cuda::emu {
namespace {

struct Streams {
  std::map<uint64_t, CUstream_st*> live;  // by id; the legacy default stream is id 1
  uint64_t next_id = 1;
  bool in_progress = false;  // progress() is not re-entered from an operation's done()
};

Streams& streams() {
  static Streams* s = [] {
    auto* out = new Streams;  // never destroyed: work may be queued at exit
    auto* legacy = new CUstream_st;
    legacy->id = out->next_id++;
    out->live[legacy->id] = legacy;
    return out;
  }();
  return *s;
}

CUstream_st* resolve(cudaStream_t s) { return s ? s : streams().live.at(1); }

bool reached(uint64_t stream_id, uint64_t mark) {
  auto it = streams().live.find(stream_id);
  return it == streams().live.end() || it->second->finished >= mark;  // destroyed: drained
}

double hang_seconds() {
  const char* env = std::getenv("LLMP_CUDA_EMULATOR_HANG_S");
  return env && *env ? std::atof(env) : 300.0;
}

// Loops progress() until done(); past hang_seconds() ends the process naming `stream`'s head.
template <typename Done>
void wait_until(Done done, CUstream_st* stream, const char* call) {
  const auto t0 = std::chrono::steady_clock::now();
  const double limit = hang_seconds();
  for (;;) {
    progress();
    if (done()) return;
    sched_yield();
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (waited > limit) {
      const std::string what = stream && !stream->queue.empty() ? stream->queue.front()->what()
                                                                : std::string("(nothing queued)");
      std::fprintf(stderr,
                   "CUDA emulator: %s has waited %.0f s for %s; on a GPU this would hang "
                   "(LLMP_CUDA_EMULATOR_HANG_S sets the limit)\n",
                   call, waited, what.c_str());
      std::abort();
    }
  }
}

// A stream waiting for an event (cudaStreamWaitEvent): done once the event's mark is reached.
class EventWait final : public StreamOp {
 public:
  EventWait(uint64_t stream_id, uint64_t mark) : stream_id_(stream_id), mark_(mark) {}
  void start() override {}
  bool done() override { return reached(stream_id_, mark_); }
  std::string what() const override { return "cudaStreamWaitEvent"; }

 private:
  uint64_t stream_id_, mark_;
};

}  // namespace

void enqueue(cudaStream_t stream, std::unique_ptr<StreamOp> op) {
  CUstream_st* s = resolve(stream);
  s->queue.push_back(std::move(op));
  ++s->given;
  progress();
}

void progress() {
  Streams& all = streams();
  if (all.in_progress) return;
  all.in_progress = true;
  for (bool moved = true; moved;) {  // again while something finished: a waiter may be freed
    moved = false;
    for (auto& [id, s] : all.live) {
      while (!s->queue.empty()) {
        if (!s->head_started) {
          s->head_started = true;
          s->queue.front()->start();
        }
        if (!s->queue.front()->done()) break;
        s->queue.pop_front();
        s->head_started = false;
        ++s->finished;
        moved = true;
      }
    }
  }
  all.in_progress = false;
}

void wait_for_stream(cudaStream_t stream) {
  CUstream_st* s = resolve(stream);
  if (s->queue.empty()) return;
  wait_until([s] { return s->queue.empty(); }, s, "a launch or copy on a stream");
}

}  // namespace llmp::cuda::emu

using llmp::cuda::emu::resolve;
using llmp::cuda::emu::streams;

cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  return cudaStreamCreateWithFlags(stream, cudaStreamDefault);
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags) {
  if (flags > cudaStreamNonBlocking) return cudaErrorInvalidValue;
  auto* s = new CUstream_st;
  s->id = streams().next_id++;
  streams().live[s->id] = s;
  *stream = s;
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (!stream || !streams().live.count(stream->id)) return cudaErrorInvalidResourceHandle;
  llmp::cuda::emu::wait_for_stream(stream);
  streams().live.erase(stream->id);
  delete stream;
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  llmp::cuda::emu::count_call(llmp::cuda::emu::CallKind::kSync, "cudaStreamSynchronize");
  CUstream_st* s = resolve(stream);
  llmp::cuda::emu::wait_until([s] { return s->queue.empty(); }, s, "cudaStreamSynchronize");
  return cudaSuccess;
}
cudaError_t cudaStreamQuery(cudaStream_t stream) {
  llmp::cuda::emu::progress();
  if (resolve(stream)->queue.empty()) return cudaSuccess;
  llmp::cuda::emu::note_not_ready();
  return cudaErrorNotReady;
}
cudaError_t cudaDeviceSynchronize() {
  llmp::cuda::emu::count_call(llmp::cuda::emu::CallKind::kSync, "cudaDeviceSynchronize");
  for (auto& [id, s] : streams().live) {
    CUstream_st* one = s;
    llmp::cuda::emu::wait_until([one] { return one->queue.empty(); }, one, "cudaDeviceSynchronize");
  }
  return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned /*flags*/) {
  if (!event) return cudaErrorInvalidResourceHandle;
  if (llmp::cuda::emu::reached(event->stream_id, event->mark)) return cudaSuccess;
  llmp::cuda::emu::enqueue(
      stream, std::make_unique<llmp::cuda::emu::EventWait>(event->stream_id, event->mark));
  return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t* event) {
  return cudaEventCreateWithFlags(event, cudaEventDefault);
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned /*flags*/) {
  *event = new CUevent_st;
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (!event) return cudaErrorInvalidResourceHandle;
  delete event;
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (!event) return cudaErrorInvalidResourceHandle;
  CUstream_st* s = resolve(stream);
  event->stream_id = s->id;
  event->mark = s->given;
  return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t event) {
  if (!event) return cudaErrorInvalidResourceHandle;
  llmp::cuda::emu::progress();
  if (llmp::cuda::emu::reached(event->stream_id, event->mark)) return cudaSuccess;
  llmp::cuda::emu::note_not_ready();
  return cudaErrorNotReady;
}
cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  llmp::cuda::emu::count_call(llmp::cuda::emu::CallKind::kSync, "cudaEventSynchronize");
  if (!event) return cudaErrorInvalidResourceHandle;
  const uint64_t id = event->stream_id, mark = event->mark;
  auto it = streams().live.find(id);
  llmp::cuda::emu::wait_until([id, mark] { return llmp::cuda::emu::reached(id, mark); },
                              it == streams().live.end() ? nullptr : it->second,
                              "cudaEventSynchronize");
  return cudaSuccess;
}
cudaError_t cudaMallocHost(void** p, size_t bytes) {
  llmp::cuda::emu::count_call(llmp::cuda::emu::CallKind::kAlloc, "cudaMallocHost", double(bytes));
  *p = std::malloc(bytes == 0 ? 1 : bytes);
  if (*p) llmp::cuda::emu::note_pinned(*p, bytes, true);
  return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaFreeHost(void* p) {
  if (p) llmp::cuda::emu::note_pinned(p, 0, false);
  std::free(p);
  return cudaSuccess;
}
