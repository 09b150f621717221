#include "common/data_channel/testing/raw_client.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "common/base/status_macros.h"
#include "common/data_channel/data_client.h"

namespace psc {
namespace data_channel {
namespace testing {
namespace {

FrameBytes Frame(Kind kind, uint64_t call_id, const std::string& meta,
                 const std::vector<absl::string_view>& blobs) {
  FrameHeader h;
  h.kind = kind;
  h.call_id = call_id;
  h.meta_bytes = static_cast<uint32_t>(meta.size());
  h.num_blobs = static_cast<uint32_t>(blobs.size());
  std::vector<uint64_t> sizes;
  FrameBytes out;
  for (absl::string_view b : blobs) {
    sizes.push_back(b.size());
    out.blobs.append(b.data(), b.size());
  }
  out.head = EncodeFrameHead(h, sizes) + meta;
  return out;
}

}  // namespace

FrameBytes PushFrame(const proto::PushRequest& push, uint64_t call_id) {
  proto::PushRequest meta = push;
  meta.clear_gradients();
  std::vector<absl::string_view> blobs;
  SplitTensors(push.gradients(), meta.mutable_gradients(), &blobs);
  return Frame(Kind::kPush, call_id, meta.SerializeAsString(), blobs);
}

FrameBytes PullFrame(const proto::PullRequest& pull, uint64_t call_id) {
  return Frame(Kind::kPull, call_id, pull.SerializeAsString(), {});
}

std::thread PullInThread(const std::string& host, int port, const std::string& ticket,
                         int64_t min_version, absl::Time deadline, absl::Status* status) {
  return std::thread([=] {
    auto c = DataConnection::Open(host, port, ticket, deadline);
    if (!c.ok()) {
      *status = c.status();
      return;
    }
    proto::PullRequest pull;
    pull.set_min_version(min_version);
    proto::PullResponse response;
    *status = (*c)->Pull(pull, deadline, &response);
  });
}

absl::StatusOr<RawClient> RawClient::Connect(const std::string& host, int port,
                                             absl::Time deadline) {
  PSC_ASSIGN_OR_RETURN(auto stream, ConnectTcp(host, port, deadline));
  return RawClient(std::move(stream));
}

absl::StatusOr<RawClient> RawClient::Open(const std::string& host, int port,
                                          const std::string& ticket, absl::Time deadline) {
  PSC_ASSIGN_OR_RETURN(RawClient c, Connect(host, port, deadline));
  PSC_RETURN_IF_ERROR(c.Send(Frame(Kind::kHello, 0, ticket, {}).All(), deadline));
  PSC_ASSIGN_OR_RETURN(FrameHead ok, c.Receive(deadline));
  if (ok.header.kind != Kind::kHelloOk) {
    return absl::Status(ok.header.code > 0 ? static_cast<absl::StatusCode>(ok.header.code)
                                           : absl::StatusCode::kInternal,
                        absl::StrCat("no hello ok: ", ok.meta));
  }
  return c;
}

absl::Status RawClient::Send(const std::string& bytes, absl::Time deadline) {
  return stream_->WriteAll({{const_cast<char*>(bytes.data()), bytes.size()}}, deadline);
}

absl::StatusOr<FrameHead> RawClient::Receive(absl::Time deadline) {
  PSC_ASSIGN_OR_RETURN(FrameHead head, ReceiveFrameHead(stream_.get(), Limits{}, deadline));
  std::vector<std::string> blobs(head.blob_sizes.size());
  std::vector<std::string*> slots;
  for (std::string& b : blobs) slots.push_back(&b);
  PSC_RETURN_IF_ERROR(ReceiveBlobs(stream_.get(), head, slots, deadline));
  return head;
}

bool RawClient::EndsBy(absl::Time deadline) {
  char c;
  return absl::IsUnavailable(stream_->ReadExact(&c, 1, deadline));
}

}  // namespace testing
}  // namespace data_channel
}  // namespace psc
