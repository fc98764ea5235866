# Install rules: `cmake --install build --prefix PREFIX` gives
#   PREFIX/include/shardrt/...                          public headers (shardrt/shardrt.h: all)
#   PREFIX/lib/libshardrt.so*                           the library
#   PREFIX/lib/libshardrt_llm.so*                       the models (shardrt::llm: llm::Session)
#   PREFIX/lib/shardrt/plugins/xla_cpu_pjrt.so          the pinned CPU plugin (SHARDRT_INSTALL_PLUGIN)
#   PREFIX/lib/cmake/shardrt/shardrtConfig*.cmake       find_package(shardrt CONFIG)
#   PREFIX/lib/pkgconfig/shardrt.pc                     pkg-config shardrt
#   PREFIX/bin/shardrt                                  the CLI
# Nothing installed names a path of the build or source tree: the library finds the plugin
# relative to its own folder, the CMake files relative to theirs, the .pc file through pcfiledir.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(_cmake_dir "${CMAKE_INSTALL_LIBDIR}/cmake/shardrt")

set(_libraries shardrt)
if(SHARDRT_BUILD_MODELS)
  list(APPEND _libraries shardrt_llm)
endif()
install(TARGETS ${_libraries} EXPORT shardrtTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY "${PROJECT_SOURCE_DIR}/include/shardrt"
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h")
install(EXPORT shardrtTargets NAMESPACE shardrt:: DESTINATION ${_cmake_dir})
if(SHARDRT_BUILD_MODELS)
  install(TARGETS shardrt_bin RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
if(SHARDRT_INSTALL_PLUGIN)
  install(PROGRAMS "${SHARDRT_PLUGIN_DIR}/${SHARDRT_DEFAULT_PLUGIN_FILE}"
          DESTINATION "${CMAKE_INSTALL_LIBDIR}/${SHARDRT_PLUGIN_SUBDIR}")
endif()

configure_package_config_file("${PROJECT_SOURCE_DIR}/cmake/shardrtConfig.cmake.in"
  "${PROJECT_BINARY_DIR}/shardrtConfig.cmake" INSTALL_DESTINATION ${_cmake_dir})
write_basic_package_version_file("${PROJECT_BINARY_DIR}/shardrtConfigVersion.cmake"
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES "${PROJECT_BINARY_DIR}/shardrtConfig.cmake"
              "${PROJECT_BINARY_DIR}/shardrtConfigVersion.cmake" DESTINATION ${_cmake_dir})

# pkg-config: the prefix is found from the .pc file's own folder, so the install can move.
set(_pc_dir "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
file(RELATIVE_PATH SHARDRT_PC_TO_PREFIX "/root/${_pc_dir}" "/root")
string(REGEX REPLACE "/$" "" SHARDRT_PC_TO_PREFIX "${SHARDRT_PC_TO_PREFIX}")
set(SHARDRT_PC_REQUIRES "")
foreach(t ${SHARDRT_PUBLIC_ABSL})
  string(REPLACE "absl::" "absl_" _pc "${t}")
  string(APPEND SHARDRT_PC_REQUIRES " ${_pc}")
endforeach()
configure_file("${PROJECT_SOURCE_DIR}/cmake/shardrt.pc.in" "${PROJECT_BINARY_DIR}/shardrt.pc" @ONLY)
install(FILES "${PROJECT_BINARY_DIR}/shardrt.pc" DESTINATION ${_pc_dir})
