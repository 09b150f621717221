// The CPU backend's tensor: host memory that holds a logical shape (backend.h's
// layouts) in one of a few physical layouts, and the reorders between them.
//
// A 4-D activation [N,H,W,C] is stored either plain (NHWC, the logical layout)
// or channel-blocked as oneDNN's nChw8c / nChw16c: [N][C/b][H][W][b], which is
// what its Winograd and blocked direct kernels read and write. Ops set the
// layout of what they write; ops that read a layout they cannot use reorder it
// into a scratch buffer first; CopyToHost always returns the plain layout. A
// blocked layout is used only when b divides C, so no channel is padding, and
// a blocked tensor is then, element for element, an NHWC tensor of N*C/b
// images with b channels: pooling and ReLU backward run on it unchanged.
//
// Every 4-D float tensor (float32, bfloat16, float16) is allocated with room
// for its largest blocked layout, so an op can switch the layout of its
// output without allocating. Tensors of ids (int32, int64) are always plain.
#ifndef PSC_COMMON_COMPUTE_CPU_TENSOR_H_
#define PSC_COMMON_COMPUTE_CPU_TENSOR_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/compute/backend.h"
#include "common/compute/cpu_batch_norm.h"
#include "dnnl.hpp"

namespace psc {
namespace compute {
namespace cpu {

enum class Layout { kPlain, kBlocked8, kBlocked16 };

// oneDNN's data type of a float dtype (float32, bfloat16, float16; f32 for
// any other).
dnnl::memory::data_type OneDnnType(DType dtype);

// The oneDNN description of a logical shape in `layout` (plain: NHWC for rank
// 4, row-major otherwise; blocked only for rank 4), of `dtype`'s elements.
dnnl::memory::desc DescFor(const Shape& shape, Layout layout, DType dtype = DType::kFloat32);

// The layout `desc` is for `shape`, if it is one of ours and blocked only with
// a block that divides C; nullopt otherwise. Of any float dtype (desc's).
std::optional<Layout> LayoutOf(const Shape& shape, const dnnl::memory::desc& desc);

class CpuTensor : public DeviceTensor {
 public:
  // Zero-filled, plain; RESOURCE_EXHAUSTED when memory runs out and
  // INVALID_ARGUMENT when the byte count overflows.
  static absl::StatusOr<std::unique_ptr<CpuTensor>> Create(const Shape& shape,
                                                           DType dtype = DType::kFloat32);
  ~CpuTensor() override;

  Layout layout() const { return layout_; }
  void set_layout(Layout layout) { layout_ = layout; }
  const dnnl::memory::desc& desc() const;
  // The dims an NHWC loop over the physical data sees: [N*C/b, H, W, b] when
  // blocked, the shape when plain (rank 4 only).
  Shape PhysicalNhwc() const;

  // The elements of a float32 tensor (ops check the dtype first).
  float* data() { return static_cast<float*>(data_); }
  const float* data() const { return static_cast<const float*>(data_); }
  // The elements as bytes, in any dtype.
  void* raw() { return data_; }
  const void* raw() const { return data_; }

 private:
  CpuTensor(Shape shape, DType dtype, void* data);
  void* const data_;
  Layout layout_ = Layout::kPlain;
  mutable std::vector<std::pair<Layout, dnnl::memory::desc>> descs_;  // by layout, made on use
};

inline CpuTensor& Cpu(DeviceTensor* t) { return *static_cast<CpuTensor*>(t); }
inline const CpuTensor& Cpu(const DeviceTensor& t) { return static_cast<const CpuTensor&>(t); }
// A float32 tensor's elements, as held.
inline const float* Data(const DeviceTensor& t) { return Cpu(t).data(); }
inline float* Data(DeviceTensor* t) { return Cpu(t).data(); }
// An input's elements as oneDNN memory takes them (not const; it only
// reads an input).
inline float* Mutable(const DeviceTensor& t) { return const_cast<float*>(Data(t)); }

// The channel layout (cpu_batch_norm.h) of x as held: [N,H,W,C] plain or
// blocked, or [N,C] plain; INVALID_ARGUMENT naming `op` for another rank.
absl::StatusOr<ChannelLayout> ChannelLayoutOf(const char* op, const DeviceTensor& x);

// Reorders between layouts with oneDNN, caching one primitive per pair of
// descriptions, and the scratch buffers ops read converted inputs from.
// Thread-compatible.
class Reorderer {
 public:
  explicit Reorderer(const dnnl::engine& engine) : engine_(engine) {}

  // `t` as a memory in the layout `want`: `t` itself when it is in that
  // layout, else a reordered copy in a scratch buffer. Scratch buffers are
  // kept by (slot, description), so a step's reorders allocate only once; an
  // op that converts two inputs uses two slots.
  dnnl::memory As(const CpuTensor& t, const dnnl::memory::desc& want, dnnl::stream& stream,
                  int slot);
  // `t`'s data in the plain layout (itself, or a scratch copy as above).
  const float* Plain(const CpuTensor& t, dnnl::stream& stream, int slot);
  // Copies src (description `from`) into dst (description `to`).
  void Run(const dnnl::memory::desc& from, const void* src, const dnnl::memory::desc& to, void* dst,
           dnnl::stream& stream);

 private:
  struct Cached {
    dnnl::memory::desc from, to;
    dnnl::reorder prim;
  };
  dnnl::engine engine_;
  struct Scratch {
    int slot;
    dnnl::memory memory;
  };
  std::vector<Cached> reorders_;
  std::vector<Scratch> scratch_;
};

}  // namespace cpu
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_CPU_TENSOR_H_
