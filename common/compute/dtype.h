// The element types of tensors: in a model's graph (layer_graph.h) and in a
// backend's memory (backend.h's DeviceTensor). Variables and their gradients
// are float32; activations and their gradients are float32, or under a
// mixed-precision policy (keras/dtype_policy.h) the layer's compute dtype,
// bfloat16 or float16 (common/base/float_formats.h); ids (embedding
// lookups, class labels) are int32 or int64; float64 holds what is summed in
// double on the device (a loss's total).
#ifndef PSC_COMMON_COMPUTE_DTYPE_H_
#define PSC_COMMON_COMPUTE_DTYPE_H_

#include <cstddef>
#include <cstdint>

namespace psc {
namespace compute {

enum class DType { kFloat32, kInt32, kInt64, kFloat64, kBFloat16, kFloat16 };

// The floats an activation may be held in: float32, bfloat16, float16.
inline bool IsActivationFloat(DType dtype) {
  return dtype == DType::kFloat32 || dtype == DType::kBFloat16 || dtype == DType::kFloat16;
}
// bfloat16 and float16.
inline bool IsLowPrecision(DType dtype) {
  return dtype == DType::kBFloat16 || dtype == DType::kFloat16;
}

// "float32", "int32", "int64", "float64", "bfloat16", "float16": as NumPy
// and Keras name them.
inline const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return "float32";
    case DType::kInt32:
      return "int32";
    case DType::kInt64:
      return "int64";
    case DType::kFloat64:
      return "float64";
    case DType::kBFloat16:
      return "bfloat16";
    case DType::kFloat16:
      return "float16";
  }
  return "unknown";
}

// Bytes per element.
inline size_t DTypeSize(DType dtype) {
  if (IsLowPrecision(dtype)) return 2;
  return dtype == DType::kInt64 || dtype == DType::kFloat64 ? 8 : 4;
}

// The DType of a C++ element type, for the typed host copies.
template <typename T>
struct DTypeOf;
template <>
struct DTypeOf<float> {
  static constexpr DType value = DType::kFloat32;
};
template <>
struct DTypeOf<int32_t> {
  static constexpr DType value = DType::kInt32;
};
template <>
struct DTypeOf<int64_t> {
  static constexpr DType value = DType::kInt64;
};
template <>
struct DTypeOf<double> {
  static constexpr DType value = DType::kFloat64;
};

}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_DTYPE_H_
