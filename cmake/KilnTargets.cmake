# Helpers for declaring kiln's libraries.
#
# kiln's code is in layers (DESIGN.md's layout): each area of src/ may use
# only the areas below it, and the build enforces it. An area compiles
# against an include root of its own in the build tree that holds one link,
# <root>/<area> -> src/<area>; the roots of the areas it declares reach it
# through CMake's usage requirements (and theirs, transitively, since an
# area's headers may include its own dependencies'). So `#include
# "compiler/bind.h"` in an area that does not declare compiler (directly or
# through an area it declares) is "file not found", and an include pointing
# up the layers fails to build.

set(KILN_AREA_INCLUDE_ROOTS ${PROJECT_BINARY_DIR}/area_include)
set(KILN_LIBRARY_PCH_HEADERS <fmt/format.h> <algorithm> <cstdint> <cstring> <functional> <map> <memory>
  <optional> <string> <string_view> <utility> <variant> <vector>)

# kiln_area(NAME [USES AREA...] [LIBS LIB...] [EXCLUDE FILE...] [TARGET T])
# builds every src/<NAME>/**.cc (excluding *_test.cc and the files EXCLUDE
# names, relative to src/<NAME>) as the object library T (kiln_<NAME> unless
# given), which sees the headers of NAME, of the areas it USES (which must be
# declared before it, so that no two areas use each other) and of include/,
# and links LIBS. Files named *_avx2.cc, *_avx512.cc and *_amx.cc are
# compiled for those ISAs; the rest for the baseline, and run-time dispatch
# picks among them.
function(kiln_area name)
  cmake_parse_arguments(PARSE_ARGV 1 arg "" "TARGET" "USES;LIBS;EXCLUDE")
  if(NOT arg_TARGET)
    set(arg_TARGET kiln_${name})
  endif()
  file(GLOB_RECURSE srcs CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/${name}/*.cc)
  list(FILTER srcs EXCLUDE REGEX "_test\\.cc$")
  foreach(excluded ${arg_EXCLUDE})
    list(REMOVE_ITEM srcs ${PROJECT_SOURCE_DIR}/src/${name}/${excluded})
  endforeach()
  add_library(${arg_TARGET} OBJECT ${srcs})
  # Eight files to a unit: the same fmt, JSON and standard templates are
  # instantiated once per unit, not per file (the ISA files, with flags of
  # their own, stay single). A file's anonymous helpers therefore must not
  # share a name with another file's in the area: share the helper instead.
  set_target_properties(${arg_TARGET} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 8)
  kiln_area_include_root(${arg_TARGET} ${name})
  target_include_directories(${arg_TARGET} PUBLIC ${PROJECT_SOURCE_DIR}/include)
  target_compile_options(${arg_TARGET} PRIVATE ${KILN_WARNINGS})
  if(name IN_LIST KILN_OPTIMIZED_AREAS)
    target_compile_options(${arg_TARGET} PRIVATE ${KILN_OPTIMIZED_AREA_FLAGS})
  endif()
  foreach(used ${arg_USES})
    if(NOT TARGET kiln_${used})
      message(FATAL_ERROR "area ${name} uses ${used}, which is not declared before it")
    endif()
    target_link_libraries(${arg_TARGET} PUBLIC kiln_${used})
  endforeach()
  target_link_libraries(${arg_TARGET} PUBLIC ${arg_LIBS})
  # The headers nearly every file parses (fmt, through core/status.h, and
  # the standard containers), a fair part of a small file's compile time,
  # precompiled once per area; the files compiled with flags of their own
  # (the vector kernels below) parse them as usual.
  target_precompile_headers(${arg_TARGET} PRIVATE ${KILN_LIBRARY_PCH_HEADERS})
  if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
    foreach(src ${srcs})
      if(src MATCHES "_(avx2|avx_vnni|avx512|amx)\\.cc$")
        set_source_files_properties(${src} PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
      endif()
      if(src MATCHES "_avx2\\.cc$")
        set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma;-mf16c;-mbmi2;${KILN_VECTOR_FILE_FLAGS}")
      elseif(src MATCHES "_avx_vnni\\.cc$")
        set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS
          "-mavx2;-mfma;-mf16c;-mbmi2;-mavxvnni;${KILN_VECTOR_FILE_FLAGS}")
      elseif(src MATCHES "_avx512\\.cc$")
        set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS
          "-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx512vnni;-mavx512bf16;-mfma;-mf16c;-mbmi2;${KILN_VECTOR_FILE_FLAGS}")
      elseif(src MATCHES "_amx\\.cc$")
        set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS
          "-mamx-tile;-mamx-int8;-mamx-bf16;-mprfchw;-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx512bf16;-mfma;-mf16c;-mbmi2;${KILN_VECTOR_FILE_FLAGS}")
      endif()
    endforeach()
  endif()
endfunction()

# Gives TARGET the include root of AREA: a folder of the build tree holding
# only the link AREA -> src/AREA (public, so that the areas using AREA see it).
function(kiln_area_include_root target area)
  set(root ${KILN_AREA_INCLUDE_ROOTS}/${area})
  if(NOT IS_SYMLINK ${root}/${area})
    file(MAKE_DIRECTORY ${root})
    file(CREATE_LINK ${PROJECT_SOURCE_DIR}/src/${area} ${root}/${area} SYMBOLIC)
  endif()
  target_include_directories(${target} PUBLIC ${root})
endfunction()

# kiln_area_probe(NAME AREA SOURCE [DEFINITIONS...]) compiles SOURCE as if it
# were a file of AREA (the same include roots, flags and libraries), as the
# object library NAME outside the default build: the layering test builds
# such probes.
function(kiln_area_probe name area source)
  add_library(${name} OBJECT EXCLUDE_FROM_ALL ${source})
  target_link_libraries(${name} PRIVATE kiln_${area})
  target_compile_options(${name} PRIVATE ${KILN_WARNINGS})
  target_compile_definitions(${name} PRIVATE ${ARGN})
endfunction()
