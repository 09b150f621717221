# The test code's compile options, and the precompiled header every test
# target reuses.
#
#   psc_test_code_options(target)   what a test's own code compiles with
#   psc_test_pch_target()           psc_test_pch: builds tests/pch/test_pch.h
#                                   once (PSC_PCH=ON, the default)
#
# A test batch parses GoogleTest, gMock, Abseil, protobuf, gRPC and
# nlohmann::json before any of its own code: 4.7 s with GCC and 4.9 s with
# clang (ASan+UBSan) per batch on a 2-vCPU AMD EPYC, against 1.1 s and
# 0.14 s to load them precompiled. Every test batch of a build (about a
# hundred in the Release and ASan builds, a dozen in the TSan build) loads
# them instead.
#
# A precompiled header is used only where it was built with the same
# optimization level and thread flag: clang refuses a mismatch, and GCC,
# which would silently parse the headers instead, is told to refuse it too
# (-Werror=invalid-pch). psc_test_code_options gives the provider and every
# test the same ones, and -pthread to all of them. ccache caches such
# compiles only with CCACHE_SLOPPINESS pch_defines,time_macros
# (tests/run_all.sh sets it) and, with clang, a header built with
# -fno-pch-timestamp (a fresh clone's files have new times, which clang
# would write into it, so every compile using it would miss).
option(PSC_PCH "Precompile the headers every test batch parses" ON)

function(psc_test_code_options target)
  # A test's own code compiles at -O1 in a Release build: GCC takes half as
  # long as at -O3 (keras_test's batch: 72 s against 146 s), and test
  # objects were two thirds of the build's; the libraries it tests keep the
  # build type's -O3. In the ASan build (clang, -O1) it compiles at -O0:
  # clang's optimizer over ASan+UBSan-instrumented code is most of a test
  # batch's time (ps_client_test's: 12 s at -O0, 27-34 s at -O1), and test
  # objects were 3/5 of the ASan build's compile time. The libraries keep
  # -O1, but for what the linker takes from a test object: an inline
  # function both instantiate (a container's, a json accessor) may come from
  # the test's -O0 copy.
  # Not in the TSan build, whose test binaries are linked with -rdynamic
  # (tests/sanitizers/absl_mutex_tsan.cc): at -O0 they export the out-of-line
  # copies of Abseil's inline functions, instrumented, and Debian's
  # uninstrumented libabsl then calls them (Notification::Notify reading its
  # flag after the waiter's stack was reused: a report where no race is).
  if(PSC_SANITIZE STREQUAL "thread")
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-pthread>)
  elseif(PSC_SANITIZE)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-O0>
                                             $<$<COMPILE_LANGUAGE:CXX>:-pthread>)
  else()
    target_compile_options(${target}
                           PRIVATE $<$<AND:$<CONFIG:Release>,$<COMPILE_LANGUAGE:CXX>>:-O1>
                                   $<$<COMPILE_LANGUAGE:CXX>:-pthread>)
  endif()
  if(PSC_PCH AND TARGET psc_test_pch AND NOT target STREQUAL "psc_test_pch")
    target_precompile_headers(${target} REUSE_FROM psc_test_pch)
    if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
      target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Werror=invalid-pch>)
    endif()
  endif()
endfunction()

function(psc_test_pch_target)
  if(NOT PSC_PCH)
    return()
  endif()
  add_library(psc_test_pch OBJECT ${PROJECT_SOURCE_DIR}/tests/pch/test_pch.cc)
  target_link_libraries(psc_test_pch PRIVATE GTest::gmock GTest::gtest absl::status
                        absl::statusor absl::strings absl::str_format absl::synchronization
                        absl::time absl::span absl::flat_hash_map protobuf::libprotobuf
                        gRPC::grpc++ nlohmann_json::nlohmann_json)
  target_precompile_headers(psc_test_pch PRIVATE ${PROJECT_SOURCE_DIR}/tests/pch/test_pch.h)
  if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    target_compile_options(psc_test_pch PRIVATE "SHELL:-Xclang -fno-pch-timestamp")
  endif()
  psc_test_code_options(psc_test_pch)
endfunction()
