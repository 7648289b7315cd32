#!/usr/bin/env bash
# Installs every system dependency of the project from Debian packages (Debian 12 / Ubuntu).
# Idempotent: when everything is installed it only checks, in about a second.
#
#   bazel-bootstrap           Bazel 4.2.3, builds offline with the WORKSPACE's local shims
#   mpich libmpich-dev        MPI: one process per rank on the CPU (mpiexec)
#   libeigen3-dev             Eigen: the CPU matrix products
#   libgtest-dev              GoogleTest
#   libcli11-dev              CLI11: command-line flags
#   nlohmann-json3-dev        JSON: safetensors checkpoint headers, Chrome traces
#   libspdlog-dev             spdlog (+ fmt): logging
#   doxygen graphviz          API docs (docs/Doxyfile)
#   fortunes                  the default training corpus (/usr/share/games/fortunes)
# CUDA, NCCL and cuBLAS are not Debian packages here: the build finds a CUDA toolkit when one is
# installed (CUDA_PATH or /usr/local/cuda) and leaves CUDA targets out otherwise.
set -euo pipefail

packages=(bazel-bootstrap mpich libmpich-dev libeigen3-dev libgtest-dev libcli11-dev
          nlohmann-json3-dev libspdlog-dev doxygen graphviz fortunes)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

echo "setup: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
echo "setup: done"
