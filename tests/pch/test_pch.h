// The headers every test batch parses, precompiled once per build
// (cmake/PscTestPch.cmake) and reused by every test target: GoogleTest and
// gMock, the Abseil, protobuf and gRPC headers the modules' interfaces
// include, nlohmann::json and the standard library. Only headers from the
// system's packages, never the project's, so a change to the project's
// headers does not recompile it. Each source still includes what it uses
// (nothing checks that but a build with -DPSC_PCH=OFF).
#ifndef PSC_TESTS_PCH_TEST_PCH_H_
#define PSC_TESTS_PCH_TEST_PCH_H_

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "gmock/gmock.h"
#include "google/protobuf/arena.h"
#include "google/protobuf/extension_set.h"
#include "google/protobuf/generated_message_reflection.h"
#include "google/protobuf/generated_message_util.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/map.h"
#include "google/protobuf/map_field_inl.h"
#include "google/protobuf/message.h"
#include "google/protobuf/repeated_field.h"
#include "google/protobuf/unknown_field_set.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

#endif  // PSC_TESTS_PCH_TEST_PCH_H_
