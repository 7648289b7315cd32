// gather_spans: every rank's measured Spans to one rank, for the timeline and the Chrome trace.
//
// Bookkeeping, not algorithm: the caller passes a duplicate() of the pipeline group, so the
// pipeline group's CommStats keep counting only the activations and gradients the schedule
// moves. Each rank's spans travel as trace.h's compact string (spans_to_string: a few dozen bytes
// per action) through all_gather_strings (common/comm); every rank receives them all (a few KB
// per step), and only `root` parses them.
//
// Glossary: p ranks in the group; a span's start/end are seconds (wall_seconds) once shifted.
#pragma once

#include <vector>

#include "common/comm/process_group.h"
#include "common/pipeline/schedule.h"

namespace llmp {

/// Collective over `group`. Returns, on `root`, the spans of every rank in rank order, each with
/// `shift` (the sending rank's value) added to start and end; an empty vector elsewhere.
/// Traffic (counted in `group`'s CommStats, so pass a bookkeeping group): all_gather_strings'.
std::vector<Span> gather_spans(ProcessGroup& group, const std::vector<Span>& local, double shift,
                               int root = 0);

}  // namespace llmp
