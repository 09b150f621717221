#include "common/data/numpy_images.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/base/status_macros.h"

namespace psc::data {
namespace {

float LoadFloat(const char* p) {
  float v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

absl::Status CheckType(const NumpyArray& x, absl::string_view what) {
  const NpyType t = x.header().type;
  if (t != NpyType::kUint8 && t != NpyType::kFloat32) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", NpyTypeName(t),
                                                   " inputs; want uint8 or float32 (convert with "
                                                   "x.astype('float32'))"));
  }
  return absl::OkStatus();
}

// The position of flat element `k` of an example of shape dims[1..].
std::string PositionInExample(const std::vector<int64_t>& dims, int64_t k) {
  std::vector<int64_t> at(dims.size() > 1 ? dims.size() - 1 : 0);
  for (size_t d = at.size(); d-- > 0;) {
    at[d] = k % dims[d + 1];
    k /= dims[d + 1];
  }
  if (at.size() == 1) return absl::StrCat(at[0]);
  return absl::StrCat("(", absl::StrJoin(at, ", "), ")");
}

}  // namespace

absl::Status CheckFinite(const NumpyArray& x, absl::string_view what) {
  if (x.header().type != NpyType::kFloat32) return absl::OkStatus();
  const int64_t count = x.header().count;
  const int64_t per = ExampleElements(x);
  if (count == 0 || per == 0) return absl::OkStatus();
  const char* bytes = static_cast<const char*>(x.data());
  constexpr int64_t kChunk = int64_t{16} << 20;
  for (int64_t i = 0; i < count; i += kChunk) {
    const int64_t len = std::min(kChunk, count - i);
    for (int64_t k = i; k < i + len; ++k) {
      const float v = LoadFloat(bytes + k * 4);
      if (!std::isfinite(v)) {
        return absl::InvalidArgumentError(absl::StrCat(
            what, " row ", k / per, ", element ", PositionInExample(x.header().shape, k % per),
            " of the example, is ", std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf"),
            ": pscluster refuses non-finite inputs (replace or drop the row)"));
      }
    }
    x.ReleasePages(static_cast<uint64_t>(i) * 4, static_cast<uint64_t>(len) * 4);
  }
  return absl::OkStatus();
}

std::string Preprocessing::Text() const {
  switch (kind) {
    case Kind::kNone:
      return "none";
    case Kind::kStandardize:
      if (!feature_mean.empty()) {
        return absl::StrFormat("standardize per feature (%d means and stds)", feature_mean.size());
      }
      return absl::StrFormat("standardize (mean %.6g, std %.6g)", mean, std);
    case Kind::kRescale:
      if (offset != 0) return absl::StrFormat("rescale (x %.6g + %.6g)", scale, offset);
      return absl::StrFormat("rescale (x %.6g)", scale);
  }
  return "?";
}

int64_t ExampleElements(const NumpyArray& x) {
  const std::vector<int64_t>& s = x.header().shape;
  if (s.empty()) return 0;
  const int64_t n = s[0];
  return n == 0 ? 0 : x.header().count / n;
}

absl::Status CheckExamples(const NumpyArray& x, const std::vector<int64_t>& example,
                           absl::string_view what) {
  PSC_RETURN_IF_ERROR(CheckType(x, what));
  std::vector<int64_t> got(x.header().shape.begin() + (x.header().shape.empty() ? 0 : 1),
                           x.header().shape.end());
  // (N, H, W) images are (N, H, W, 1) to a channels-last convolution; and
  // (N, H, W, 1) arrays feed an (H, W) input, as Keras squeezes them.
  if (example.size() == 3 && example[2] == 1 && got.size() == 2) got.push_back(1);
  if (example.size() == 2 && got.size() == 3 && got[2] == 1) got.pop_back();
  if (x.header().shape.empty() || got != example) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": examples of shape (", absl::StrJoin(got, ", "),
                     ") for a model whose input is (", absl::StrJoin(example, ", "), ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Preprocessing> FitPreprocessing(const NumpyArray& train, Preprocessing::Kind kind,
                                               double scale, absl::string_view what) {
  const int64_t n = train.header().shape.empty() ? 0 : train.header().shape[0];
  return FitPreprocessing(train, 0, n, kind, scale, what);
}

absl::StatusOr<Preprocessing> FitPreprocessing(const NumpyArray& train, int64_t first, int64_t n,
                                               Preprocessing::Kind kind, double scale,
                                               absl::string_view what, int64_t features) {
  PSC_RETURN_IF_ERROR(CheckType(train, what));
  Preprocessing p;
  p.kind = kind;
  if (kind == Preprocessing::Kind::kRescale) {
    if (!std::isfinite(scale) || scale <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("rescale factor ", scale, " must be finite and > 0"));
    }
    p.scale = scale;
    return p;
  }
  if (kind == Preprocessing::Kind::kNone) return p;
  const int64_t per = ExampleElements(train);
  const int64_t count = n * per;
  if (count == 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": nothing to standardize on"));
  }
  const uint64_t size = NpyTypeSize(train.header().type);
  const uint64_t start = static_cast<uint64_t>(first * per) * size;
  const char* bytes = static_cast<const char*>(train.data()) + start;
  // Elements [i, i + len) at a time; a mapped array's pages are released
  // after each chunk, so the pass leaves nothing resident.
  auto for_each_chunk = [&](auto&& visit) {
    constexpr int64_t kChunk = int64_t{16} << 20;
    for (int64_t i = 0; i < count; i += kChunk) {
      const int64_t len = std::min(kChunk, count - i);
      if (!visit(i, len)) return false;
      train.ReleasePages(start + static_cast<uint64_t>(i) * size,
                         static_cast<uint64_t>(len) * size);
    }
    return true;
  };
  if (features > 0) {
    if (per % features != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": ", features, " features do not divide an example of ", per, " elements"));
    }
    // One mean and std per index of the last axis: element k is feature
    // k % features (examples are contiguous, and start at a multiple).
    std::vector<double> sum(static_cast<size_t>(features), 0.0);
    const bool u8 = train.header().type == NpyType::kUint8;
    auto value = [&](int64_t k) -> double {
      return u8 ? static_cast<double>(static_cast<uint8_t>(bytes[k])) : LoadFloat(bytes + k * 4);
    };
    int64_t bad = -1;
    for_each_chunk([&](int64_t i, int64_t len) {
      for (int64_t k = i; k < i + len; ++k) {
        const double v = value(k);
        if (!std::isfinite(v)) {
          bad = k;
          return false;
        }
        sum[static_cast<size_t>(k % features)] += v;
      }
      return true;
    });
    if (bad >= 0) {  // CheckFinite comes first; this guards a direct caller
      return absl::InvalidArgumentError(
          absl::StrCat(what, " row ", first + bad / per, " is ", value(bad)));
    }
    const double rows = static_cast<double>(count / features);
    p.feature_mean.resize(sum.size());
    for (size_t f = 0; f < sum.size(); ++f) p.feature_mean[f] = sum[f] / rows;
    std::vector<double> sq(sum.size(), 0.0);
    for_each_chunk([&](int64_t i, int64_t len) {
      for (int64_t k = i; k < i + len; ++k) {
        const size_t f = static_cast<size_t>(k % features);
        const double d = value(k) - p.feature_mean[f];
        sq[f] += d * d;
      }
      return true;
    });
    p.feature_std.resize(sum.size());
    for (size_t f = 0; f < sq.size(); ++f) {
      p.feature_std[f] = std::sqrt(sq[f] / rows);
      if (p.feature_std[f] == 0) p.feature_std[f] = 1;
    }
    return p;
  }
  const double total = static_cast<double>(count);
  double squares = 0;
  if (train.header().type == NpyType::kUint8) {
    // A histogram: the exact mean and a two-pass variance in one pass over
    // the bytes, exactly as the Fashion-MNIST loader computes them.
    std::array<int64_t, 256> hist{};
    for_each_chunk([&](int64_t i, int64_t len) {
      for (int64_t k = i; k < i + len; ++k) ++hist[static_cast<uint8_t>(bytes[k])];
      return true;
    });
    int64_t sum = 0;
    for (int v = 0; v < 256; ++v) sum += hist[v] * v;
    p.mean = static_cast<double>(sum) / total;
    for (int v = 0; v < 256; ++v) squares += hist[v] * (v - p.mean) * (v - p.mean);
  } else {
    double sum = 0;
    int64_t bad = -1;
    for_each_chunk([&](int64_t i, int64_t len) {
      for (int64_t k = i; k < i + len; ++k) {
        const double v = LoadFloat(bytes + k * 4);
        if (!std::isfinite(v)) {
          bad = k;
          return false;
        }
        sum += v;
      }
      return true;
    });
    if (bad >= 0) {  // CheckFinite comes first; this guards a direct caller
      return absl::InvalidArgumentError(
          absl::StrCat(what, " row ", first + bad / per, " is ", LoadFloat(bytes + bad * 4)));
    }
    p.mean = sum / total;
    for_each_chunk([&](int64_t i, int64_t len) {
      for (int64_t k = i; k < i + len; ++k) {
        const double d = LoadFloat(bytes + k * 4) - p.mean;
        squares += d * d;
      }
      return true;
    });
  }
  p.std = std::sqrt(squares / total);
  if (p.std == 0) p.std = 1;
  return p;
}

float Preprocess(const Preprocessing& p, float v, size_t feature) {
  switch (p.kind) {
    case Preprocessing::Kind::kStandardize:
      if (!p.feature_mean.empty()) {
        const size_t f = feature % p.feature_mean.size();
        return (v - static_cast<float>(p.feature_mean[f])) / static_cast<float>(p.feature_std[f]);
      }
      return (v - static_cast<float>(p.mean)) / static_cast<float>(p.std);
    case Preprocessing::Kind::kRescale:
      return v * static_cast<float>(p.scale) + static_cast<float>(p.offset);
    case Preprocessing::Kind::kNone:
      break;
  }
  return v;
}

void ReadExamples(const NumpyArray& x, const Preprocessing& p, int64_t first, int64_t n,
                  float* out) {
  const int64_t per = ExampleElements(x);
  const int64_t begin = first * per, end = (first + n) * per;
  const char* bytes = static_cast<const char*>(x.data());
  // In float32, as the Fashion-MNIST loader's table: (x - float(mean)) /
  // float(std), or x * float(scale).
  const float mean = static_cast<float>(p.mean), std = static_cast<float>(p.std),
              scale = static_cast<float>(p.scale), offset = static_cast<float>(p.offset);
  if (p.kind == Preprocessing::Kind::kStandardize && !p.feature_mean.empty()) {
    const size_t features = p.feature_mean.size();
    std::vector<float> m(features), s(features);
    for (size_t f = 0; f < features; ++f) {
      m[f] = static_cast<float>(p.feature_mean[f]);
      s[f] = static_cast<float>(p.feature_std[f]);
    }
    const bool u8 = x.header().type == NpyType::kUint8;
    for (int64_t i = begin; i < end; ++i) {
      const float v =
          u8 ? static_cast<float>(static_cast<uint8_t>(bytes[i])) : LoadFloat(bytes + i * 4);
      const size_t f = static_cast<size_t>(i) % features;
      *out++ = (v - m[f]) / s[f];
    }
    return;
  }
  auto apply = [&](float v) {
    switch (p.kind) {
      case Preprocessing::Kind::kStandardize:
        return (v - mean) / std;
      case Preprocessing::Kind::kRescale:
        return v * scale + offset;
      case Preprocessing::Kind::kNone:
        break;
    }
    return v;
  };
  if (x.header().type == NpyType::kUint8) {
    std::array<float, 256> table;
    for (int v = 0; v < 256; ++v) table[v] = apply(static_cast<float>(v));
    for (int64_t i = begin; i < end; ++i) *out++ = table[static_cast<uint8_t>(bytes[i])];
    return;
  }
  for (int64_t i = begin; i < end; ++i) *out++ = apply(LoadFloat(bytes + i * 4));
}

}  // namespace psc::data
