# Optional backends: AUTO builds without them quietly when absent, ON fails clearly, OFF skips.
set(BRAID_WITH_UCX AUTO CACHE STRING "Build the UCX transport (AUTO/ON/OFF)")
set(BRAID_WITH_MPI AUTO CACHE STRING "Build the MPI bootstrap and perf/compare's MPI side (AUTO/ON/OFF)")
set(BRAID_WITH_CUDA AUTO CACHE STRING "Build runtime/cuda (kernels, device-resident executor, CUDA transport) with nvcc (AUTO/ON/OFF)")
foreach(opt BRAID_WITH_UCX BRAID_WITH_MPI BRAID_WITH_CUDA)
  set_property(CACHE ${opt} PROPERTY STRINGS AUTO ON OFF)
  string(TOUPPER "${${opt}}" _v)
  if(NOT _v MATCHES "^(AUTO|ON|OFF)$")
    message(FATAL_ERROR "${opt} must be AUTO, ON or OFF (got '${${opt}}')")
  endif()
  set(${opt} "${_v}" CACHE STRING "" FORCE)
endforeach()

# braid_resolve_option(<OPTION> <FOUND-VAR> <what is missing>) sets BRAID_HAVE_<name>.
function(braid_resolve_option opt found what)
  string(REPLACE "BRAID_WITH_" "" name "${opt}")
  if(${opt} STREQUAL "OFF")
    set(BRAID_HAVE_${name} OFF PARENT_SCOPE)
  elseif(${found})
    set(BRAID_HAVE_${name} ON PARENT_SCOPE)
  elseif(${opt} STREQUAL "ON")
    message(FATAL_ERROR "${opt}=ON but ${what} was not found")
  else()
    set(BRAID_HAVE_${name} OFF PARENT_SCOPE)
  endif()
endfunction()

# BRAID_NO_VPTR_CHECK: the compile option that drops UBSan's vptr check, set only when CMAKE_CXX_FLAGS sanitize
# undefined behaviour (scripts/sanitize.sh). The vptr check of GCC 12's UBSan writes an object's vtable prefix into a
# pipe to learn whether it is readable (sanitizer_common's IsAccessibleMemoryRange); with no file descriptor free the
# pipe fails and a valid object is reported as having an "invalid vptr". The bootstrap and its tests run out of
# descriptors on purpose (RLIMIT_NOFILE), so those sources go without that one check; ASan and UBSan's other checks
# stay.
set(BRAID_NO_VPTR_CHECK "")
if(CMAKE_CXX_FLAGS MATCHES "-fsanitize=[^ ]*undefined")
  set(BRAID_NO_VPTR_CHECK "-fno-sanitize=vptr")
endif()
