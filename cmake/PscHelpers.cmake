# Small helpers in the Abseil style: one call per library, test or binary, with
# sources listed explicitly.
#
#   psc_cc_library(NAME foo SRCS a.cc HDRS a.h DEPS psc::bar PUBLIC_DEPS ...)
#     -> target psc_foo with alias psc::foo; DEPS link PRIVATE, PUBLIC_DEPS PUBLIC.
#   psc_cc_test(NAME foo_test SRCS foo_test.cc DEPS psc::foo LABELS unit [TIMEOUT s])
#     -> one GoogleTest binary in <build>/bin, registered with ctest by test
#        name (gtest_discover_tests) and labelled.
#   psc_cc_binary(NAME ps_server SRCS main.cc DEPS psc::ps_server)

function(psc_cc_library)
  cmake_parse_arguments(PSC "" "NAME" "SRCS;HDRS;DEPS;PUBLIC_DEPS" ${ARGN})
  set(target psc_${PSC_NAME})
  if(PSC_SRCS)
    add_library(${target} STATIC ${PSC_SRCS} ${PSC_HDRS})
    target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
    target_link_libraries(${target} PRIVATE ${PSC_DEPS} PUBLIC ${PSC_PUBLIC_DEPS})
  else()
    add_library(${target} INTERFACE ${PSC_HDRS})
    target_include_directories(${target} INTERFACE ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
    target_link_libraries(${target} INTERFACE ${PSC_DEPS} ${PSC_PUBLIC_DEPS})
  endif()
  add_library(psc::${PSC_NAME} ALIAS ${target})
endfunction()

function(psc_cc_test)
  cmake_parse_arguments(PSC "" "NAME;TIMEOUT" "SRCS;DEPS;LABELS" ${ARGN})
  if(NOT PSC_LABELS)
    set(PSC_LABELS unit)
  endif()
  if(NOT PSC_TIMEOUT)
    set(PSC_TIMEOUT 120)
  endif()
  add_executable(${PSC_NAME} ${PSC_SRCS})
  target_include_directories(${PSC_NAME} PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
  target_link_libraries(${PSC_NAME} PRIVATE ${PSC_DEPS} GTest::gmock GTest::gtest_main)
  target_compile_definitions(${PSC_NAME} PRIVATE PSC_BIN_DIR="${PSC_BIN_DIR}"
                             PSC_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  gtest_discover_tests(${PSC_NAME}
    PROPERTIES LABELS "${PSC_LABELS}" TIMEOUT ${PSC_TIMEOUT}
    DISCOVERY_TIMEOUT 60)
endfunction()

function(psc_cc_binary)
  cmake_parse_arguments(PSC "" "NAME" "SRCS;DEPS" ${ARGN})
  add_executable(${PSC_NAME} ${PSC_SRCS})
  target_include_directories(${PSC_NAME} PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
  target_link_libraries(${PSC_NAME} PRIVATE ${PSC_DEPS})
endfunction()
