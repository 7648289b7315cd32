// The end-of-run table: per rank, measured memory and bytes sent per step next to the closed
// forms each stage states (Strategy::report()). Collective over the group: rank 0 prints.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/comm/process_group.h"
#include "common/train/strategy.h"

namespace llmp {

/// A measurement agrees with its formula when |measured - formula| ≤ 1e-9·max(1, formula).
bool report_row_ok(const ReportRow& row);

/// Gathers every rank's rows (the same `what` list on every rank) and prints on rank 0:
///   what | formula | per rank "measured (expected)" | ok / DIFFERS
/// Returns on every rank once rank 0 has printed and flushed the table.
void print_report(ProcessGroup& group, const std::string& stage, int64_t psi,
                  const std::vector<ReportRow>& rows);

/// Prints this process's bytes per device, now and at their peak (MemoryTracker), as one line:
/// "memory of rank 0 by device (MemoryTracker): X now, peak Y on cuda; ... on the host".
/// train_main calls it on rank 0 after a device run's table.
void print_device_memory(Device device);

}  // namespace llmp
