// The 16-bit floats a tensor may be held or sent in: bfloat16 (float32's
// exponent, 8 significant bits) and IEEE float16 (5-bit exponent, 11
// significant bits). Conversions round to nearest, ties to even; NaN stays
// NaN, infinities stay infinities, and a finite float beyond float16's range
// becomes infinity. Pure functions; thread-safe.
#ifndef PSC_COMMON_BASE_FLOAT_FORMATS_H_
#define PSC_COMMON_BASE_FLOAT_FORMATS_H_

#include <cstdint>

namespace psc {

uint16_t FloatToBfloat16(float value);
float Bfloat16ToFloat(uint16_t bits);
uint16_t FloatToFloat16(float value);
float Float16ToFloat(uint16_t bits);

}  // namespace psc

#endif  // PSC_COMMON_BASE_FLOAT_FORMATS_H_
