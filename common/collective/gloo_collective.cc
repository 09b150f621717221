#include "common/collective/gloo_collective.h"

#include <chrono>
#include <exception>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/collective/store_wait.h"
#include "gloo/allreduce.h"
#include "gloo/broadcast.h"
#include "gloo/math.h"
#include "gloo/rendezvous/context.h"
#include "gloo/rendezvous/prefix_store.h"
#include "gloo/rendezvous/store.h"
#include "gloo/transport/tcp/device.h"

namespace psc {
namespace collective {
namespace {

// Gloo's view of our store. Gloo reports a failure by throwing; the
// exceptions end in CreateGlooCollective's catch.
class GlooStore : public gloo::rendezvous::Store {
 public:
  GlooStore(KeyValueStore* store, absl::Duration timeout, std::string abort_key,
            std::function<bool()> cancelled)
      : store_(store),
        timeout_(timeout),
        abort_key_(std::move(abort_key)),
        cancelled_(std::move(cancelled)) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    Check(store_->Set(key, std::string(data.begin(), data.end())));
  }
  std::vector<char> get(const std::string& key) override {
    absl::StatusOr<std::string> v = WaitForKey(store_, key, abort_key_, timeout_, cancelled_);
    Check(v.status());
    return std::vector<char>(v->begin(), v->end());
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, Timeout()); }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    for (const std::string& k : keys) {
      Check(WaitForKey(store_, k, abort_key_, absl::FromChrono(timeout), cancelled_).status());
    }
  }

 private:
  std::chrono::milliseconds Timeout() const {
    return std::chrono::milliseconds(absl::ToInt64Milliseconds(timeout_));
  }
  static void Check(const absl::Status& s) {
    if (!s.ok()) throw StoreError(s);
  }

 public:
  struct StoreError : std::runtime_error {
    explicit StoreError(absl::Status s)
        : std::runtime_error(std::string(s.message())), status(std::move(s)) {}
    absl::Status status;
  };

 private:
  KeyValueStore* const store_;
  const absl::Duration timeout_;
  const std::string abort_key_;
  const std::function<bool()> cancelled_;
};

// What a Gloo exception means to the caller: a peer that went away or
// timed out is UNAVAILABLE (DEADLINE_EXCEEDED for a timeout), anything else
// INTERNAL.
absl::Status FromException(const std::exception& e, const std::string& what) {
  const std::string message = absl::StrCat(what, ": ", e.what());
  if (const auto* store = dynamic_cast<const GlooStore::StoreError*>(&e)) {
    return absl::Status(store->status.code(), message);
  }
  if (std::string(e.what()).find("imed out") != std::string::npos) {
    return absl::DeadlineExceededError(message);
  }
  if (dynamic_cast<const gloo::IoException*>(&e) != nullptr) {
    return absl::UnavailableError(message);
  }
  return absl::InternalError(message);
}

class GlooCollective : public Collective {
 public:
  GlooCollective(std::shared_ptr<gloo::rendezvous::Context> context,
                 std::shared_ptr<gloo::transport::Device> device)
      : context_(std::move(context)), device_(std::move(device)) {}

  // Closes the connections: peers blocked in an operation with this rank
  // fail at once instead of at their timeout.
  ~GlooCollective() override {
    context_.reset();
    device_.reset();
  }

  int rank() const override { return context_->rank; }
  int size() const override { return context_->size; }

  absl::Status AllReduceSum(absl::Span<float> data) override {
    if (!status_.ok()) return status_;
    if (data.empty() || context_->size == 1) return absl::OkStatus();
    try {
      gloo::AllreduceOptions options(context_);
      options.setOutput(data.data(), data.size());
      options.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
      options.setReduceFunction(
          static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
      options.setTag(NextTag());
      gloo::allreduce(options);
    } catch (const std::exception& e) {
      status_ = FromException(e, absl::StrCat("all-reduce of ", data.size(), " floats"));
    }
    return status_;
  }

  absl::Status Broadcast(absl::Span<float> data, int root) override {
    if (!status_.ok()) return status_;
    if (root < 0 || root >= context_->size) {
      return absl::InvalidArgumentError(
          absl::StrCat("broadcast root ", root, " of a group of ", context_->size));
    }
    if (data.empty() || context_->size == 1) return absl::OkStatus();
    try {
      gloo::BroadcastOptions options(context_);
      options.setOutput(data.data(), data.size());
      options.setRoot(root);
      options.setTag(NextTag());
      gloo::broadcast(options);
    } catch (const std::exception& e) {
      status_ = FromException(e, absl::StrCat("broadcast of ", data.size(), " floats"));
    }
    return status_;
  }

  std::string Describe() const override {
    return absl::StrCat("gloo/tcp ring, rank ", context_->rank, " of ", context_->size);
  }

 private:
  uint32_t NextTag() { return tag_++; }

  std::shared_ptr<gloo::rendezvous::Context> context_;
  std::shared_ptr<gloo::transport::Device> device_;
  uint32_t tag_ = 0;
  absl::Status status_;  // the first failure: the group is unusable after it
};

}  // namespace

absl::StatusOr<std::unique_ptr<Collective>> CreateGlooCollective(KeyValueStore* store,
                                                                 const std::string& prefix,
                                                                 int rank, int size,
                                                                 const GlooOptions& options) {
  if (size < 1 || rank < 0 || rank >= size) {
    return absl::InvalidArgumentError(
        absl::StrCat("collective rank ", rank, " of a group of ", size));
  }
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("the collective timeout must be positive");
  }
  const auto timeout = std::chrono::milliseconds(absl::ToInt64Milliseconds(options.timeout));
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = options.hostname;
    std::shared_ptr<gloo::transport::Device> device = gloo::transport::tcp::CreateDevice(attr);
    auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
    context->setTimeout(timeout);
    GlooStore gloo_store(store, options.timeout, options.abort_key, options.cancelled);
    gloo::rendezvous::PrefixStore prefixed(prefix, gloo_store);
    context->connectFullMesh(prefixed, device);
    return std::unique_ptr<Collective>(new GlooCollective(std::move(context), std::move(device)));
  } catch (const std::exception& e) {
    return FromException(e, absl::StrCat("forming the collective group \"", prefix, "\" as rank ",
                                         rank, " of ", size, " on ", options.hostname));
  }
}

}  // namespace collective
}  // namespace psc
