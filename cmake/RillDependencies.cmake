# Discover the dependencies named in DESIGN.md.
#  - Arrow C++: a system package if present, else the pyarrow wheel in .venv.
#  - DuckDB: .deps/duckdb-<ver> unpacked by scripts/setup from the npm registry.
set(RILL_VENV "${CMAKE_SOURCE_DIR}/.venv" CACHE PATH "Python virtual environment")
set(RILL_DUCKDB_DIR "${CMAKE_SOURCE_DIR}/.deps/duckdb-1.4.4" CACHE PATH "DuckDB lib + headers")

find_package(Threads REQUIRED)
find_package(Arrow QUIET CONFIG)
if(Arrow_FOUND AND TARGET Arrow::arrow_shared)
  message(STATUS "Arrow: system package ${Arrow_VERSION}")
  add_library(rill_arrow INTERFACE)
  target_link_libraries(rill_arrow INTERFACE Arrow::arrow_shared)
  if(TARGET ArrowCompute::arrow_compute_shared)
    target_link_libraries(rill_arrow INTERFACE ArrowCompute::arrow_compute_shared)
  endif()
else()
  # The Python that has pyarrow: the one CMake was given (pip / scikit-build-core
  # pass Python_EXECUTABLE), else the project's .venv.
  if(DEFINED Python_EXECUTABLE AND EXISTS "${Python_EXECUTABLE}")
    set(_py "${Python_EXECUTABLE}")
  else()
    set(_py "${RILL_VENV}/bin/python")
  endif()
  if(NOT EXISTS "${_py}")
    message(FATAL_ERROR "No system Arrow and no ${_py}: run scripts/setup")
  endif()
  execute_process(COMMAND "${_py}" -c "import pyarrow as pa; print(pa.get_include()); print(pa.get_library_dirs()[0]); print(pa.__version__)"
    OUTPUT_VARIABLE _pa OUTPUT_STRIP_TRAILING_WHITESPACE COMMAND_ERROR_IS_FATAL ANY)
  string(REPLACE "\n" ";" _pa "${_pa}")
  list(GET _pa 0 ARROW_INCLUDE_DIR)
  list(GET _pa 1 ARROW_LIB_DIR)
  list(GET _pa 2 ARROW_PY_VERSION)
  message(STATUS "Arrow: pyarrow ${ARROW_PY_VERSION} at ${ARROW_LIB_DIR}")
  add_library(rill_arrow INTERFACE)
  target_include_directories(rill_arrow SYSTEM INTERFACE "${ARROW_INCLUDE_DIR}")
  # Link the versioned files: the unversioned symlinks exist only after
  # pyarrow.create_library_symlinks().
  file(GLOB _arrow_core "${ARROW_LIB_DIR}/libarrow.so.[0-9]*")
  file(GLOB _arrow_compute "${ARROW_LIB_DIR}/libarrow_compute.so.[0-9]*")
  list(SORT _arrow_core)
  list(SORT _arrow_compute)
  list(GET _arrow_core 0 _arrow_core)
  list(GET _arrow_compute 0 _arrow_compute)
  target_link_libraries(rill_arrow INTERFACE "${_arrow_core}" "${_arrow_compute}")
  target_link_options(rill_arrow INTERFACE "-Wl,-rpath,${ARROW_LIB_DIR}")
  # The wheel is built with the old ABI switch off (manylinux, new ABI); nothing to set.
endif()

if(NOT EXISTS "${RILL_DUCKDB_DIR}/lib/libduckdb.so")
  execute_process(COMMAND bash "${CMAKE_SOURCE_DIR}/scripts/fetch-duckdb" RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0 OR NOT EXISTS "${RILL_DUCKDB_DIR}/lib/libduckdb.so")
    message(FATAL_ERROR "DuckDB not found in ${RILL_DUCKDB_DIR} and scripts/fetch-duckdb failed")
  endif()
endif()
add_library(rill_duckdb INTERFACE)
target_include_directories(rill_duckdb SYSTEM INTERFACE "${RILL_DUCKDB_DIR}/include")
target_link_libraries(rill_duckdb INTERFACE "${RILL_DUCKDB_DIR}/lib/libduckdb.so")
target_link_options(rill_duckdb INTERFACE "-Wl,-rpath,${RILL_DUCKDB_DIR}/lib")

find_package(Boost 1.81 REQUIRED)
find_package(spdlog REQUIRED)
find_package(fmt REQUIRED)

# Found here (top level) so that every folder sees the imported targets.
# server/: OpenSSL (tokens, SCRAM), libcurl (webhooks); connector/ and server/:
# simdjson; connector/: Arrow's Parquet reader (libparquet of the pyarrow wheel
# or the system's) and librdkafka.
find_package(OpenSSL REQUIRED)
find_package(CURL REQUIRED)
# zlib: the deflate codec of Avro object container files (connector/avro_source.cc).
find_package(ZLIB REQUIRED)
find_package(simdjson CONFIG REQUIRED)
find_package(Parquet QUIET CONFIG)
if(TARGET Parquet::parquet_shared)
  set(RILL_PARQUET Parquet::parquet_shared)
else()
  file(GLOB RILL_PARQUET "${ARROW_LIB_DIR}/libparquet.so.[0-9]*")
endif()
find_package(PkgConfig REQUIRED)
pkg_check_modules(RILL_RDKAFKA REQUIRED IMPORTED_TARGET GLOBAL rdkafka)
# sink/: libpq (libpq-dev, PostgreSQL 15), the PostgreSQL sink.
pkg_check_modules(RILL_LIBPQ REQUIRED IMPORTED_TARGET GLOBAL libpq)
# toolkit/: SQLite 3 (libsqlite3-dev), the durable message queues of seed 001.
find_package(SQLite3 REQUIRED)
