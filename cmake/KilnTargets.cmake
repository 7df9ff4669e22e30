# Helpers for declaring kiln's libraries.

# kiln_area(NAME DEPS...) builds every src/<NAME>/**.cc (excluding *_test.cc)
# as the object library kiln_<NAME>. Files named *_avx2.cc, *_avx512.cc and *_amx.cc
# are compiled for those ISAs; the rest for the baseline, and run-time dispatch
# picks among them.
function(kiln_area name)
  file(GLOB_RECURSE srcs CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/${name}/*.cc)
  add_library(kiln_${name} OBJECT ${srcs})
  target_include_directories(kiln_${name} PUBLIC ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/include)
  target_compile_options(kiln_${name} PRIVATE ${KILN_WARNINGS})
  target_link_libraries(kiln_${name} PUBLIC ${ARGN})
  if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
    foreach(src ${srcs})
      if(src MATCHES "_avx2\\.cc$")
        set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "-mavx2;-mfma;-mf16c;-mbmi2")
      elseif(src MATCHES "_avx512\\.cc$")
        set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS
          "-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx512vnni;-mavx512bf16;-mfma;-mf16c;-mbmi2")
      elseif(src MATCHES "_amx\\.cc$")
        set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS
          "-mamx-tile;-mamx-int8;-mamx-bf16;-mavx512f;-mavx512bw;-mavx512vl;-mavx512dq;-mavx512bf16;-mfma;-mf16c;-mbmi2")
      endif()
    endforeach()
  endif()
endfunction()
