# Writes OUTPUT, the node's build information (coalesce_build_info), run at
# every build so that the commit is the one built, not the one configured:
#   cmake -DSOURCE_DIR=... -DVERSION=... -DOUTPUT=... -P build_info.cmake
# The file changes only when the version or the commit does.
execute_process(COMMAND git -C ${SOURCE_DIR} rev-parse --short=12 HEAD
                OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE
                RESULT_VARIABLE failed ERROR_QUIET)
if(failed)
  set(commit "unknown")
else()
  execute_process(COMMAND git -C ${SOURCE_DIR} status --porcelain
                          --untracked-files=no
                  OUTPUT_VARIABLE changes ERROR_QUIET)
  if(changes)
    set(commit "${commit}-dirty")
  endif()
endif()
set(content "#pragma once
// Written by cmake/build_info.cmake at build time.
#define COALESCE_VERSION \"${VERSION}\"
#define COALESCE_COMMIT \"${commit}\"
")
if(EXISTS ${OUTPUT})
  file(READ ${OUTPUT} old)
endif()
if(NOT "${old}" STREQUAL "${content}")
  file(WRITE ${OUTPUT} "${content}")
endif()
