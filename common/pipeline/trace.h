// Chrome trace-event JSON for pipeline timelines: open in chrome://tracing or ui.perfetto.dev.
//
// Format: the Trace Event Format (Google, "Trace Event Format" document): complete events
//   {"name": "F3", "cat": "forward", "ph": "X", "ts": <µs>, "dur": <µs>, "pid": 0, "tid": <rank>}
// one track per rank (tid = rank, named "rank 0", "rank 1", ... by thread_name metadata events),
// categories forward, backward, send, recv, optimizer; "displayTimeUnit": "ms".
//
// Multi-rank use (the executor): every rank records its own spans (make_span in schedule.h),
// serialises them with spans_to_string, rank 0 gathers the strings (gather_spans: u8 bytes),
// parses them back with spans_from_string and calls write_trace once with all of them.
//
// Glossary: p pipeline stages (= tracks), µs microseconds.
#pragma once

#include <string>
#include <vector>

#include "common/pipeline/schedule.h"

namespace llmp {

struct TraceOptions {
  /// Microseconds per unit of Span::start/end: 1e6 for measured seconds (the default); for the
  /// simulator's cost units pick any scale, e.g. 1000 (one unit shows as 1 ms).
  double us_per_unit = 1e6;
  std::string process_name = "pipeline";  ///< the name of the single process track (pid 0)
};

/// The trace as a JSON string: metadata events (process_name, thread_name "rank r" and
/// thread_sort_index for r = 0..num_ranks-1), then one "X" event per span in the given order,
/// ts = start·us_per_unit, dur = (end-start)·us_per_unit, args {"rank": r}. Throws
/// std::invalid_argument for a span whose rank is outside 0..num_ranks-1 or whose end < start.
std::string trace_json(const std::vector<Span>& spans, int num_ranks,
                       const TraceOptions& options = TraceOptions{});

/// Writes trace_json(...) to `path` atomically: to "<path>.tmp" first, then rename, so a reader
/// never sees half a file. Throws std::runtime_error naming the path when it cannot write.
void write_trace(const std::string& path, const std::vector<Span>& spans, int num_ranks,
                 const TraceOptions& options = TraceOptions{});

/// Spans to a compact string (JSON array of [rank, start, end, label, category]) and back: what
/// each rank sends to rank 0. spans_from_string throws std::invalid_argument on malformed input.
std::string spans_to_string(const std::vector<Span>& spans);
std::vector<Span> spans_from_string(const std::string& text);

}  // namespace llmp
