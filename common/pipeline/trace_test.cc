// The Chrome trace: parses back with nlohmann, one track per rank, the spans as "X" events in
// microseconds; the file appears atomically; spans survive the string round trip.
//
// Glossary: p pipeline stages (tracks), µs microseconds.
#include "common/pipeline/trace.h"

#include <cstdio>
#include <fstream>
#include <set>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/pipeline/simulator.h"

namespace llmp {
namespace {

using nlohmann::json;

TEST(Trace, SimulatedScheduleParsesBackWithOneTrackPerRank) {
  const Schedule s = one_f_one_b(2, 2);
  const SimResult r = simulate(s);
  TraceOptions opt;
  opt.us_per_unit = 1000.0;  // one cost unit = 1 ms
  const json t = json::parse(trace_json(r.spans, s.p, opt));
  EXPECT_EQ(t.at("displayTimeUnit"), "ms");
  std::set<std::string> threads;
  int complete = 0, forwards = 0;
  for (const json& e : t.at("traceEvents")) {
    if (e.at("ph") == "M" && e.at("name") == "thread_name") {
      threads.insert(e.at("args").at("name").get<std::string>());
      continue;
    }
    if (e.at("ph") != "X") continue;
    ++complete;
    EXPECT_EQ(e.at("pid"), 0);
    if (e.at("cat") == "forward") ++forwards;
  }
  EXPECT_EQ(threads, (std::set<std::string>{"rank 0", "rank 1"}));
  EXPECT_EQ(complete, static_cast<int>(s.num_actions()));
  EXPECT_EQ(forwards, s.p * s.m);
  // Rank 1 runs rf0 [0,1) F0 [1,2) B0 [2,3): find its B0.
  bool found = false;
  for (const json& e : t.at("traceEvents")) {
    if (e.at("ph") == "X" && e.at("tid") == 1 && e.at("name") == "B0") {
      EXPECT_EQ(e.at("cat"), "backward");
      EXPECT_DOUBLE_EQ(e.at("ts").get<double>(), 2000.0);
      EXPECT_DOUBLE_EQ(e.at("dur").get<double>(), 1000.0);
      found = true;
    }
  }
  EXPECT_TRUE(found);
}

TEST(Trace, WritesAtomicallyAndRejectsBadSpans) {
  const std::string dir = ::testing::TempDir();
  const std::string path = dir + "/pipeline_trace.json";
  const std::vector<Span> spans = {{0, 0.5, 0.75, "F0", "forward"},
                                   {1, 1.0, 1.25, "opt", "optimizer"}};
  write_trace(path, spans, 2);
  std::ifstream in(path);
  const json t = json::parse(in);
  EXPECT_FALSE(std::ifstream(path + ".tmp").good());  // renamed away
  const json& last = t.at("traceEvents").back();
  EXPECT_EQ(last.at("cat"), "optimizer");
  EXPECT_DOUBLE_EQ(last.at("ts").get<double>(), 1.0e6);  // seconds -> µs by default
  EXPECT_DOUBLE_EQ(last.at("dur").get<double>(), 0.25e6);
  EXPECT_THROW(trace_json(spans, 1), std::invalid_argument);  // rank 1 of 1 rank
  EXPECT_THROW(write_trace(dir + "/no/such/dir/t.json", spans, 2), std::runtime_error);
}

TEST(Trace, SpansSurviveTheStringRoundTrip) {
  const SimResult r = simulate(interleaved_1f1b(2, 2, 2));
  const std::vector<Span> back = spans_from_string(spans_to_string(r.spans));
  ASSERT_EQ(back.size(), r.spans.size());
  for (size_t i = 0; i < back.size(); ++i) {
    EXPECT_EQ(back[i].rank, r.spans[i].rank);
    EXPECT_EQ(back[i].start, r.spans[i].start);
    EXPECT_EQ(back[i].end, r.spans[i].end);
    EXPECT_EQ(back[i].label, r.spans[i].label);
    EXPECT_EQ(back[i].category, r.spans[i].category);
  }
  EXPECT_THROW(spans_from_string("[[0, 1.0]]"), std::invalid_argument);
}

}  // namespace
}  // namespace llmp
