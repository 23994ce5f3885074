# Runs a command and checks its exit code and output; used by tests/cli.cmake.
#
#   cmake -DCMD=<program>|<arg>|<arg>... -DEXPECT_RC=<n|nonzero> [-DOUT1=<regex> ... -DOUT12=]
#         [-DERR1=<regex> ... -DERR4=] [-DNOT_OUT=<regex>] [-DCWD=<dir>] -P expect.cmake
#
# Arguments are separated by '|' and may not contain '|' or ';'.
#
# Every OUTn regex must match stdout, every ERRn regex stderr; NOT_OUT must not match stdout.
# Regexes are CMake regexes ([0-9], +, *, ^, $; "." matches newlines too).

# The command comes in one variable because cmake -P would itself parse options such as -i or
# -o placed after the script, even after "--".
string(REPLACE "|" ";" cmd "${CMD}")
if(NOT cmd)
  message(FATAL_ERROR "expect.cmake: no command given (-DCMD=...)")
endif()
if(NOT DEFINED CWD)
  set(CWD "${CMAKE_CURRENT_BINARY_DIR}")
endif()

execute_process(COMMAND ${cmd} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err
                WORKING_DIRECTORY "${CWD}")

set(problems "")
if(EXPECT_RC STREQUAL "nonzero")
  if(rc EQUAL 0 OR NOT rc MATCHES "^[0-9]+$")
    string(APPEND problems "expected a nonzero exit code, got '${rc}'\n")
  endif()
elseif(NOT rc STREQUAL "${EXPECT_RC}")
  string(APPEND problems "expected exit code ${EXPECT_RC}, got '${rc}'\n")
endif()
foreach(n RANGE 1 12)
  if(DEFINED OUT${n} AND NOT out MATCHES "${OUT${n}}")
    string(APPEND problems "stdout does not match: ${OUT${n}}\n")
  endif()
endforeach()
foreach(n RANGE 1 4)
  if(DEFINED ERR${n} AND NOT err MATCHES "${ERR${n}}")
    string(APPEND problems "stderr does not match: ${ERR${n}}\n")
  endif()
endforeach()
if(DEFINED NOT_OUT AND out MATCHES "${NOT_OUT}")
  string(APPEND problems "stdout should not match: ${NOT_OUT}\n")
endif()

if(problems)
  string(JOIN " " shown ${cmd})
  message(FATAL_ERROR "command: ${shown}\n${problems}--- stdout ---\n${out}--- stderr ---\n${err}")
endif()
