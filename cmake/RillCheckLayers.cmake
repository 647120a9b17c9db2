# Check the include rules of src/rill (run by ctest as `layering`):
#   cmake -DROOT=<src/rill> -DLAYERS="common|table,connector|sql|..." \
#         -DDUCKDB_FOLDERS=sql,metrics -P RillCheckLayers.cmake
# LAYERS lists the folders bottom to top ("|" between layers, "," between
# peers); cmake/RillLayers.cmake passes its RILL_LAYERS. Every .h/.cc under
# ROOT/<folder>/ may include "rill/<other>/..." only when <other> is its own
# folder or in a lower layer, never another folder's *_internal.h, and DuckDB
# only when its folder is in DUCKDB_FOLDERS. Prints one line per violation
# and fails when there is any.
cmake_minimum_required(VERSION 3.25)

foreach(var ROOT LAYERS)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "RillCheckLayers.cmake needs -D${var}=...")
  endif()
endforeach()

# rank_<folder> = index of its layer.
string(REPLACE "|" ";" layer_list "${LAYERS}")
set(rank 0)
foreach(layer IN LISTS layer_list)
  string(REPLACE "," ";" peers "${layer}")
  foreach(folder IN LISTS peers)
    set(rank_${folder} ${rank})
  endforeach()
  math(EXPR rank "${rank} + 1")
endforeach()
string(REPLACE "," ";" duckdb_folders "${DUCKDB_FOLDERS}")
string(REPLACE "," ", " duckdb_names "${DUCKDB_FOLDERS}")

set(violations 0)
macro(report file line what)
  message("${file}:${line}: ${what}")
  math(EXPR violations "${violations} + 1")
endmacro()

file(GLOB_RECURSE files RELATIVE ${ROOT} ${ROOT}/*.h ${ROOT}/*.cc)
list(SORT files)
foreach(file IN LISTS files)
  if(NOT file MATCHES "^([^/]+)/")
    continue()  # files directly in ROOT belong to no folder
  endif()
  set(folder ${CMAKE_MATCH_1})
  if(NOT DEFINED rank_${folder})
    report(${file} 1 "${folder} is in no layer (add it to RILL_LAYERS in cmake/RillLayers.cmake)")
    continue()
  endif()
  file(STRINGS ${ROOT}/${file} lines)
  set(line_no 0)
  foreach(line IN LISTS lines)
    math(EXPR line_no "${line_no} + 1")
    if(NOT line MATCHES "^[ \t]*#[ \t]*include[ \t]*[<\"]([^>\"]+)[>\"]")
      continue()
    endif()
    set(header ${CMAKE_MATCH_1})
    if(header MATCHES "^duckdb[./]")
      if(NOT folder IN_LIST duckdb_folders)
        report(${file} ${line_no} "includes ${header} (only ${duckdb_names} may include DuckDB)")
      endif()
    elseif(header MATCHES "^rill/([^/]+)/(.*)$")
      set(other ${CMAKE_MATCH_1})
      set(name ${CMAKE_MATCH_2})
      if(other STREQUAL folder)
        continue()
      endif()
      if(NOT DEFINED rank_${other})
        report(${file} ${line_no} "includes ${header} (${other} is in no layer)")
      elseif(rank_${other} GREATER rank_${folder})
        report(${file} ${line_no} "includes ${header} (${other} is above ${folder})")
      elseif(rank_${other} EQUAL rank_${folder})
        report(${file} ${line_no} "includes ${header} (${other} is a peer of ${folder})")
      elseif(name MATCHES "_internal\\.h$")
        report(${file} ${line_no} "includes ${header} (another folder's _internal.h)")
      endif()
    endif()
  endforeach()
endforeach()

list(LENGTH files checked)
if(violations GREATER 0)
  message(FATAL_ERROR "${violations} layering violation(s) in ${checked} files under ${ROOT}; "
          "the layers, bottom to top: ${LAYERS}")
endif()
message("layering: ${checked} files under ${ROOT} follow the layers ${LAYERS}")
