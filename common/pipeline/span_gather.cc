// gather_spans (see span_gather.h): trace.h's span strings through MPI_Igather / MPI_Igatherv,
// waited on with mpi_wait so that oversubscribed ranks yield the core instead of spinning.
#include "common/pipeline/span_gather.h"

#include <string>

#include "common/comm/mpi_util.h"
#include "common/pipeline/trace.h"

namespace llmp {

std::vector<Span> gather_spans(MPI_Comm comm, const std::vector<Span>& local, double shift,
                               int root) {
  int rank = 0, size = 1;
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  MPI_CHECK(MPI_Comm_size(comm, &size));
  std::vector<Span> shifted = local;
  for (Span& s : shifted) s.start += shift, s.end += shift;
  const std::string text = spans_to_string(shifted);
  int n = static_cast<int>(text.size());
  std::vector<int> counts(size), displs(size);
  MPI_Request req;
  MPI_CHECK(MPI_Igather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, root, comm, &req));
  mpi_wait(&req);
  int total = 0;
  for (int r = 0; r < size; ++r) displs[r] = total, total += counts[r];
  std::string all(rank == root ? total : 0, '\0');
  MPI_CHECK(MPI_Igatherv(text.data(), n, MPI_CHAR, all.data(), counts.data(), displs.data(),
                         MPI_CHAR, root, comm, &req));
  mpi_wait(&req);

  std::vector<Span> spans;
  if (rank != root) return spans;
  for (int r = 0; r < size; ++r) {
    const std::vector<Span> part = spans_from_string(all.substr(displs[r], counts[r]));
    spans.insert(spans.end(), part.begin(), part.end());
  }
  return spans;
}

}  // namespace llmp
