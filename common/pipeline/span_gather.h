// gather_spans: every rank's measured Spans to one rank, for the timeline and the Chrome trace.
//
// Bookkeeping, not algorithm: it runs over a communicator of its own (a duplicate of the
// pipeline group's), so the pipeline group's CommStats keep counting only the activations and
// gradients the schedule moves. Each rank's spans travel as trace.h's compact string
// (spans_to_string: a few dozen bytes per action).
//
// Glossary: p ranks in the group; a span's start/end are seconds (MPI_Wtime) once shifted.
#pragma once

#include <mpi.h>

#include <vector>

#include "common/pipeline/schedule.h"

namespace llmp {

/// Collective over `comm`. Returns, on `root`, the spans of every rank in rank order, each with
/// `shift` (the sending rank's value) added to start and end; an empty vector elsewhere.
std::vector<Span> gather_spans(MPI_Comm comm, const std::vector<Span>& local, double shift,
                               int root = 0);

}  // namespace llmp
