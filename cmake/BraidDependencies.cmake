# Required libraries, as Debian 12 ships them (scripts/install-deps.sh installs them all).
find_package(yaml-cpp REQUIRED)
find_package(pugixml REQUIRED)
find_package(nlohmann_json REQUIRED)
find_package(CLI11 REQUIRED)
find_package(fmt REQUIRED)
find_package(Threads REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(Z3 REQUIRED IMPORTED_TARGET z3)
# GLPK (Debian libglpk-dev): the LP of the route-constrained lower bound (src/cost/route_bound.cc). No CMake
# package or pkg-config file ships with it, so the header and library are found directly.
find_path(GLPK_INCLUDE_DIR glpk.h)
find_library(GLPK_LIBRARY glpk)
if(NOT GLPK_INCLUDE_DIR OR NOT GLPK_LIBRARY)
  message(FATAL_ERROR "GLPK not found (glpk.h and libglpk): install libglpk-dev (scripts/install-deps.sh)")
endif()

# Optional backends.
find_package(ucx QUIET)
braid_resolve_option(BRAID_WITH_UCX ucx_FOUND "UCX (CMake package 'ucx', Debian libucx-dev)")

message(STATUS "Braid backends: UCX=${BRAID_HAVE_UCX}")

# MPI (Debian openmpi): bootstrap under mpirun and perf/compare's OpenMPI side. Gloo: perf/compare's other peer.
find_package(MPI COMPONENTS CXX QUIET)
braid_resolve_option(BRAID_WITH_MPI MPI_CXX_FOUND "MPI (Debian libopenmpi-dev)")
message(STATUS "Braid: MPI=${BRAID_HAVE_MPI}")
