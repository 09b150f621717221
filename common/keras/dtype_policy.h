// Keras's dtype policies (keras.mixed_precision): what each layer of a
// model computes in. A layer's config carries its policy in every form
// Keras writes: a string ("mixed_bfloat16"), or {"class_name":
// "DTypePolicy" | "FloatDTypePolicy" | "Policy" (Keras 2), "config":
// {"name": ...}}. Variables stay float32 on the servers whatever the policy;
// a layer computes in the policy's compute dtype (its activations and their
// gradients are held in it), and its kernels round the float32 variables
// they read to it, as Keras casts them. Pure functions; thread-safe.
#ifndef PSC_COMMON_KERAS_DTYPE_POLICY_H_
#define PSC_COMMON_KERAS_DTYPE_POLICY_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/compute/dtype.h"

namespace psc {
namespace keras {

// The policies pscluster computes in.
inline constexpr char kSupportedDtypePolicies[] =
    "float32, mixed_bfloat16, mixed_float16, bfloat16, float16";

// The compute dtype of the policy named `name`: float32; mixed_bfloat16 and
// bfloat16 compute in bfloat16, mixed_float16 and float16 in float16
// (bfloat16 and float16 would hold their variables in that dtype too;
// pscluster's servers keep them in float32). INVALID_ARGUMENT naming the
// policy and listing kSupportedDtypePolicies for any other (float64, the
// quantized policies, DTypePolicyMap).
absl::StatusOr<compute::DType> PolicyComputeDtype(absl::string_view name);

// `config_json` (a whole model config) with every layer's dtype policy
// replaced by `policy` (one of kSupportedDtypePolicies), nested layers
// (Bidirectional's) included, InputLayers left as they are (a layer config
// is an object with a class_name and a config holding a "dtype", as Keras
// writes every layer's; initializers and the like have none): the model as
// keras.mixed_precision.set_global_policy(policy) would have built it had
// no layer named its own dtype. INVALID_ARGUMENT for another policy or a
// config that is not JSON.
absl::StatusOr<std::string> WithDtypePolicy(absl::string_view config_json,
                                            absl::string_view policy);

}  // namespace keras
}  // namespace psc

#endif  // PSC_COMMON_KERAS_DTYPE_POLICY_H_
