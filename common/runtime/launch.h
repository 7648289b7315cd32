// Launching: one binary that starts its own MPI job.
//
// `bazel run //stages/ddp:train -- --ranks=4` runs a single process. launch_or_init() notices it
// was not started by mpiexec and replaces itself with
//     mpiexec -n 4 -bind-to none /proc/self/exe <the same arguments>
// whose 4 copies come back into launch_or_init(), see that hydra started them (PMI_RANK,
// PMI_SIZE, PMI_FD in the environment) and call MPI_Init. The exit status of the command is
// mpiexec's, which is non-zero when any rank's is. The same holds under `bazel test`, and a
// binary started by hand under `mpiexec -n 4` is used as it is.
//
// Environment:
//   LLMP_NO_LAUNCH=1   never relaunch: MPI_Init in this process (a singleton unless mpiexec
//                      started it); a size other than the requested one is then an error.
//   LLMP_MPIEXEC=path  the mpiexec to use instead of the first one on PATH.
//   LLMP_STDOUT_IS_TTY set to 1 for the ranks when the launcher's stdout is a terminal (theirs
//                      is hydra's pipe), so the progress bar draws in place.
//   LLMP_COMM_YIELD=0  passed on to the ranks like every variable: waiting ranks busy-poll
//                      instead of yielding the CPU (common/comm/mpi_util.h says why they yield).
//   LLMP_LAUNCHED=1    set for the ranks; guards against relaunching forever when the mpiexec
//                      found is not MPICH's hydra.
//
// Glossary: N = world_size ranks; rank = index in MPI_COMM_WORLD.
#pragma once

#include <string>
#include <vector>

namespace llmp {

/// Makes this process one of `world_size` MPI ranks and initialises MPI; returns its rank in
/// MPI_COMM_WORLD. Call it first thing in main(), before reading argv.
///  - Started by mpiexec (or LLMP_NO_LAUNCH=1): MPI_Init. If the job's size differs from
///    world_size, every rank ends with "error: this job has 2 ranks (mpiexec -n 2) but the
///    requested world size is 4" (exit 2).
///  - world_size == 1 and not under mpiexec: MPI_Init in this process (an MPI singleton: no
///    mpiexec, no fork, a debugger and sanitizers work as usual).
///  - world_size > 1 and not under mpiexec: exec()s mpiexec as above and never returns. Fails with
///    one line when mpiexec is not on PATH.
///  - world_size <= 0: whatever size mpiexec gave (1 when not under mpiexec).
int launch_or_init(int& argc, char**& argv, int world_size);

/// MPI_Finalize if MPI is initialised and not yet finalised. Call at the end of main on every
/// rank (after the last collective; groups freed after it are skipped safely).
void shutdown();

/// True when this process was started by an MPI launcher (hydra's PMI_RANK / PMI_SIZE / PMI_FD,
/// PMIx's PMIX_RANK or Open MPI's OMPI_COMM_WORLD_SIZE in the environment).
bool started_by_mpiexec();

/// The environment variables that hydra's mpiexec and launch_or_init set for the ranks of a job
/// (PMI_RANK, PMI_SIZE, PMI_FD, PMI_PORT, PMI_ID, hydra's local-rank pair, LLMP_LAUNCHED). A
/// process that must start a job of its own, not join this one, runs without them
/// (common/testing/subprocess.h).
std::vector<std::string> rank_environment_variables();

}  // namespace llmp
