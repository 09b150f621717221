// nccl_collective.h without CUDA: every entry point is UNIMPLEMENTED, so
// callers build and can fall back to Gloo (gloo_collective.h).
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/collective/nccl_collective.h"

namespace psc {
namespace collective {
namespace {

absl::Status BuiltWithoutCuda(const char* what) {
  return absl::UnimplementedError(absl::StrCat(what, ": pscluster was built without CUDA"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Collective>> CreateNcclCollective(KeyValueStore*, const std::string&,
                                                                 int, int, int, absl::Duration) {
  return BuiltWithoutCuda("NCCL collective");
}

// Never constructed here (CreateLocalNcclGroup fails), but the type is whole.
struct LocalNcclGroup::Impl {
  std::vector<int> devices;
};

LocalNcclGroup::LocalNcclGroup(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LocalNcclGroup::~LocalNcclGroup() = default;

const std::vector<int>& LocalNcclGroup::devices() const { return impl_->devices; }

absl::Status LocalNcclGroup::AllReduceSum(const std::vector<absl::Span<float>>&) {
  return BuiltWithoutCuda("local NCCL group");
}

absl::Status LocalNcclGroup::AllReduceSumOnDevice(const std::vector<std::vector<float*>>&,
                                                  const std::vector<size_t>&,
                                                  const std::vector<void*>&) {
  return BuiltWithoutCuda("local NCCL group");
}

std::string LocalNcclGroup::Describe() const { return "nccl (built without CUDA)"; }

absl::StatusOr<std::unique_ptr<LocalNcclGroup>> CreateLocalNcclGroup(const std::vector<int>&) {
  return BuiltWithoutCuda("local NCCL group");
}

}  // namespace collective
}  // namespace psc
