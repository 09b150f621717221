# Small helpers in the Abseil style: one call per library, test or binary, with
# sources listed explicitly.
#
#   psc_cc_library(NAME foo SRCS a.cc HDRS a.h DEPS psc::bar PUBLIC_DEPS ... [GRPC])
#     -> target psc_foo with alias psc::foo; DEPS link PRIVATE, PUBLIC_DEPS PUBLIC.
#   psc_cc_test(NAME foo_test SRCS foo_test.cc DEPS psc::foo LABELS unit [TIMEOUT s]
#               [NO_UNITY] [NO_SANITIZER])
#     -> one GoogleTest binary in <build>/bin, registered with ctest by test
#        name (gtest_discover_tests) and labelled.
#   psc_cc_binary(NAME ps_server SRCS main.cc DEPS psc::ps_server)
#
# Transport-free by default. Only a library declared GRPC (the rpc and daemon
# modules, the generated service stubs, and each role's *_service library) may
# use gRPC. Every other library is checked twice:
#  - at compile time: its sources see a directory of poisoned gRPC headers
#    before the system's, so including <grpcpp/...> (directly or through
#    another module's header) is an #error;
#  - at configure time (psc_check_transport_free, called last by the top-level
#    CMakeLists): its link closure may not reach gRPC or a GRPC library.

# The poisoned headers: one per header of the installed gRPC C++ API.
function(psc_make_grpc_poison out_dir)
  set(_roots "")
  foreach(_t gRPC::grpc++ gRPC::grpc)
    if(TARGET ${_t})
      get_target_property(_inc ${_t} INTERFACE_INCLUDE_DIRECTORIES)
      if(_inc)
        list(APPEND _roots ${_inc})
      endif()
    endif()
  endforeach()
  list(APPEND _roots /usr/include)
  list(REMOVE_DUPLICATES _roots)
  set(_count 0)
  foreach(_root IN LISTS _roots)
    foreach(_sub grpcpp grpc++ grpc)
      file(GLOB_RECURSE _headers RELATIVE ${_root} ${_root}/${_sub}/*.h)
      foreach(_h IN LISTS _headers)
        set(_p ${out_dir}/${_h})
        if(NOT EXISTS ${_p})
          file(WRITE ${_p}
            "#error \"<${_h}> in a transport-free library: only GRPC libraries (cmake/PscHelpers.cmake) may use gRPC\"\n")
        endif()
        math(EXPR _count "${_count} + 1")
      endforeach()
    endforeach()
  endforeach()
  if(_count EQUAL 0)
    message(FATAL_ERROR "psc_make_grpc_poison: no gRPC headers found under ${_roots}")
  endif()
endfunction()

set(PSC_GRPC_POISON_DIR ${CMAKE_BINARY_DIR}/transport_free)

function(psc_cc_library)
  cmake_parse_arguments(PSC "GRPC" "NAME" "SRCS;HDRS;DEPS;PUBLIC_DEPS" ${ARGN})
  set(target psc_${PSC_NAME})
  if(PSC_SRCS)
    add_library(${target} STATIC ${PSC_SRCS} ${PSC_HDRS})
    # A file that defines flags stays an archive member of its own: a binary
    # links it only when it uses them (the launcher defines some of the same
    # names), as without unity builds.
    foreach(_src IN LISTS PSC_SRCS)
      if(_src MATCHES "\\.cc$")
        file(STRINGS ${CMAKE_CURRENT_SOURCE_DIR}/${_src} _flags REGEX "^ABSL_FLAG\\(" LIMIT_COUNT 1)
        if(_flags)
          set_source_files_properties(${_src} PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
        endif()
      endif()
    endforeach()
    target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
    target_link_libraries(${target} PRIVATE ${PSC_DEPS} PUBLIC ${PSC_PUBLIC_DEPS})
    if(NOT PSC_GRPC)
      target_include_directories(${target} BEFORE PRIVATE ${PSC_GRPC_POISON_DIR})
    endif()
  else()
    add_library(${target} INTERFACE ${PSC_HDRS})
    target_include_directories(${target} INTERFACE ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
    target_link_libraries(${target} INTERFACE ${PSC_DEPS} ${PSC_PUBLIC_DEPS})
  endif()
  add_library(psc::${PSC_NAME} ALIAS ${target})
  if(PSC_GRPC)
    set_property(GLOBAL APPEND PROPERTY PSC_GRPC_TARGETS ${target})
  else()
    set_property(GLOBAL APPEND PROPERTY PSC_TRANSPORT_FREE_TARGETS ${target})
  endif()
endfunction()

# Appends to `out` every target reachable from `target` through its link
# libraries (PRIVATE and INTERFACE), resolving aliases.
function(_psc_link_closure target out)
  set(_seen "")
  set(_todo ${target})
  while(_todo)
    list(POP_FRONT _todo _t)
    if(NOT TARGET ${_t})
      continue()
    endif()
    get_target_property(_real ${_t} ALIASED_TARGET)
    if(_real)
      set(_t ${_real})
    endif()
    if(_t IN_LIST _seen)
      continue()
    endif()
    list(APPEND _seen ${_t})
    get_target_property(_type ${_t} TYPE)
    set(_libs "")
    if(NOT _type STREQUAL "INTERFACE_LIBRARY")
      get_target_property(_l ${_t} LINK_LIBRARIES)
      if(_l)
        list(APPEND _libs ${_l})
      endif()
    endif()
    get_target_property(_l ${_t} INTERFACE_LINK_LIBRARIES)
    if(_l)
      list(APPEND _libs ${_l})
    endif()
    foreach(_x IN LISTS _libs)
      string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" _x "${_x}")
      if(TARGET ${_x})
        list(APPEND _todo ${_x})
      endif()
    endforeach()
  endwhile()
  set(${out} ${_seen} PARENT_SCOPE)
endfunction()

# Fails the configuration if a transport-free library links gRPC.
function(psc_check_transport_free)
  get_property(_free GLOBAL PROPERTY PSC_TRANSPORT_FREE_TARGETS)
  get_property(_grpc GLOBAL PROPERTY PSC_GRPC_TARGETS)
  set(_forbidden ${_grpc})
  foreach(_t gRPC::grpc++ gRPC::grpc)
    if(TARGET ${_t})
      get_target_property(_real ${_t} ALIASED_TARGET)
      list(APPEND _forbidden ${_t})
    endif()
  endforeach()
  foreach(_t IN LISTS _free)
    _psc_link_closure(${_t} _closure)
    foreach(_c IN LISTS _closure)
      if(_c IN_LIST _forbidden)
        message(FATAL_ERROR "${_t} is transport-free but links ${_c}; a core must not reach gRPC "
                            "(declare the library GRPC only if it is an adapter over gRPC)")
      endif()
    endforeach()
  endforeach()
  list(LENGTH _free _n)
  message(STATUS "pscluster: ${_n} transport-free libraries, none reaches gRPC")
  # For tests/core_rules_test.py.
  string(REPLACE ";" "\n" _lines "${_free}")
  file(WRITE ${CMAKE_BINARY_DIR}/transport_free_targets.txt "${_lines}\n")
endfunction()

# Without PSC_BUILD_TESTING, defines nothing.
function(psc_cc_test)
  if(NOT PSC_BUILD_TESTING)
    return()
  endif()
  cmake_parse_arguments(PSC "NO_UNITY;NO_SANITIZER" "NAME;TIMEOUT" "SRCS;DEPS;LABELS" ${ARGN})
  if(NOT PSC_LABELS)
    set(PSC_LABELS unit)
  endif()
  if(NOT PSC_TIMEOUT)
    set(PSC_TIMEOUT 120)
  endif()
  add_executable(${PSC_NAME} ${PSC_SRCS})
  if(PSC_NO_UNITY)
    # Its files each keep helpers of the same names (Config, TempPath, ...).
    set_target_properties(${PSC_NAME} PROPERTIES UNITY_BUILD OFF)
  endif()
  target_include_directories(${PSC_NAME} PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
  target_link_libraries(${PSC_NAME} PRIVATE ${PSC_DEPS} GTest::gmock GTest::gtest_main)
  # Its optimization level and the precompiled header (cmake/PscTestPch.cmake).
  psc_test_code_options(${PSC_NAME})
  if(PSC_SANITIZE STREQUAL "thread")
    # absl::Mutex made visible to TSan (tests/sanitizers/absl_mutex_tsan.cc).
    target_sources(${PSC_NAME} PRIVATE ${PROJECT_SOURCE_DIR}/tests/sanitizers/absl_mutex_tsan.cc)
    target_link_libraries(${PSC_NAME} PRIVATE ${CMAKE_DL_LIBS})
    target_link_options(${PSC_NAME} PRIVATE -rdynamic)
  endif()
  # The fault tests' kills, restarts and heartbeats are timed: they never run
  # beside the compose test, whose engine and containers load the machine
  # beyond ctest's -j count (tests/CMakeLists.txt, ComposeClusterTest).
  set(_lock "")
  set(_lock_text "")
  if("fault" IN_LIST PSC_LABELS)
    set(_lock RESOURCE_LOCK psc_machine_load)
    set(_lock_text " RESOURCE_LOCK psc_machine_load")
  endif()
  gtest_discover_tests(${PSC_NAME}
    PROPERTIES LABELS "${PSC_LABELS}" TIMEOUT ${PSC_TIMEOUT} ${_lock}
    DISCOVERY_TIMEOUT 60)
  list(LENGTH PSC_LABELS _count)
  if(_count GREATER 1)
    # CMake 3.25's discovery writes a list-valued property as separate
    # words (which shifts the properties after it); the labels, and the
    # lock, are set again, whole, once the tests are known.
    set(_file ${CMAKE_CURRENT_BINARY_DIR}/${PSC_NAME}_labels.cmake)
    file(WRITE ${_file} "foreach(_t IN LISTS ${PSC_NAME}_TESTS)\n"
                        "  set_tests_properties(\${_t} PROPERTIES LABELS \"${PSC_LABELS}\"${_lock_text})\n"
                        "endforeach()\n")
    set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${_file})
  endif()
  # For psc_sanitizer_tests: ctest knows a binary's tests only once it is
  # built (discovery), so the sanitizer stage picks its binaries by label
  # here (NO_SANITIZER: the benchmarks' test, whose figures mean nothing
  # sanitized).
  if(("unit" IN_LIST PSC_LABELS OR "integration" IN_LIST PSC_LABELS) AND NOT PSC_NO_SANITIZER)
    set_property(GLOBAL APPEND PROPERTY PSC_UNIT_INTEGRATION_TESTS ${PSC_NAME})
  endif()
endfunction()

# psc_sanitizer_tests: every test binary with a unit or integration label
# (tests/sanitizers/run_sanitizers.sh builds it, the daemons and the fuzzers).
function(psc_sanitizer_tests_target)
  get_property(_tests GLOBAL PROPERTY PSC_UNIT_INTEGRATION_TESTS)
  if(_tests)
    add_custom_target(psc_sanitizer_tests)
    add_dependencies(psc_sanitizer_tests ${_tests})
  endif()
endfunction()

function(psc_cc_binary)
  cmake_parse_arguments(PSC "" "NAME" "SRCS;DEPS" ${ARGN})
  add_executable(${PSC_NAME} ${PSC_SRCS})
  target_include_directories(${PSC_NAME} PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
  target_link_libraries(${PSC_NAME} PRIVATE ${PSC_DEPS})
endfunction()
