#include "common/base/float_formats.h"

#include <cmath>
#include <cstring>

namespace psc {
namespace {

uint32_t Bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof(b));
  return b;
}

float FromBits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof(f));
  return f;
}

// x >> shift rounded to nearest, ties to even; 1 <= shift <= 31.
uint32_t ShiftRoundEven(uint32_t x, int shift) {
  const uint32_t q = x >> shift;
  const uint32_t rest = x & ((uint32_t{1} << shift) - 1);
  const uint32_t half = uint32_t{1} << (shift - 1);
  return q + ((rest > half || (rest == half && (q & 1))) ? 1 : 0);
}

}  // namespace

uint16_t FloatToBfloat16(float value) {
  const uint32_t b = Bits(value);
  if ((b & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((b >> 16) | 0x40);  // NaN
  // Adding 0x7fff (+1 when the kept part is odd) carries exactly when the
  // dropped half is above (or at, for odd) one half: round to nearest even.
  return static_cast<uint16_t>((b + 0x7fffu + ((b >> 16) & 1)) >> 16);
}

float Bfloat16ToFloat(uint16_t bits) { return FromBits(uint32_t{bits} << 16); }

uint16_t FloatToFloat16(float value) {
  const uint32_t b = Bits(value);
  const uint16_t sign = static_cast<uint16_t>((b >> 16) & 0x8000u);
  const uint32_t x = b & 0x7fffffffu;
  if (x >= 0x7f800000u) {  // infinity, NaN (kept quiet)
    return static_cast<uint16_t>(sign | 0x7c00u | (x > 0x7f800000u ? 0x200u : 0u));
  }
  const int e = static_cast<int>(x >> 23);                     // float's biased exponent
  if (e >= 143) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65536
  if (e >= 113) {
    // Normal in float16: exponent e - 112, 10 mantissa bits. A carry out
    // of the mantissa raises the exponent, up to infinity (0x7c00).
    const uint32_t h = ((static_cast<uint32_t>(e) - 112) << 23) | (x & 0x7fffffu);
    return static_cast<uint16_t>(sign | ShiftRoundEven(h, 13));
  }
  // Below 2^-14: a multiple of 2^-24 (subnormal), or zero.
  const int shift = 126 - e;  // value * 2^24 == mantissa_with_one >> shift
  if (shift > 25) return sign;
  const uint32_t m = (x & 0x7fffffu) | (e > 0 ? 0x800000u : 0u);
  return static_cast<uint16_t>(sign | ShiftRoundEven(m, shift));
}

float Float16ToFloat(uint16_t bits) {
  const uint32_t sign = uint32_t{bits & 0x8000u} << 16;
  const uint32_t e = (bits >> 10) & 0x1fu;
  const uint32_t m = bits & 0x3ffu;
  if (e == 0) {
    const float magnitude = std::ldexp(static_cast<float>(m), -24);  // exact
    return sign != 0 ? -magnitude : magnitude;
  }
  if (e == 31) return FromBits(sign | 0x7f800000u | (m << 13));
  return FromBits(sign | ((e + 112) << 23) | (m << 13));
}

}  // namespace psc
