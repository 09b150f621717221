// Every request message of the ParameterServer service through the shard's
// validation. The first byte picks the mode (dense or top-k gradients) and
// the method; the rest is the
// request's serialized bytes (what a hostile client sends; a body that does
// not parse never gets here, see rpc::UnaryService). After every request
// the accounting invariant must hold, and a rejected request must leave the
// variables bit-identical.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "tests/fuzz/fuzz_shard.h"

namespace {

std::string Snapshot(psc::ps_server::ShardServer* server) {
  psc::proto::PullResponse r;
  absl::Status got = server->PullBlocking({}, absl::Now() + absl::Seconds(1), &r);
  if (!got.ok()) std::abort();
  return r.SerializeAsString();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace psc;
  if (size < 1) return 0;
  const uint8_t op = data[0];
  const std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
  const proto::TrainingMode modes[] = {proto::MODE_SYNC, proto::MODE_ASYNC, proto::MODE_SSP};
  // High nibble 3-5 (and 9-11, 15): the same modes under --topk_ratio=0.5.
  const int mode = (op >> 4) % 6;
  auto server = fuzz::SmallShard(modes[mode % 3], absl::ZeroDuration(), mode >= 3 ? 0.5 : 0);
  const std::string before = Snapshot(server.get());
  absl::Status s;
  switch (op % 7) {
    case 0: {
      proto::PushRequest r;
      if (!r.ParseFromString(body)) return 0;
      proto::PushResponse response;
      s = server->PushBlocking(r, absl::Now(), &response);
      break;
    }
    case 1: {
      proto::PullRequest r;
      if (!r.ParseFromString(body)) return 0;
      proto::PullResponse response;
      s = server->PullBlocking(r, absl::Now(), &response);  // no waiting
      break;
    }
    case 2: {
      proto::CreateVariablesRequest r;
      if (!r.ParseFromString(body)) return 0;
      proto::CreateVariablesResponse response;
      s = server->CreateVariables(r, &response);
      break;
    }
    case 3: {
      proto::ConfigureRequest r;
      if (!r.ParseFromString(body)) return 0;
      s = server->Configure(r);
      break;
    }
    case 4: {
      proto::UpdateMembershipRequest r;
      if (!r.ParseFromString(body)) return 0;
      proto::UpdateMembershipResponse response;
      s = server->UpdateMembership(r, &response);
      break;
    }
    case 5: {
      proto::PushRequest r;
      if (!r.ParseFromString(body)) return 0;
      s = server->CheckGradientShapes(r);
      break;
    }
    default: {
      // Two pushes: the second may be the first one's duplicate.
      proto::PushRequest r;
      if (!r.ParseFromString(body)) return 0;
      proto::PushResponse response;
      (void)server->PushBlocking(r, absl::Now(), &response);
      s = server->PushBlocking(r, absl::Now(), &response);
      break;
    }
  }
  fuzz::CheckAccounting(*server);
  if (!s.ok() && op % 7 != 6 && Snapshot(server.get()) != before) {
    std::fprintf(stderr, "a rejected request (%s) changed the variables\n",
                 std::string(s.message()).c_str());
    std::abort();
  }
  return 0;
}
