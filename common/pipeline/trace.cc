// Chrome trace-event writer on nlohmann::json (Debian's nlohmann-json3-dev). See trace.h.
//
// Glossary: µs microseconds, tid track (= rank), ph event phase ("X" complete, "M" metadata).
#include "common/pipeline/trace.h"

#include <cstdio>
#include <fstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "common/runtime/signals.h"

namespace llmp {

using nlohmann::json;

namespace {
json metadata(const char* name, int tid, const json& args) {
  json e = {{"name", name}, {"ph", "M"}, {"pid", 0}, {"args", args}};
  if (tid >= 0) e["tid"] = tid;
  return e;
}
}  // namespace

std::string trace_json(const std::vector<Span>& spans, int num_ranks, const TraceOptions& options) {
  json events = json::array();
  events.push_back(metadata("process_name", -1, {{"name", options.process_name}}));
  for (int r = 0; r < num_ranks; ++r) {
    events.push_back(metadata("thread_name", r, {{"name", "rank " + std::to_string(r)}}));
    events.push_back(metadata("thread_sort_index", r, {{"sort_index", r}}));
  }
  for (const Span& s : spans) {
    if (s.rank < 0 || s.rank >= num_ranks || s.end < s.start) {
      throw std::invalid_argument("trace: span '" + s.label + "' on rank " +
                                  std::to_string(s.rank) + " of " + std::to_string(num_ranks) +
                                  " from " + std::to_string(s.start) + " to " +
                                  std::to_string(s.end));
    }
    events.push_back({{"name", s.label},
                      {"cat", s.category},
                      {"ph", "X"},
                      {"ts", s.start * options.us_per_unit},
                      {"dur", (s.end - s.start) * options.us_per_unit},
                      {"pid", 0},
                      {"tid", s.rank},
                      {"args", {{"rank", s.rank}}}});
  }
  return json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump(1);
}

void write_trace(const std::string& path, const std::vector<Span>& spans, int num_ranks,
                 const TraceOptions& options) {
  const std::string text = trace_json(spans, num_ranks, options);
  const std::string tmp = path + ".tmp";
  set_temp_file_for_signals(tmp);  // SIGINT / SIGTERM while writing: the handler unlinks it
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text << "\n";
    if (!out.flush()) {
      clear_temp_file_for_signals();
      throw std::runtime_error("trace: cannot write " + tmp);
    }
  }
  const bool renamed = std::rename(tmp.c_str(), path.c_str()) == 0;
  if (!renamed) std::remove(tmp.c_str());
  clear_temp_file_for_signals();
  if (!renamed) throw std::runtime_error("trace: cannot rename " + tmp + " to " + path);
}

std::string spans_to_string(const std::vector<Span>& spans) {
  json out = json::array();
  for (const Span& s : spans) out.push_back({s.rank, s.start, s.end, s.label, s.category});
  return out.dump();
}

std::vector<Span> spans_from_string(const std::string& text) {
  std::vector<Span> spans;
  try {
    for (const json& e : json::parse(text)) {
      spans.push_back(Span{e.at(0).get<int>(), e.at(1).get<double>(), e.at(2).get<double>(),
                           e.at(3).get<std::string>(), e.at(4).get<std::string>()});
    }
  } catch (const json::exception& e) {
    throw std::invalid_argument(std::string("spans_from_string: malformed input: ") + e.what());
  }
  return spans;
}

}  // namespace llmp
