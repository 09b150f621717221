// TensorBoard event files as ReadEventFile reads them (every record's two
// CRCs, then the Event protobuf).
#include <cstddef>
#include <cstdint>

#include "common/summary/event_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)psc::summary::ParseEventFile("fuzz.tfevents",
                                     absl::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
