// all_gather_strings: every rank's string (any bytes, any length) on every rank, through the
// ProcessGroup interface. What bookkeeping gathers: serialised trace spans, test failure messages.
//
// Two collectives: an all_gather of the N lengths (f64: exact up to 2^53 bytes), then an
// all_gather_v of the bytes (u8). Bytes counted in `group`'s CommStats:
//   all_gather (N-1)/N·8N + (N-1)/N·Σ_r n_r
// so pass a duplicate() of the technique's group to keep its CommStats to the technique's bytes.
//
// Glossary: N ranks in the group, n_r bytes of rank r's string.
#pragma once

#include <string>
#include <vector>

#include "common/comm/process_group.h"

namespace llmp {

/// Collective over `group`. Returns every rank's `mine`, indexed by group rank (this rank's own
/// string included), on every rank.
std::vector<std::string> all_gather_strings(ProcessGroup& group, const std::string& mine);

}  // namespace llmp
