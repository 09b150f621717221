# Sanitizer and fuzzing builds (clang; docs/reliability.md).
#
#   PSC_SANITIZE=address,undefined   ASan + UBSan on everything we compile
#   PSC_SANITIZE=thread              TSan (tests/sanitizers/run_tsan.sh)
#   PSC_FUZZ=ON                      libFuzzer targets in tests/fuzz (clang);
#                                    the libraries get -fsanitize=fuzzer-no-link
#
# Debian's gRPC, protobuf, Abseil and oneDNN stay uninstrumented: ASan and
# UBSan check our code and what it passes them; TSan cannot see their locks.
set(PSC_SANITIZE "" CACHE STRING "Sanitizers to build with: address,undefined | thread | empty")
option(PSC_FUZZ "Build the libFuzzer targets (clang)" OFF)

if(PSC_SANITIZE OR PSC_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "PSC_SANITIZE and PSC_FUZZ need clang: "
                        "cmake -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++")
  endif()
endif()

if(PSC_SANITIZE)
  if(NOT PSC_SANITIZE MATCHES "^(address,undefined|undefined,address|address|undefined|thread)$")
    message(FATAL_ERROR "PSC_SANITIZE must be address,undefined, address, undefined or thread, "
                        "not '${PSC_SANITIZE}'")
  endif()
  set(_psc_san -fsanitize=${PSC_SANITIZE} -fno-omit-frame-pointer)
  if(PSC_SANITIZE MATCHES "undefined")
    # Every UBSan finding is fatal, so a test that triggers one fails.
    list(APPEND _psc_san -fno-sanitize-recover=all)
  endif()
  add_compile_options(${_psc_san})
  add_link_options(${_psc_san})
endif()

if(PSC_FUZZ)
  add_compile_options(-fsanitize=fuzzer-no-link)
  if(NOT PSC_SANITIZE)
    add_compile_options(-fsanitize=address -fno-omit-frame-pointer)
    add_link_options(-fsanitize=address)
  endif()
endif()
