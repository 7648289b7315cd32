// The planner's report: the inputs, the best plans with their breakdown (memory by category on
// the rank that needs the most, seconds by component, MFU, where each group sits), and the
// alternatives that lost with the reason each lost.
#pragma once

#include <string>

#include "tools/plan/input.h"
#include "tools/plan/search.h"

namespace llmp::plan {

/// One plan's breakdown, several lines, each starting with `indent`.
std::string render_plan(const PlanCost& c, const Cluster& cluster, const std::string& indent);

/// The whole report for `in` and the search's result.
std::string render_report(const PlanInput& in, const SearchResult& res);

}  // namespace llmp::plan
