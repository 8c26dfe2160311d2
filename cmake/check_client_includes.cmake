# A client of coalesce (the CLI) compiles against coalesce/messages only,
# never against coalesce/actors or coalesce/storage (run_queue.hpp is in
# actors). Reads the dependency files the compiler wrote for the client's
# objects, so headers included through other headers count too. A header
# may be reached as <coalesce/LAYER/...> through the build tree's links
# (INCLUDE_DIR/coalesce/LAYER) or by a path into the layer's folder itself:
# both count.
#   cmake -DSOURCE_DIR=<repository> -DINCLUDE_DIR=<build tree's include/>
#         -DOBJECT_DIR=<target's CMakeFiles dir> -DTARGET=<name>
#         -P check_client_includes.cmake
file(GLOB_RECURSE depfiles "${OBJECT_DIR}/*.o.d")
if(NOT depfiles)
  message(FATAL_ERROR "${TARGET}: no dependency files under ${OBJECT_DIR}, "
                      "so its includes cannot be checked")
endif()
set(forbidden "${SOURCE_DIR}/actors/" "${SOURCE_DIR}/storage/"
              "${INCLUDE_DIR}/coalesce/actors/" "${INCLUDE_DIR}/coalesce/storage/")
set(offences "")
foreach(depfile ${depfiles})
  file(READ "${depfile}" content)
  string(REGEX REPLACE "[ \t\r\n\\\\]+" ";" paths "${content}")
  foreach(path ${paths})
    # "../actors/x.hpp" from app/ is a path into actors/ too. The compiler
    # ran in the build tree, two levels above the target's object folder.
    get_filename_component(path "${path}" ABSOLUTE BASE_DIR "${OBJECT_DIR}/../..")
    foreach(prefix ${forbidden})
      string(FIND "${path}" "${prefix}" at)
      if(at EQUAL 0)
        get_filename_component(object "${depfile}" NAME_WE)
        list(APPEND offences "${object}: ${path}")
      endif()
    endforeach()
  endforeach()
endforeach()
if(offences)
  list(REMOVE_DUPLICATES offences)
  list(JOIN offences "\n  " listed)
  message(FATAL_ERROR "${TARGET} must compile against coalesce/messages only, "
                      "but includes:\n  ${listed}")
endif()
list(LENGTH depfiles count)
message(STATUS "${TARGET}: ${count} objects include no coalesce/actors or "
               "coalesce/storage header")
