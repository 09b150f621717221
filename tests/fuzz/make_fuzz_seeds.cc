// Writes the seed corpus of every fuzz target: valid inputs that reach deep
// into each reader, from which libFuzzer mutates; and, in <dir>/bombs/,
// user files that inflate far past what they declare (a .keras whose
// config.json inflates to 3 GiB, an .npz whose 12 KB .npy inflates to 1 GiB),
// for the npz fuzzer (its npz_bomb seed) and the process test of the readers'
// peak memory (tests/user_file_bomb_test.cc); made here, not committed.
// Usage:
//   make_fuzz_seeds <dir>    (writes <dir>/<target>/<seed> and <dir>/bombs/)
#include <zip.h>
#include <zlib.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/data/npy.h"
#include "common/data_channel/frame_io.h"
#include "common/data_channel/wire.h"
#include "common/io/testing/zip_bomb.h"
#include "common/keras/builtin_models.h"
#include "common/optimizer/optimizer.h"
#include "common/summary/event_file.h"
#include "common/tensor/tensor.h"
#include "common/tensor/topk.h"
#include "common/tfrecord/framing.h"
#include "proto/checkpoint.pb.h"
#include "proto/parameter_server.pb.h"
#include "proto/tf_example.pb.h"
#include "ps_server/variable_store.h"

namespace {

std::string root;

// The op byte, then the message.
std::string Op(int op, const std::string& message) {
  std::string out(1, static_cast<char>(op));
  out.append(message);
  return out;
}

void Write(const std::string& target, const std::string& name, const std::string& bytes) {
  std::filesystem::create_directories(root + "/" + target);
  std::ofstream(root + "/" + target + "/" + name, std::ios::binary) << bytes;
}

psc::proto::PushRequest Push(int worker, int64_t step) {
  psc::proto::PushRequest p;
  p.mutable_id()->set_worker(worker);
  p.mutable_id()->set_step(step);
  p.mutable_id()->set_replica_slot(worker);
  auto* a = p.add_gradients();
  a->set_name("a");
  psc::tensor::SetFloatTensor({2, 3}, std::vector<float>(6, 0.25f), a->mutable_tensor());
  auto* b = p.add_gradients();
  b->set_name("b");
  psc::tensor::SetFloatTensor({4}, std::vector<float>(4, 1.0f), b->mutable_tensor());
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace psc;
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_fuzz_seeds <dir>\n");
    return 2;
  }
  root = argv[1];

  // TF_CONFIG.
  Write("tf_config_fuzz", "worker",
        R"({"cluster":{"chief":["127.0.0.1:2222"],"ps":["127.0.0.1:2223","127.0.0.1:2224"],)"
        R"("worker":["127.0.0.1:2225","127.0.0.1:2226"]},"task":{"type":"worker","index":1}})");
  Write("tf_config_fuzz", "evaluator",
        R"({"cluster":{"chief":["h:1"],"ps":["[::1]:2"],"worker":["w.example:3"]},)"
        R"("task":{"type":"evaluator","index":0},"environment":"cloud"})");

  // Requests: op byte (high nibble: mode; low: method) + the message.
  const char modes[] = {0x00, 0x10, 0x20};
  for (char mode : modes) {
    Write("shard_request_fuzz", "push_" + std::to_string(mode),
          Op(mode | 0, Push(1, 0).SerializeAsString()));
    Write("shard_request_fuzz", "push_twice_" + std::to_string(mode),
          Op(mode | 6, Push(0, 3).SerializeAsString()));
    proto::PullRequest pull;
    pull.add_names(std::string("b"));
    pull.set_worker(1);
    Write("shard_request_fuzz", "pull_" + std::to_string(mode),
          Op(mode | 1, pull.SerializeAsString()));
  }
  // Top-k sparse pushes (high nibble 3-5: the modes under --topk_ratio=0.5).
  for (char mode : {0x30, 0x40, 0x50}) {
    proto::PushRequest sparse = Push(1, 0);
    const std::vector<float> a = {0.5f, -2, 0.25f, 1, 0, 3}, b = {1, -1, 0.5f, 2};
    if (!tensor::SetSparseTensor({2, 3}, a, tensor::SelectTopK(a, 3), proto::DT_FLOAT32,
                                 sparse.mutable_gradients(0)->mutable_tensor())
             .ok() ||
        !tensor::SetSparseTensor({4}, b, tensor::SelectTopK(b, 2), proto::DT_FLOAT32,
                                 sparse.mutable_gradients(1)->mutable_tensor())
             .ok()) {
      return 1;
    }
    Write("shard_request_fuzz", "push_topk_" + std::to_string(mode),
          Op(mode | 0, sparse.SerializeAsString()));
    Write("shard_request_fuzz", "push_topk_twice_" + std::to_string(mode),
          Op(mode | 6, sparse.SerializeAsString()));
  }
  proto::CreateVariablesRequest create;
  auto* c = create.add_variables();
  c->set_name("c/kernel");
  tensor::SetFloatTensor({3, 1}, std::vector<float>{1, 2, 3}, c->mutable_tensor());
  Write("shard_request_fuzz", "create", Op(2, create.SerializeAsString()));
  // A BatchNormalization statistic: a moving average of momentum 0.99.
  auto* m = create.add_variables();
  m->set_name("bn/moving_mean");
  tensor::SetFloatTensor({3}, std::vector<float>{0, 0, 0}, m->mutable_tensor());
  auto* rule = create.add_moving_averages();
  rule->set_variable("bn/moving_mean");
  rule->set_momentum(0.99f);
  Write("shard_request_fuzz", "create_moving_average", Op(2, create.SerializeAsString()));
  proto::ConfigureRequest configure;
  configure.set_num_shards(1);
  configure.set_num_workers(2);
  configure.mutable_policy()->set_mode(proto::MODE_SYNC);
  Write("shard_request_fuzz", "configure", Op(3, configure.SerializeAsString()));
  proto::UpdateMembershipRequest membership;
  membership.set_replicas_to_aggregate(1);
  membership.add_live_workers(0);
  membership.set_partial(proto::UpdateMembershipRequest::DISCARD);
  Write("shard_request_fuzz", "membership", Op(4, membership.SerializeAsString()));
  Write("shard_request_fuzz", "shapes", Op(5, Push(0, 1).SerializeAsString()));

  // Data-channel frames after the hello: a push (meta + blobs) and a pull.
  {
    proto::PushRequest push = Push(0, 0);
    push.set_pull_after(true);
    std::vector<std::string> blobs;
    data_channel::TakeTensorData(push.mutable_gradients(), &blobs);
    const std::string meta = push.SerializeAsString();
    data_channel::FrameHeader h;
    h.kind = data_channel::Kind::kPush;
    h.call_id = 1;
    h.meta_bytes = static_cast<uint32_t>(meta.size());
    h.num_blobs = 2;
    std::string frame = data_channel::EncodeFrameHead(h, {blobs[0].size(), blobs[1].size()}) + meta;
    for (const auto& b : blobs) frame += b;
    proto::PullRequest pull;
    const std::string pull_meta = pull.SerializeAsString();
    data_channel::FrameHeader p;
    p.kind = data_channel::Kind::kPull;
    p.call_id = 2;
    p.meta_bytes = static_cast<uint32_t>(pull_meta.size());
    const std::string pull_frame = data_channel::EncodeFrameHead(p, {}) + pull_meta;
    Write("data_channel_frame_fuzz", "push", frame);
    Write("data_channel_frame_fuzz", "pull", pull_frame);
    Write("data_channel_frame_fuzz", "push_then_pull", frame + pull_frame);
  }

  // Checkpoints: an index and a shard's data (momentum: one slot).
  Write("checkpoint_fuzz", "index",
        Op(0, R"({"format": 1, "step": 3, "shard": 0, "num_shards": 1, "files": [{"name": )"
              R"("shard-0-of-1.data", "bytes": 1234, "crc32": 305419896}]})"));
  {
    proto::OptimizerConfig momentum;
    momentum.set_kind(proto::OptimizerConfig::MOMENTUM);
    ps_server::VariableStore store;
    store.set_optimizer(*optimizer::CompleteOptimizerConfig(momentum));
    ps_server::VariableStore::Tensors vars;
    *vars.Add() = Push(0, 0).gradients(0);
    *vars.Add() = Push(0, 0).gradients(1);
    int created = 0, existing = 0;
    if (!store.Create(vars, &created, &existing).ok()) return 1;
    proto::ShardCheckpoint ckpt;
    ckpt.set_format(1);
    ckpt.set_step(3);
    ckpt.set_num_shards(1);
    ckpt.set_version(3);
    ckpt.set_updates(3);
    *ckpt.mutable_optimizer() = *optimizer::CompleteOptimizerConfig(momentum);
    store.Save(&ckpt);
    ckpt.mutable_variables(1)->set_moving_average_momentum(0.99f);  // "b": a moving average
    auto* entry = ckpt.add_ledger();
    entry->set_worker(1);
    entry->set_replica_slot(1);
    entry->set_watermark(1);
    *entry->add_above() = Push(1, 2).id();
    auto* clock = ckpt.add_clocks();
    clock->set_worker(1);
    clock->set_clock(3);
    Write("checkpoint_fuzz", "shard", Op(1, ckpt.SerializeAsString()));
  }

  // A TensorBoard event file as the chief writes it.
  {
    const std::string dir = root + "/.events";
    std::filesystem::remove_all(dir);
    auto writer = summary::EventWriter::Create(dir);
    if (!writer.ok()) return 1;
    (void)(*writer)->AddScalar("loss", 1, 0.5f);
    (void)(*writer)->AddScalar("val_accuracy", 2, 0.75f);
    if (!(*writer)->Close().ok()) return 1;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
      std::ifstream in(e.path(), std::ios::binary);
      Write("event_file_fuzz", "chief", std::string(std::istreambuf_iterator<char>(in), {}));
    }
    std::filesystem::remove_all(dir);
  }
  // TFRecords of tf.train.Examples (an image's bytes, floats, a label, ids),
  // plain, gzip and zlib, as tf.io.TFRecordWriter writes them.
  {
    std::string raw;
    for (int i = 0; i < 3; ++i) {
      tfexample::Example e;
      auto& f = *e.mutable_features()->mutable_feature();
      f["image_raw"].mutable_bytes_list()->add_value(std::string(16, static_cast<char>(i)));
      f["dense"].mutable_float_list()->add_value(0.5f * i);
      f["label"].mutable_int64_list()->add_value(i);
      for (int id = 0; id <= i; ++id) f["ids"].mutable_int64_list()->add_value(id);
      tfrecord::AppendRecord(e.SerializeAsString(), &raw);
    }
    Write("tfrecord_fuzz", "plain", raw);
    for (int bits : {31, 15}) {  // gzip, zlib
      z_stream z = {};
      if (deflateInit2(&z, 6, Z_DEFLATED, bits, 8, Z_DEFAULT_STRATEGY) != Z_OK) return 1;
      std::string out(deflateBound(&z, raw.size()), '\0');
      z.next_in = reinterpret_cast<Bytef*>(raw.data());
      z.avail_in = static_cast<uInt>(raw.size());
      z.next_out = reinterpret_cast<Bytef*>(out.data());
      z.avail_out = static_cast<uInt>(out.size());
      if (deflate(&z, Z_FINISH) != Z_STREAM_END) return 1;
      out.resize(z.total_out);
      deflateEnd(&z);
      Write("tfrecord_fuzz", bits == 31 ? "gzip" : "zlib", out);
    }
  }
  // Data files through records_fuzz's spec: two bytes of mode (CSV when the
  // first is odd, skipping when the second is), then the file.
  {
    std::string raw;
    for (int i = 0; i < 4; ++i) {
      tfexample::Example e;
      auto& f = *e.mutable_features()->mutable_feature();
      f["f"].mutable_float_list()->add_value(0.5f * i);
      f["f"].mutable_float_list()->add_value(-1.0f);
      for (int id = 0; id <= i % 3; ++id) f["ids"].mutable_int64_list()->add_value(7 * id);
      f["px"].mutable_bytes_list()->add_value(std::string(4, static_cast<char>(40 * i)));
      const float v[2] = {1.5f, -2.0f * i};
      f["raw"].mutable_bytes_list()->add_value(std::string(reinterpret_cast<const char*>(v), 8));
      f["y"].mutable_int64_list()->add_value(i);
      if (i % 2 == 0) f["w"].mutable_float_list()->add_value(0.25f);
      tfrecord::AppendRecord(e.SerializeAsString(), &raw);
    }
    Write("records_fuzz", "tfrecord", std::string("\0\0", 2) + raw);
    Write("records_fuzz", "tfrecord_skip", std::string("\0\1", 2) + raw);
    Write("records_fuzz", "csv",
          std::string("\1\0") + "a,b,i,j,k,y,w\n1,2.5,0,1,49,3,0.5\n,\"-1e3\",2,3,4,,\n");
    Write("records_fuzz", "csv_skip",
          std::string("\1\1") + "a,b,i,j,k,y\n1,x,0,1,2,3\n0,0,0,0,0,0\n");
  }
  // NumPy: a .npy header, a .npy file, and .npz archives as np.savez
  // (stored) and np.savez_compressed (deflated) write them.
  {
    const std::string pixels(2 * 3 * 3, '\x7f');
    const std::string labels("\x01\0\0\0\0\0\0\0\x02\0\0\0\0\0\0\0", 16);
    const std::string x = data::MakeNpyHeader(data::NpyType::kUint8, {2, 3, 3}) + pixels;
    const std::string y = data::MakeNpyHeader(data::NpyType::kInt64, {2}) + labels;
    Write("npz_fuzz", "npy_header", Op(0, x));
    Write("npz_fuzz", "npy_file", Op(1, x));
    for (bool deflate : {false, true}) {
      const std::string path = root + "/.seed.npz";
      zipFile zf = zipOpen64(path.c_str(), APPEND_STATUS_CREATE);
      if (zf == nullptr) return 1;
      for (const auto& [name, bytes] :
           {std::pair<const char*, const std::string*>{"x_train.npy", &x}, {"y_train.npy", &y}}) {
        zip_fileinfo zi = {};
        zipOpenNewFileInZip64(zf, name, &zi, nullptr, 0, nullptr, 0, nullptr,
                              deflate ? Z_DEFLATED : 0, deflate ? Z_DEFAULT_COMPRESSION : 0, 1);
        zipWriteInFileInZip(zf, bytes->data(), static_cast<unsigned>(bytes->size()));
        zipCloseFileInZip(zf);
      }
      zipClose(zf, nullptr);
      std::ifstream in(path, std::ios::binary);
      Write("npz_fuzz", deflate ? "npz_deflated" : "npz_stored",
            Op(1, std::string(std::istreambuf_iterator<char>(in), {})));
      std::filesystem::remove(path);
    }
  }
  // Bombs: honest zip entries (they announce what they inflate to) over
  // little compressed data.
  {
    std::filesystem::create_directories(root + "/bombs");
    const std::string keras = root + "/bombs/config_bomb.keras";
    zipFile zf = zipOpen64(keras.c_str(), APPEND_STATUS_CREATE);
    if (zf == nullptr) return 1;
    const std::string config = keras::BuiltinModelConfig("mlp");
    if (!io::testing::AddMember(zf, "metadata.json", "{\"keras_version\": \"3.15.1\"}").ok() ||
        !io::testing::AddInflatingMember(zf, "config.json", config, ' ',
                                         (uint64_t{3} << 30) - config.size())
             .ok()) {
      return 1;
    }
    zipClose(zf, nullptr);
    const std::string npz = root + "/bombs/npz_bomb.npz";
    zf = zipOpen64(npz.c_str(), APPEND_STATUS_CREATE);
    if (zf == nullptr) return 1;
    const std::string header = data::MakeNpyHeader(data::NpyType::kUint8, {12288});
    if (!io::testing::AddInflatingMember(zf, "x_train.npy", header, '\0', uint64_t{1} << 30).ok()) {
      return 1;
    }
    zipClose(zf, nullptr);
    // The fuzzer's seed: the same with 48 MiB behind the header, so that it
    // fits libFuzzer's 64 KiB inputs (run_fuzzers.sh).
    const std::string seed = root + "/.npz_bomb_seed.npz";
    zf = zipOpen64(seed.c_str(), APPEND_STATUS_CREATE);
    if (zf == nullptr) return 1;
    if (!io::testing::AddInflatingMember(zf, "x_train.npy", header, '\0', uint64_t{48} << 20)
             .ok()) {
      return 1;
    }
    zipClose(zf, nullptr);
    std::ifstream in(seed, std::ios::binary);
    Write("npz_fuzz", "npz_bomb", Op(1, std::string(std::istreambuf_iterator<char>(in), {})));
    std::filesystem::remove(seed);
  }
  std::printf("make_fuzz_seeds: wrote %s\n", root.c_str());
  return 0;
}
