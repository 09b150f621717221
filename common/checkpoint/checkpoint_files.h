// Durable, verified checkpoint files of parameter-server shards. A shard
// serializes its own state into an opaque byte string; this module stores those
// bytes, verifies them on the way back, lists and prunes them. It knows nothing
// about what the bytes mean. Written by ps_server; read by ps_server (restore)
// and by the evaluator, which also lists the steps complete for all shards.
//
// Layout under a checkpoint root directory:
//
//   <root>/ckpt-<step>/shard-<i>-of-<n>.data    the shard's bytes
//   <root>/ckpt-<step>/shard-<i>-of-<n>.index   small JSON, written last:
//     {"format": 1, "step": <step>, "shard": i, "num_shards": n,
//      "files": [{"name": "shard-<i>-of-<n>.data", "bytes": <size>,
//                 "crc32": <zlib crc32, unsigned>}]}
//
// A shard's checkpoint at a step is complete iff its .index exists. Steps are
// written in canonical decimal ("ckpt-7", never "ckpt-007"); other names are
// ignored.
//
// Durability protocol of a write: the data goes to a temporary file in the same
// directory ("<final>.tmp.<pid>.<counter>"), which is fsync'ed and renamed to
// its final name; then the index likewise (temp, fsync, rename); then the
// directory is fsync'ed. When the write overwrites an earlier checkpoint of the
// same shard and step, the old .index is removed (durably) before the new data
// replaces the old, so a crash never leaves an index that describes other
// bytes. A crash at any point therefore leaves either the previous complete
// checkpoint, an incomplete one (no .index: invisible to readers), or the new
// complete one.
//
// Several shards (different processes) write into the same ckpt-<step>
// directory concurrently: each function touches only the files of its own
// shard (shard-<i>-of-<n>.*), and directory creation tolerates a directory
// that already exists.
//
// Every function reaches the files through `fs` (common/io/file_system.h;
// LocalFileSystem() when null), so that tests can make a write fail.
//
// Thread-compatible: calls about different shards may run concurrently (in
// threads or processes); calls about the same shard (same root, shard and
// num_shards) must be serialized by the caller.
#ifndef PSC_COMMON_CHECKPOINT_CHECKPOINT_FILES_H_
#define PSC_COMMON_CHECKPOINT_CHECKPOINT_FILES_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/io/file_system.h"

namespace psc {
namespace checkpoint {

// "<root>/ckpt-<step>" (no doubled '/' when `root` ends with one).
std::string CheckpointDir(const std::string& root, int64_t step);

// Writes `data` as shard `shard` of `num_shards` at `step`, following the
// durability protocol above; creates directories as needed (mkdir -p) and
// overwrites an earlier checkpoint of the same shard and step. Returns the
// final paths {data, index}.
//
// Errors: INVALID_ARGUMENT for an empty root, step < 0, num_shards < 1 or shard
// outside [0, num_shards); INTERNAL, naming the path and the OS error, for I/O
// failures. On failure no .index of this shard at this step exists (an earlier
// checkpoint being overwritten may be gone too) and the temporary files are
// removed.
absl::StatusOr<std::vector<std::string>> WriteShardCheckpoint(const std::string& root, int64_t step,
                                                              int shard, int num_shards,
                                                              absl::string_view data,
                                                              io::FileSystem* fs = nullptr);

struct ShardCheckpointData {
  int64_t step = 0;
  std::string data;
};

// What a shard's .index file says of its data file.
struct IndexEntry {
  uint64_t bytes = 0;
  uint32_t crc32 = 0;
};

// Parses the text of the index at `path`, which must describe shard `shard`
// of `num_shards` at `step` and name `data_name`: DATA_LOSS naming the path
// otherwise. Pure; what ReadShardCheckpoint uses (and the fuzz target
// tests/fuzz/checkpoint_fuzz.cc drives).
absl::StatusOr<IndexEntry> ParseIndex(const std::string& path, const std::string& text,
                                      int64_t step, int shard, int num_shards,
                                      const std::string& data_name);

// Reads and verifies shard `shard` of `num_shards` at `step`; step == -1 means
// the newest step that holds a complete checkpoint of this shard (if that one
// fails verification, its error is returned: there is no silent fallback to an
// older step).
//
// Errors, each naming the file or directory:
//  - INVALID_ARGUMENT: empty root, step < -1, num_shards < 1, shard outside
//    [0, num_shards).
//  - NOT_FOUND: no complete checkpoint of this shard at `step` (including one
//    whose .index is missing), or none at all under `root` for step == -1; a
//    missing root is NOT_FOUND too.
//  - FAILED_PRECONDITION: instead of NOT_FOUND when the step has no file of this
//    shard for `num_shards` but holds files of the same shard index written for
//    another shard count, e.g. "checkpoint <root>/ckpt-40 was written by 2
//    shards; this cluster has 1". For step == -1 this applies when no step has a
//    complete checkpoint for `num_shards`; the newest such step is named.
//  - DATA_LOSS: the index is unreadable, not valid JSON, lacks a field, or its
//    step/shard/num_shards/file name disagree with its path; the data file is
//    missing; its size differs from the index ("truncated" when shorter); its
//    crc32 differs ("corrupt").
//  - INTERNAL: other I/O failures (e.g. the data file exists but cannot be
//    read, or the root is not a directory).
absl::StatusOr<ShardCheckpointData> ReadShardCheckpoint(const std::string& root, int64_t step,
                                                        int shard, int num_shards,
                                                        io::FileSystem* fs = nullptr);

// A shard's checkpoint data file held open (io::RandomAccessFile), for
// reads by range: a table's rows without the whole file in memory. It is
// the file as verified; a later prune or overwrite (an unlink, a rename)
// does not change what it reads.
struct OpenShardCheckpointData {
  int64_t step = 0;
  std::unique_ptr<io::RandomAccessFile> file;
};

// ReadShardCheckpoint's checks and errors (the crc32 computed a MiB at a
// time), the data file left open instead of read.
absl::StatusOr<OpenShardCheckpointData> OpenShardCheckpoint(const std::string& root, int64_t step,
                                                            int shard, int num_shards,
                                                            io::FileSystem* fs = nullptr);

// Steps, ascending, that hold a complete checkpoint (.index present) of shard
// `shard` of `num_shards`. A missing root is an empty list. Ignores anything
// that is not a "ckpt-<step>" directory (files, "ckpt-abc", temp files).
// INVALID_ARGUMENT for bad arguments as above; INTERNAL if `root` cannot be
// listed.
absl::StatusOr<std::vector<int64_t>> ListShardCheckpoints(const std::string& root, int shard,
                                                          int num_shards,
                                                          io::FileSystem* fs = nullptr);

// A step that holds a complete checkpoint of every shard of one shard count.
struct CompleteCheckpoint {
  int64_t step = 0;
  int num_shards = 0;
  friend bool operator==(const CompleteCheckpoint& a, const CompleteCheckpoint& b) {
    return a.step == b.step && a.num_shards == b.num_shards;
  }
};

// Every (step, n) such that ckpt-<step> holds the .index of every shard
// "shard-<i>-of-<n>", i in [0, n), with n discovered from the file names;
// ascending by step, then n (a step can be complete for two shard counts if
// clusters of both sizes wrote it). Only the presence of the indexes is
// checked: the data is verified by ReadShardCheckpoint. A step with some
// shards' indexes missing (a save in progress, or a crash) is left out. A
// missing root is an empty list; names that are not canonical ("ckpt-007",
// "shard-01-of-2.index", shard >= n) and temporary files are ignored.
// INVALID_ARGUMENT for an empty root; INTERNAL, naming the directory, if a
// directory cannot be listed. Safe to call while shards write (it may then
// see a step without its newest shard, i.e. not yet complete).
absl::StatusOr<std::vector<CompleteCheckpoint>> ListCompleteCheckpoints(
    const std::string& root, io::FileSystem* fs = nullptr);

// Keeps this shard's files in its newest `keep` complete checkpoints and, in
// every ckpt-<step> directory older than the oldest kept one, deletes this
// shard's .index (first), .data and stray temporary files; a directory left
// empty is removed. Directories newer than the oldest kept checkpoint (e.g. a
// write in progress) are not touched; with no complete checkpoint at all,
// nothing is. Never touches other shards' files (nor this shard index's files
// for another shard count). INVALID_ARGUMENT for keep < 1 or bad arguments as
// above; INTERNAL naming the path for a failed deletion.
absl::Status PruneShardCheckpoints(const std::string& root, int shard, int num_shards, int keep,
                                   io::FileSystem* fs = nullptr);

}  // namespace checkpoint
}  // namespace psc

#endif  // PSC_COMMON_CHECKPOINT_CHECKPOINT_FILES_H_
