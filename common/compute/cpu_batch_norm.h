// The CPU backend's per-channel reductions: batch normalization over the
// channel axis (backend.h's BatchNorm, BatchNormInference and
// BatchNormBackward) and channel sums (bias gradients), on raw float arrays
// in the backend's physical layouts: [n][blocks][hw][b], channel =
// block * b + j. A plain NHWC tensor is blocks = 1, b = C; a plain [N, C]
// one also hw = 1; a channel-blocked one (cpu_tensor.h) blocks = C / b.
//
// Sums over a channel run in double, over fixed chunks of the batch added in
// chunk order: the result does not depend on the thread count.
#ifndef PSC_COMMON_COMPUTE_CPU_BATCH_NORM_H_
#define PSC_COMMON_COMPUTE_CPU_BATCH_NORM_H_

#include <cstdint>

namespace psc {
namespace compute {
namespace cpu {

struct ChannelLayout {
  int64_t n = 0, blocks = 1, hw = 1, b = 0;
  int64_t channels() const { return blocks * b; }
  int64_t size() const { return n * blocks * hw * b; }
};

// out [C] = the sum of x over every axis but the channel's, in double
// (what a convolution's bias gradient is).
void SumPerChannel(const ChannelLayout& l, const float* x, float* out);

// mean [C] and the biased variance [C] of x, and y = (x - mean) /
// sqrt(variance + epsilon) * gamma + beta.
void BatchNorm(const ChannelLayout& l, const float* x, const float* gamma, const float* beta,
               float epsilon, float* y, float* mean, float* variance);
// y from given statistics; y may be x.
void BatchNormInference(const ChannelLayout& l, const float* x, const float* gamma,
                        const float* beta, const float* mean, const float* variance, float epsilon,
                        float* y);
// dx, dgamma, dbeta of BatchNorm (backend.h); dx may be dy.
void BatchNormBackward(const ChannelLayout& l, const float* x, const float* dy, const float* gamma,
                       const float* mean, const float* variance, float epsilon, float* dx,
                       float* dgamma, float* dbeta);

}  // namespace cpu
}  // namespace compute
}  // namespace psc

#endif  // PSC_COMMON_COMPUTE_CPU_BATCH_NORM_H_
