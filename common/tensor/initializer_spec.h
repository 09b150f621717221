// An initializer's wire form (proto::InitializerSpec): what the chief sends
// the servers that make an embedding table's rows themselves.
#ifndef PSC_COMMON_TENSOR_INITIALIZER_SPEC_H_
#define PSC_COMMON_TENSOR_INITIALIZER_SPEC_H_

#include "absl/status/status.h"
#include "common/tensor/initializer.h"
#include "proto/common.pb.h"

namespace psc {
namespace tensor {

// INVALID_ARGUMENT (FromProto) for an unknown kind, or bounds whose values
// a float32 cannot hold (a bound or a uniform range beyond FLT_MAX, a
// normal's standard deviation negative or beyond FLT_MAX / 8).
proto::InitializerSpec ToProto(const Initializer& init);
absl::Status FromProto(const proto::InitializerSpec& spec, Initializer* init);

}  // namespace tensor
}  // namespace psc

#endif  // PSC_COMMON_TENSOR_INITIALIZER_SPEC_H_
