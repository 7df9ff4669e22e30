# libkiln.so as a C library, and what `cmake --install` puts in place: the
# library, include/kiln/kiln.h, the kiln CLI, a CMake package
# (find_package(kiln) -> kiln::kiln) and a pkg-config file (kiln.pc).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# Only the kiln_* C functions are exported; --no-undefined makes sure a C
# program needs nothing beyond libkiln.so itself.
set(KILN_EXPORT_MAP ${PROJECT_SOURCE_DIR}/src/capi/libkiln.map)
target_link_options(kiln PRIVATE "LINKER:--version-script=${KILN_EXPORT_MAP}" "LINKER:--no-undefined")
set_property(TARGET kiln APPEND PROPERTY LINK_DEPENDS ${KILN_EXPORT_MAP})

install(TARGETS kiln EXPORT kilnTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${PROJECT_SOURCE_DIR}/include/kiln/kiln.h ${PROJECT_SOURCE_DIR}/include/kiln/kiln_backend.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kiln)
install(TARGETS kiln_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

set(KILN_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/kiln)
install(EXPORT kilnTargets NAMESPACE kiln:: DESTINATION ${KILN_CMAKE_DIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/kilnConfig.cmake.in
  ${PROJECT_BINARY_DIR}/kilnConfig.cmake INSTALL_DESTINATION ${KILN_CMAKE_DIR})
# Before 1.0 a minor release may change the C API (KILN_API_VERSION says).
write_basic_package_version_file(${PROJECT_BINARY_DIR}/kilnConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/kilnConfig.cmake ${PROJECT_BINARY_DIR}/kilnConfigVersion.cmake
  DESTINATION ${KILN_CMAKE_DIR})

# kiln.pc finds its prefix from its own location, so it stays right under
# any `cmake --install --prefix`.
set(KILN_PC_DIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
if(IS_ABSOLUTE "${KILN_PC_DIR}")
  set(KILN_PC_PREFIX ${CMAKE_INSTALL_PREFIX})
else()
  file(RELATIVE_PATH KILN_PC_UP /${KILN_PC_DIR} /)
  string(REGEX REPLACE "/$" "" KILN_PC_UP "${KILN_PC_UP}")
  set(KILN_PC_PREFIX "\${pcfiledir}/${KILN_PC_UP}")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/kiln.pc.in ${PROJECT_BINARY_DIR}/kiln.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/kiln.pc DESTINATION ${KILN_PC_DIR})
