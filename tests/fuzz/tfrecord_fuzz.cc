// TFRecord files as a data job reads them: the compression seen from the
// first bytes, gzip and zlib inflated, each record's length checked against
// the limit (1 MiB here) and both its CRCs, then parsed as a
// tf.train.Example and described, and the scanner (example_scan.h) must
// find what protobuf parsed, value for value, where it scans the record.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/io/string_file.h"
#include "common/tfrecord/example.h"
#include "common/tfrecord/example_scan.h"
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
      // The scanner finds what protobuf parsed, value for value.
      std::vector<std::string> names;
      for (const auto& [name, f] : example.features().feature()) names.push_back(name);
      names.push_back("absent");
      psc::tfrecord::ExampleScanner scanner(names);
      if (!scanner.Scan(record)) continue;  // left to protobuf: allowed
      for (size_t i = 0; i + 1 < names.size(); ++i) {
        const psc::tfexample::Feature& f = example.features().feature().at(names[i]);
        if (!scanner.found(static_cast<int>(i))) __builtin_trap();
        std::vector<float> floats;
        std::vector<int64_t> ints;
        std::vector<absl::string_view> bytes;
        using Kind = psc::tfrecord::ExampleScanner::Kind;
        switch (f.kind_case()) {
          case psc::tfexample::Feature::kFloatList:
            if (scanner.kind(i) != Kind::kFloat || !scanner.Floats(i, &floats) ||
                floats.size() != static_cast<size_t>(f.float_list().value_size()) ||
                (!floats.empty() && std::memcmp(floats.data(), f.float_list().value().data(),
                                                floats.size() * 4) != 0)) {
              __builtin_trap();
            }
            break;
          case psc::tfexample::Feature::kInt64List:
            if (scanner.kind(i) != Kind::kInt64 || !scanner.Int64s(i, &ints) ||
                ints.size() != static_cast<size_t>(f.int64_list().value_size())) {
              __builtin_trap();
            }
            for (size_t k = 0; k < ints.size(); ++k) {
              if (ints[k] != f.int64_list().value(static_cast<int>(k))) __builtin_trap();
            }
            break;
          case psc::tfexample::Feature::kBytesList:
            if (scanner.kind(i) != Kind::kBytes || !scanner.Bytes(i, &bytes) ||
                bytes.size() != static_cast<size_t>(f.bytes_list().value_size())) {
              __builtin_trap();
            }
            for (size_t k = 0; k < bytes.size(); ++k) {
              if (bytes[k] != f.bytes_list().value(static_cast<int>(k))) __builtin_trap();
            }
            break;
          case psc::tfexample::Feature::KIND_NOT_SET:
            if (scanner.kind(i) != Kind::kEmpty) __builtin_trap();
            break;
        }
      }
      if (scanner.found(static_cast<int>(names.size() - 1)) &&
          example.features().feature().count("absent") == 0) {
        __builtin_trap();
      }
    }
  }
  return 0;
}
