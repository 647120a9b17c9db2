# RILL_SANITIZE=address,undefined | thread applies to every target of the build.
if(RILL_SANITIZE)
  add_compile_options(-fsanitize=${RILL_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=${RILL_SANITIZE})
endif()
# RILL_FUZZING=ON (preset `fuzz`, clang only): instrument every target for
# libFuzzer's coverage and for ASan + UBSan; the *_fuzz targets link libFuzzer's
# main (tests/fuzz/CMakeLists.txt).
if(RILL_FUZZING)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "RILL_FUZZING needs clang (cmake --preset fuzz); got ${CMAKE_CXX_COMPILER_ID}")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer
                      -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()
