// TFRecord files as a data job reads them: the compression seen from the
// first bytes, gzip and zlib inflated, each record's length checked against
// the limit (1 MiB here) and both its CRCs, then parsed as a
// tf.train.Example and described.
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/io/string_file.h"
#include "common/tfrecord/example.h"
#include "common/tfrecord/record_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto reader = psc::tfrecord::RecordReader::Open(
      psc::io::NewStringFile("fuzz.tfrecord",
                             std::string(reinterpret_cast<const char*>(data), size)),
      std::nullopt, uint64_t{1} << 20);
  if (!reader.ok()) return 0;
  std::string record;
  for (int i = 0; i < 1000; ++i) {
    bool end = false;
    if (!(*reader)->Next(&record, &end).ok() || end) break;
    psc::tfexample::Example example;
    if (psc::tfrecord::ParseExample(record, "fuzz", &example).ok()) {
      (void)psc::tfrecord::DescribeExample(example, 4);
    }
  }
  return 0;
}
