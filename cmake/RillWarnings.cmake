# Warnings for the project's own targets (never for dependencies).
#
# rill_warnings is linked PRIVATE by every project target: librill's folders,
# apps/, python/src (rills_core), tests/ and bench/. Third-party headers come in
# as SYSTEM include directories (Arrow and DuckDB in RillDependencies.cmake,
# nanobind through NB_SUPPRESS_WARNINGS, the imported targets of Boost, spdlog,
# fmt, simdjson and GTest by CMake's default), so their warnings neither show
# nor break the build.
#
# RILL_WERROR turns warnings into errors: ON, OFF, or AUTO (the default): ON when
# the environment has CI=true (.ci/run sets it), the compiler is GCC and the build
# type is Release: the release build is the one kept free of warnings (GCC's
# sanitizer and -O0/-O1 builds warn differently, e.g. -Wmaybe-uninitialized, and
# are built with warnings shown but not fatal). Evaluated at every configure, so
# a build directory follows the environment it is configured in.
set(RILL_WERROR AUTO CACHE STRING "Warnings are errors in project code: ON, OFF or AUTO (ON under CI=true for GCC Release builds)")
set_property(CACHE RILL_WERROR PROPERTY STRINGS ON OFF AUTO)

string(TOUPPER "${RILL_WERROR}" _rill_werror)
if(_rill_werror STREQUAL "AUTO")
  string(TOLOWER "$ENV{CI}" _rill_ci)
  if(_rill_ci MATCHES "^(true|1|yes|on)$" AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU"
     AND CMAKE_BUILD_TYPE STREQUAL "Release")
    set(_rill_werror ON)
  else()
    set(_rill_werror OFF)
  endif()
endif()
if(_rill_werror)
  message(STATUS "Project code is built with -Werror (RILL_WERROR=${RILL_WERROR})")
endif()

# Left out on purpose:
#  - unused-parameter: interface implementations and callbacks ignore arguments;
#  - missing-field-initializers: `TableOptions{{"id"}}`, `KpiQuery{"k", "SELECT 1", 1.0}`
#    leave the later members to their default member initializers, as intended;
#  - restrict on GCC 12: a false positive inside std::string's operator+ once
#    inlined (GCC PR 105651, fixed in GCC 13), in a dozen files that only
#    concatenate strings.
add_library(rill_warnings INTERFACE)
target_compile_options(rill_warnings INTERFACE -Wall -Wextra -Wno-unused-parameter
  -Wno-missing-field-initializers
  $<$<AND:$<CXX_COMPILER_ID:GNU>,$<VERSION_LESS:$<CXX_COMPILER_VERSION>,13>>:-Wno-restrict>
  $<$<BOOL:${_rill_werror}>:-Werror>)
