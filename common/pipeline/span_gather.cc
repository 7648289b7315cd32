// gather_spans (see span_gather.h): trace.h's span strings through all_gather_strings
// (common/comm), parsed back on the root.
//
// Glossary: p ranks in the group.
#include "common/pipeline/span_gather.h"

#include <string>

#include "common/comm/all_gather_strings.h"
#include "common/pipeline/trace.h"

namespace llmp {

std::vector<Span> gather_spans(ProcessGroup& group, const std::vector<Span>& local, double shift,
                               int root) {
  std::vector<Span> shifted = local;
  for (Span& s : shifted) s.start += shift, s.end += shift;
  const std::vector<std::string> all = all_gather_strings(group, spans_to_string(shifted));

  std::vector<Span> spans;
  if (group.rank() != root) return spans;
  for (const std::string& text : all) {
    const std::vector<Span> part = spans_from_string(text);
    spans.insert(spans.end(), part.begin(), part.end());
  }
  return spans;
}

}  // namespace llmp
