// The translation unit that builds tests/pch/test_pch.h's precompiled header
// (cmake/PscTestPch.cmake); it defines nothing.
