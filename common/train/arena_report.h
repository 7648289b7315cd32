// The arena of a run (--arena_bytes, --defrag; common/tensor/arena.h): installed once per rank
// before the model is built, and its end-of-run figures. Kept here, in one place, so that every
// stage gets them through train_main.
//
// ZeRO-R's memory defragmentation (Rajbhandari et al. 2020, §6.3): an out-of-memory error with
// plenty of memory free, because long- and short-lived buffers interleave; contiguous regions
// for the long-lived ones cure it. The figure that shows it is the fragmentation at peak:
// largest free block / total free bytes at the moment the arena was fullest.
//
// Glossary: N_a arena capacity (bytes), peak used (bytes in allocated 64-byte-rounded blocks at
// the fullest moment), Σ free at peak (the free list walked at that moment).
#pragma once

#include <vector>

#include "common/comm/process_group.h"
#include "common/runtime/flags.h"
#include "common/train/strategy.h"

namespace llmp {

/// With cfg.arena_bytes > 0: creates this rank's arena (first fit, or --defrag's two regions)
/// and registers it for every CPU tensor made from now on. Call on every rank before the model.
/// Collective (all_ranks_ok): a block the host cannot give ends every rank with one line, exit 2.
void install_arena_if_asked(const TrainConfig& cfg);

/// The report row of the installed arena, or none: "arena peak used", measured by the arena's
/// used counter at its peak, next to N_a − Σ free at peak (the free list walked then): the two
/// agree only if every split and merge kept the blocks' sizes right.
std::vector<ReportRow> arena_report_rows();

/// Collective over `group` when an arena is installed (a no-op otherwise): rank 0 prints one
/// line per rank, "arena (first fit | defrag) rank r: capacity …, peak used …, at peak … free
/// in total, largest free block …: largest / total free 0.xx".
void print_arena_summary(ProcessGroup& group);

}  // namespace llmp
