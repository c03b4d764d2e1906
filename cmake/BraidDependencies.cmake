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

# CUDA (runtime/cuda, runtime/transport/cuda; runtime/cuda/README.md): nvcc and the CUDA toolkit (Debian: NVIDIA's
# cuda-toolkit packages in /usr/local/cuda). The architectures default to sm_80 and sm_90 (A100, H100/H200); pass
# -DCMAKE_CUDA_ARCHITECTURES=... for others (nvcc 13 builds sm_75 and newer). check_language() runs nvcc in a
# throw-away project first, so AUTO on a machine without nvcc (or with one that cannot compile) builds without CUDA
# instead of failing. No GPU is needed to build: the driver is loaded only when a program calls into CUDA.
set(BRAID_HAVE_CUDA OFF)
set(BRAID_HAVE_NCCL OFF)
if(BRAID_FUZZ AND NOT BRAID_WITH_CUDA STREQUAL "OFF")
  # The fuzz build instruments everything with clang's sanitizers; nvcc takes none of those flags.
  message(STATUS "Braid: BRAID_FUZZ builds without CUDA")
elseif(NOT BRAID_WITH_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_ARCHITECTURES)
    set(CMAKE_CUDA_ARCHITECTURES 80 90)
  endif()
  # nvcc from PATH, $CUDACXX or -DCMAKE_CUDA_COMPILER; else the toolkit's default location.
  find_program(_braid_nvcc nvcc)
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND NOT _braid_nvcc AND EXISTS /usr/local/cuda/bin/nvcc)
    set(ENV{CUDACXX} /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  set(_braid_cuda_found OFF)
  if(CMAKE_CUDA_COMPILER)
    enable_language(CUDA)
    find_package(CUDAToolkit QUIET)
    if(CUDAToolkit_FOUND)
      set(_braid_cuda_found ON)
    endif()
  endif()
  braid_resolve_option(BRAID_WITH_CUDA _braid_cuda_found "nvcc and the CUDA toolkit (CMAKE_CUDA_COMPILER, CUDAToolkit)")
  if(BRAID_HAVE_CUDA)
    # Targets get CMAKE_CXX_STANDARD 20 for their CUDA sources too; CMake before 3.26 knows no C++20 flag for nvcc.
    if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
      set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
      set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    endif()
    # NCCL (libnccl.so, nccl.h beside the CUDA headers): the CUDA transport's inter-GPU moves. Without it the
    # transport reports kUnsupported; the kernels and the device-resident executor do not need it.
    find_path(NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/local/cuda/include)
    find_library(NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/local/cuda/lib64)
    if(NCCL_INCLUDE_DIR AND NCCL_LIBRARY)
      set(BRAID_HAVE_NCCL ON)
    endif()
  endif()
endif()
if(BRAID_HAVE_CUDA)
  message(STATUS "Braid: CUDA=ON (architectures ${CMAKE_CUDA_ARCHITECTURES}) NCCL=${BRAID_HAVE_NCCL}")
else()
  message(STATUS "Braid: CUDA=OFF")
endif()
