# With clang, a lock-annotation violation must fail the build
# (-Werror=thread-safety, the top-level CMakeLists.txt): this compiles one
# at configure time and stops the configuration if it compiles.
function(psc_check_thread_safety_is_an_error)
  set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)  # compile only: no main to link
  set(_dir ${CMAKE_BINARY_DIR}/thread_safety_probe)
  file(WRITE ${_dir}/violation.cc [=[
struct __attribute__((capability("mutex"))) Mutex {
  void Lock() __attribute__((acquire_capability()));
  void Unlock() __attribute__((release_capability()));
};
Mutex mu;
int guarded __attribute__((guarded_by(mu))) = 0;
int ReadWithoutTheLock() { return guarded; }
]=])
  # The same code with the lock held must compile: the probe fails for the
  # right reason only.
  file(READ ${_dir}/violation.cc _violation)
  string(REPLACE "int ReadWithoutTheLock() { return guarded; }"
         "int ReadWithTheLock() { mu.Lock(); int v = guarded; mu.Unlock(); return v; }"
         _correct "${_violation}")
  file(WRITE ${_dir}/correct.cc "${_correct}")
  try_compile(_correct_compiled ${_dir}/build_correct SOURCES ${_dir}/correct.cc
              COMPILE_DEFINITIONS -Wthread-safety -Werror=thread-safety
              OUTPUT_VARIABLE _out_correct)
  try_compile(_compiled ${_dir}/build SOURCES ${_dir}/violation.cc
              COMPILE_DEFINITIONS -Wthread-safety -Werror=thread-safety
              OUTPUT_VARIABLE _out)
  if(NOT _correct_compiled)
    message(FATAL_ERROR "pscluster: the thread-safety probe's correct code does not compile:\n"
                        "${_out_correct}")
  endif()
  if(_compiled)
    message(FATAL_ERROR "pscluster: a guarded_by violation compiled; -Werror=thread-safety is not "
                        "in effect with ${CMAKE_CXX_COMPILER}")
  endif()
  message(STATUS "pscluster: lock-annotation violations are errors (clang -Werror=thread-safety)")
endfunction()
