# install + export so that both find_package(tagc CONFIG) and add_subdirectory work.
include_guard(GLOBAL)
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/tagc DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS tagc tagc_cccl EXPORT tagcTargets)
install(EXPORT tagcTargets NAMESPACE tagc:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tagc)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/tagcConfig.cmake.in
  ${PROJECT_BINARY_DIR}/tagcConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tagc)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/tagcConfigVersion.cmake
  COMPATIBILITY SameMinorVersion ARCH_INDEPENDENT)
install(FILES ${PROJECT_BINARY_DIR}/tagcConfig.cmake ${PROJECT_BINARY_DIR}/tagcConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/tagc)
