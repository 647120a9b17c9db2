# RILL_SANITIZE=address,undefined | thread applies to every target of the build.
# RILL_SANITIZE_SKIP names checks of those to leave out. The debug preset (the
# C++ tests under ASan + UBSan) leaves out UBSan's per-dereference checks (null,
# alignment, the nonnull attributes) and vptr: with GCC they double the compile
# time of a test file (37 s -> 22 s for table/live_table_test.cc at -O1), which
# was the largest part of CI's time, while ASan still reports a null dereference
# (as a SEGV with its stack) and the rest of UBSan (overflow, shifts, bounds,
# enum/bool loads, float casts, pointer overflow, unreachable) stays on. The fuzz
# targets keep every UBSan check.
set(RILL_SANITIZE_SKIP "" CACHE STRING "Checks of RILL_SANITIZE to leave out (-fno-sanitize=...)")
if(RILL_SANITIZE)
  add_compile_options(-fsanitize=${RILL_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  if(RILL_SANITIZE_SKIP)
    add_compile_options(-fno-sanitize=${RILL_SANITIZE_SKIP})
  endif()
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
