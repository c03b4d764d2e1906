# `cmake --install` puts headers, libraries, the CLI, shipped topologies and a package config in
# place so that `find_package(braid)` works: targets braid::braid_common ... braid::braid_algos, braid::braid_cost,
# braid::braid_runtime, braid::braid_synthesizer, braid::braid_comm (the runtime's C API: no solver, no cost model)
# and braid::braid_pareto (Pareto sets synthesized at communicator init: brings in the synthesizer and Z3).
# braid_report is the CLI's and the benchmarks' and is not installed.
include(CMakePackageConfigHelpers)

# braid/cuda.h goes with braid_cuda, which is not installed yet (docs/gpu.md): it is used from the build tree.
install(DIRECTORY include/braid DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} PATTERN "cuda.h" EXCLUDE)
install(TARGETS braid_common braid_topology braid_ir braid_algos braid_cost braid_runtime braid_synthesizer braid_comm
  braid_pareto EXPORT braidTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
if(TARGET braid)
  install(TARGETS braid RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
install(DIRECTORY topologies/ DESTINATION ${CMAKE_INSTALL_DATADIR}/braid/topologies)
install(EXPORT braidTargets NAMESPACE braid:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/braid)

configure_package_config_file(cmake/braidConfig.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/braidConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/braid)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/braidConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/braidConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/braidConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/braid)
