#include "stages/ddp/overlap_meter.h"

#include <algorithm>
#include <cstdio>
#include <utility>

namespace llmp {

void OverlapMeter::begin_step(int buckets) {
  launch_.assign(buckets, Clock::time_point());
  done_.assign(buckets, Clock::time_point());
  done_set_.assign(buckets, false);
  step_in_mpi_ms_ = 0;
}

void OverlapMeter::completed(int b) {
  if (done_set_[b]) return;
  done_[b] = Clock::now();
  done_set_[b] = true;
}

void OverlapMeter::end_step() {
  // Union of the intervals [l_b, d_b], split at the end of backward.
  std::vector<std::pair<Clock::time_point, Clock::time_point>> iv;
  for (size_t b = 0; b < launch_.size(); ++b) iv.emplace_back(launch_[b], done_[b]);
  std::sort(iv.begin(), iv.end());
  double hidden = 0, exposed = 0;
  auto add = [&](Clock::time_point a, Clock::time_point b) {  // a merged interval [a, b]
    const Clock::time_point split = std::clamp(bwd_end_, a, b);
    hidden += ms(a, split);
    exposed += ms(split, b);
  };
  for (size_t i = 0; i < iv.size();) {
    Clock::time_point a = iv[i].first, b = iv[i].second;
    for (++i; i < iv.size() && iv[i].first <= b; ++i) b = std::max(b, iv[i].second);
    add(a, b);
  }
  hidden_ms_ += hidden;
  exposed_ms_ += exposed;
  in_flight_ms_ += hidden + exposed;
  in_mpi_ms_ += step_in_mpi_ms_;
  ++steps_;
}

double OverlapMeter::hidden_fraction() const {
  return in_flight_ms_ > 0 ? hidden_ms_ / in_flight_ms_ : 0.0;
}

std::string OverlapMeter::summary() const {
  char line[256];
  std::snprintf(line, sizeof line,
                "hidden communication: %.0f%% of %.2f ms per step (exposed after backward "
                "%.2f ms; inside MPI calls %.2f ms; mean of %lld steps)",
                100.0 * hidden_fraction(), in_flight_ms(), exposed_ms(), in_mpi_ms(),
                static_cast<long long>(steps_));
  return line;
}

}  // namespace llmp
