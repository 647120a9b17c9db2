# The layers of src/rill and the one CMake library per folder.
#
# RILL_LAYERS lists the folders of src/rill bottom to top; folders in one entry
# are peers (neither may use the other). A folder may include and link only the
# folders of lower entries: rill_add_folder() links exactly those (PRIVATE), and
# the `layering` test (cmake/RillCheckLayers.cmake) fails when a source includes
# a header of a folder above its own or of a peer, or another folder's
# *_internal.h, or DuckDB from a folder that does not link it.
# apps/ and python/ sit above every folder and link the shared `rill`.
set(RILL_LAYERS common "table connector" sql engine sink "metrics toolkit" pipeline cluster server)

# rill_add_folder(<folder> [LINK <third-party targets>...])
#
# Build src/rill/<folder>/**/*.cc as the OBJECT library rill_<folder>, which
# privately links the folders of the lower layers and LINK; its objects go into
# the shared library `rill`. A folder that links rill_duckdb may include DuckDB.
function(rill_add_folder folder)
  cmake_parse_arguments(ARG "" "" "LINK" ${ARGN})
  set(below "")
  set(found FALSE)
  foreach(layer IN LISTS RILL_LAYERS)
    string(REPLACE " " ";" peers "${layer}")
    if(folder IN_LIST peers)
      set(found TRUE)
      break()
    endif()
    list(APPEND below ${peers})
  endforeach()
  if(NOT found)
    message(FATAL_ERROR "src/rill/${folder} is in no layer: add it to RILL_LAYERS in cmake/RillLayers.cmake")
  endif()

  file(GLOB_RECURSE sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${folder}/*.cc)
  set(no_websocket_client FALSE)
  if(RILL_FUZZING AND CMAKE_CXX_COMPILER_ID STREQUAL "Clang" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 15)
    # clang 14 cannot compile the C++20 coroutines of the WebSocket client with
    # the fuzzing instrumentation ("Cannot represent a difference across
    # sections"); no fuzz target uses it, so the fuzz build leaves it out (and
    # pipeline/ refuses websocket sources: RILL_NO_WEBSOCKET_CLIENT).
    list(FILTER sources EXCLUDE REGEX "websocket_connector\\.cc$")
    set(no_websocket_client TRUE)
  endif()
  add_library(rill_${folder} OBJECT ${sources})
  if(folder STREQUAL "pipeline" AND no_websocket_client)
    target_compile_definitions(rill_${folder} PRIVATE RILL_NO_WEBSOCKET_CLIENT=1)
  endif()
  target_include_directories(rill_${folder} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  # Every folder's headers use Arrow, Status and the logging/format libraries.
  target_link_libraries(rill_${folder}
    PUBLIC rill_arrow spdlog::spdlog fmt::fmt Threads::Threads Boost::headers
    PRIVATE rill_warnings ${ARG_LINK})
  foreach(dep IN LISTS below)
    if(TARGET rill_${dep})
      target_link_libraries(rill_${folder} PRIVATE rill_${dep})
    endif()
  endforeach()
  target_link_libraries(rill PRIVATE rill_${folder} ${ARG_LINK})

  set_property(GLOBAL APPEND PROPERTY RILL_FOLDERS ${folder})
  if("rill_duckdb" IN_LIST ARG_LINK)
    set_property(GLOBAL APPEND PROPERTY RILL_DUCKDB_FOLDERS ${folder})
  endif()
endfunction()

# rill_add_layering_test(): register the ctest `layering` (and its self-test,
# which runs the check on a tree that breaks every rule and expects each break
# to be reported).
function(rill_add_layering_test)
  get_property(duckdb_folders GLOBAL PROPERTY RILL_DUCKDB_FOLDERS)
  string(REPLACE ";" "," duckdb_folders "${duckdb_folders}")
  set(layers "")
  foreach(layer IN LISTS RILL_LAYERS)
    string(REPLACE " " "," layer "${layer}")
    list(APPEND layers "${layer}")
  endforeach()
  string(REPLACE ";" "|" layers "${layers}")
  set(script ${PROJECT_SOURCE_DIR}/cmake/RillCheckLayers.cmake)
  add_test(NAME layering
    COMMAND ${CMAKE_COMMAND} "-DLAYERS=${layers}" "-DDUCKDB_FOLDERS=${duckdb_folders}"
            -DROOT=${PROJECT_SOURCE_DIR}/src/rill -P ${script})
  set_tests_properties(layering PROPERTIES LABELS unit)
  # The self-test uses fixed layers so that its expectations do not move.
  add_test(NAME layering_self_test
    COMMAND ${CMAKE_COMMAND} "-DLAYERS=common|table,connector|sql|engine|metrics|server"
            -DDUCKDB_FOLDERS=sql,metrics
            -DROOT=${PROJECT_SOURCE_DIR}/tests/layering/bad_tree -P ${script})
  # The bad tree must fail, and with every violation it holds.
  set_tests_properties(layering_self_test PROPERTIES LABELS unit
    PASS_REGULAR_EXPRESSION "sql/internal.cc:2: includes rill/table/gather_internal.h \\(another folder's _internal.h\\).*table/duck.cc:2: includes duckdb.hpp \\(only sql, metrics may include DuckDB\\).*table/peer.cc:2: includes rill/connector/connector.h \\(connector is a peer of table\\).*table/upward.cc:3: includes rill/sql/sql_engine.h \\(sql is above table\\).*widgets/gadget.cc:1: widgets is in no layer.*5 layering violation")
endfunction()
