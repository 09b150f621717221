#include "common/keras/weights_h5.h"

#include <fcntl.h>
#include <hdf5.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "common/base/status_context.h"
#include "common/base/status_macros.h"
#include "common/io/file_system.h"
#include "common/keras/keras_paths.h"

namespace psc {
namespace keras {
namespace {

// Serializes every libhdf5 call of the process (a serial build).
absl::Mutex& Hdf5Lock() {
  static absl::Mutex* mu = new absl::Mutex;
  return *mu;
}

// Closes an HDF5 handle with its close function.
class Handle {
 public:
  Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~Handle() {
    if (id_ >= 0) close_(id_);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

void Quiet() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

// Creates group `path` and its parents.
bool MakeGroup(hid_t file, const std::string& path) {
  Handle lcpl(H5Pcreate(H5P_LINK_CREATE), H5Pclose);
  if (!lcpl.ok() || H5Pset_create_intermediate_group(lcpl.get(), 1) < 0) return false;
  Handle g(H5Gcreate2(file, path.c_str(), lcpl.get(), H5P_DEFAULT, H5P_DEFAULT), H5Gclose);
  return g.ok();
}

// Whether the object at `path` exists (each link of it, in turn).
bool Exists(hid_t file, const std::string& path) {
  std::string prefix;
  for (absl::string_view part : absl::StrSplit(path, '/')) {
    prefix = prefix.empty() ? std::string(part) : absl::StrCat(prefix, "/", part);
    if (H5Lexists(file, prefix.c_str(), H5P_DEFAULT) <= 0) return false;
  }
  return true;
}

// The number of members of group `path`; -1 if it is not there.
int64_t Members(hid_t file, const std::string& path) {
  if (!Exists(file, path)) return -1;
  H5G_info_t info;
  if (H5Gget_info_by_name(file, path.c_str(), &info, H5P_DEFAULT) < 0) return -1;
  return static_cast<int64_t>(info.nlinks);
}

// Dataset `path` of `dims` (scalar when empty) in `file`, filled from
// `read(first, count, out)` `chunk_rows` rows at a time.
absl::Status WriteDataset(hid_t file, const std::string& path, const compute::Shape& shape,
                          int64_t chunk_rows,
                          absl::FunctionRef<absl::Status(int64_t, int64_t, float*)> read) {
  const std::vector<hsize_t> dims(shape.begin(), shape.end());
  Handle space(dims.empty() ? H5Screate(H5S_SCALAR)
                            : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
               H5Sclose);
  Handle ds(H5Dcreate2(file, path.c_str(), H5T_IEEE_F32LE, space.get(), H5P_DEFAULT, H5P_DEFAULT,
                       H5P_DEFAULT),
            H5Dclose);
  if (!space.ok() || !ds.ok()) {
    return absl::InternalError(absl::StrCat("libhdf5: cannot create ", path));
  }
  const int64_t rows = RowsOf(shape), width = RowElements(shape);
  if (rows == 0 || width == 0) return absl::OkStatus();
  std::vector<float> buffer(static_cast<size_t>(std::min(rows, chunk_rows) * width));
  for (int64_t first = 0; first < rows; first += chunk_rows) {
    const int64_t count = std::min(chunk_rows, rows - first);
    if (absl::Status s = read(first, count, buffer.data()); !s.ok()) {
      return base::Prefix(s, path);
    }
    herr_t written = -1;
    if (dims.empty()) {
      written = H5Dwrite(ds.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, buffer.data());
    } else {
      std::vector<hsize_t> start(dims.size(), 0), counts = dims;
      start[0] = static_cast<hsize_t>(first);
      counts[0] = static_cast<hsize_t>(count);
      Handle memory(H5Screate_simple(static_cast<int>(counts.size()), counts.data(), nullptr),
                    H5Sclose);
      if (memory.ok() && H5Sselect_hyperslab(space.get(), H5S_SELECT_SET, start.data(), nullptr,
                                             counts.data(), nullptr) >= 0) {
        written = H5Dwrite(ds.get(), H5T_NATIVE_FLOAT, memory.get(), space.get(), H5P_DEFAULT,
                           buffer.data());
      }
    }
    if (written < 0) {
      return absl::InternalError(
          absl::StrCat("libhdf5: cannot write rows [", first, ", ", first + count, ") of ", path));
    }
  }
  return absl::OkStatus();
}

// A scalar dataset `path` of `file_type` holding `*data`.
bool WriteScalar(hid_t file, const std::string& path, hid_t file_type, hid_t memory_type,
                 const void* data) {
  Handle space(H5Screate(H5S_SCALAR), H5Sclose);
  Handle ds(
      H5Dcreate2(file, path.c_str(), file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
      H5Dclose);
  return space.ok() && ds.ok() &&
         H5Dwrite(ds.get(), memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0;
}

// Every group and dataset of the weights file into `file`.
absl::Status WriteWeights(hid_t file, const compute::Model& model, WeightsSource* source,
                          const OptimizerState* optimizer, int64_t chunk_bytes) {
  const auto& vars = model.variables();
  const std::vector<std::string> paths = VariablePaths(model);
  auto chunk_rows = [&](const compute::Shape& shape) {
    const int64_t row_bytes =
        std::max<int64_t>(1, RowElements(shape)) * static_cast<int64_t>(sizeof(float));
    return std::max<int64_t>(1, chunk_bytes / row_bytes);
  };
  bool ok = MakeGroup(file, "vars");  // the model's own (none)
  for (const std::string& group : LayerGroups(model)) ok = ok && MakeGroup(file, group + "/vars");
  for (const std::string& path : paths) {  // a sublayer's "vars" (the layers' exist)
    const std::string parent = path.substr(0, path.rfind('/'));
    if (ok && !Exists(file, parent)) ok = MakeGroup(file, parent);
  }
  if (!ok) return absl::InternalError("libhdf5: cannot create the layers' groups");
  for (size_t i = 0; i < vars.size(); ++i) {
    const int v = static_cast<int>(i);
    PSC_RETURN_IF_ERROR(WriteDataset(file, paths[i], vars[i].shape, chunk_rows(vars[i].shape),
                                     [&](int64_t first, int64_t count, float* out) {
                                       return source->Variable(v, first, count, out);
                                     }));
  }
  if (optimizer == nullptr) return absl::OkStatus();
  const int32_t iterations = static_cast<int32_t>(
      std::min<int64_t>(optimizer->iterations, std::numeric_limits<int32_t>::max()));
  ok = MakeGroup(file, "optimizer/vars") &&
       WriteScalar(file, "optimizer/vars/0", H5T_STD_I32LE, H5T_NATIVE_INT32, &iterations);
  size_t next = 1;
  if (ok && optimizer->learning_rate_variable) {
    ok = WriteScalar(file, "optimizer/vars/1", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT,
                     &optimizer->learning_rate);
    next = 2;
  }
  if (!ok) return absl::InternalError("libhdf5: cannot write the optimizer's iterations and rate");
  for (size_t k = 0; k < optimizer->slots.size(); ++k) {
    const OptimizerState::SlotOf slot = optimizer->slots[k];
    if (slot.variable < 0 || static_cast<size_t>(slot.variable) >= vars.size() || slot.slot < 0) {
      return absl::InvalidArgumentError(absl::StrCat("optimizer variable ", k + next, ": slot ",
                                                     slot.slot, " of no variable (", slot.variable,
                                                     ")"));
    }
    const compute::Shape& shape = vars[slot.variable].shape;
    PSC_RETURN_IF_ERROR(
        WriteDataset(file, absl::StrCat("optimizer/vars/", k + next), shape, chunk_rows(shape),
                     [&](int64_t first, int64_t count, float* out) {
                       return source->Slot(slot.variable, slot.slot, first, count, out);
                     }));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteWeightsH5(const std::string& path, const compute::Model& model,
                            WeightsSource* source, const OptimizerState* optimizer,
                            int64_t chunk_bytes) {
  if (chunk_bytes < 1) return absl::InvalidArgumentError("chunk_bytes must be >= 1");
  const std::string temp = absl::StrCat(path, ".tmp-", getpid());
  absl::Status status;
  {
    absl::MutexLock lock(&Hdf5Lock());
    Quiet();
    const hid_t file = H5Fcreate(temp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (file < 0) {
      status = absl::InternalError(absl::StrCat("libhdf5 cannot create ", temp));
    } else {
      status = WriteWeights(file, model, source, optimizer, chunk_bytes);
      if (H5Fclose(file) < 0 && status.ok()) {
        status = absl::InternalError(absl::StrCat("libhdf5 cannot close ", temp));
      }
    }
  }
  // Durable as io::FileSystem::WriteFileAtomically makes a file: the
  // temporary fsync'ed, renamed, the directory fsync'ed.
  if (status.ok()) {
    const int fd = ::open(temp.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0 || ::fsync(fd) != 0) {
      status = absl::InternalError(absl::StrCat("cannot fsync ", temp, ": ", std::strerror(errno)));
    }
    if (fd >= 0) ::close(fd);
  }
  if (status.ok() && std::rename(temp.c_str(), path.c_str()) != 0) {
    status = absl::InternalError(absl::StrCat("cannot rename ", temp, " to ", path));
  }
  if (!status.ok()) {
    std::remove(temp.c_str());
    return base::Prefix(status, absl::StrCat("cannot write ", path));
  }
  std::string dir = std::filesystem::path(path).parent_path().string();
  return io::LocalFileSystem()->SyncDir(dir.empty() ? "." : dir);
}

absl::StatusOr<std::string> WeightsH5Bytes(const compute::Model& model,
                                           const std::vector<std::vector<float>>& params) {
  const auto& vars = model.variables();
  if (params.size() != vars.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(params.size(), " variables for ", model.name(), ", which has ", vars.size()));
  }
  for (size_t i = 0; i < vars.size(); ++i) {
    if (static_cast<int64_t>(params[i].size()) != compute::ShapeSize(vars[i].shape)) {
      return absl::InvalidArgumentError(absl::StrCat(
          vars[i].name, ": ", params[i].size(), " values for ", compute::ShapeText(vars[i].shape)));
    }
  }
  WholeWeights source(&model, &params);
  absl::MutexLock lock(&Hdf5Lock());
  Quiet();
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  if (!fapl.ok() || H5Pset_fapl_core(fapl.get(), size_t{1} << 20, /*backing_store=*/0) < 0) {
    return absl::InternalError("libhdf5: cannot set up an in-memory file");
  }
  Handle file(H5Fcreate("pscluster.weights.h5", H5F_ACC_TRUNC, H5P_DEFAULT, fapl.get()), H5Fclose);
  if (!file.ok()) return absl::InternalError("libhdf5: cannot create an in-memory file");
  PSC_RETURN_IF_ERROR(WriteWeights(file.get(), model, &source, nullptr, int64_t{64} << 20));
  if (H5Fflush(file.get(), H5F_SCOPE_GLOBAL) < 0) {
    return absl::InternalError(absl::StrCat("libhdf5: cannot write the weights of ", model.name()));
  }
  const ssize_t size = H5Fget_file_image(file.get(), nullptr, 0);
  if (size <= 0) return absl::InternalError("libhdf5: no file image");
  std::string bytes(static_cast<size_t>(size), '\0');
  if (H5Fget_file_image(file.get(), bytes.data(), bytes.size()) != size) {
    return absl::InternalError("libhdf5: cannot copy the file image");
  }
  return bytes;
}

absl::StatusOr<std::vector<std::vector<float>>> ReadWeightsH5(absl::string_view h5,
                                                              const compute::Model& model,
                                                              absl::string_view what) {
  static constexpr char kSignature[] = "\x89HDF\r\n\x1a\n";
  if (h5.size() < 8 || std::memcmp(h5.data(), kSignature, 8) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": not an HDF5 file (no signature)"));
  }
  const auto& vars = model.variables();
  const std::vector<std::string> paths = VariablePaths(model);
  const std::vector<std::string> groups = LayerGroups(model);
  absl::MutexLock lock(&Hdf5Lock());
  Quiet();
  Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
  if (!fapl.ok() || H5Pset_fapl_core(fapl.get(), size_t{1} << 20, 0) < 0 ||
      H5Pset_file_image(fapl.get(), const_cast<char*>(h5.data()), h5.size()) < 0) {
    return absl::InternalError("libhdf5: cannot set up an in-memory file");
  }
  Handle file(H5Fopen("pscluster.weights.h5", H5F_ACC_RDONLY, fapl.get()), H5Fclose);
  if (!file.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": a corrupt HDF5 file"));
  }
  // Every layer holds exactly the variables the config gives it.
  for (size_t i = 0; i < groups.size(); ++i) {
    const compute::SummaryRow& row = model.summary()[i];
    // Per "vars" group of the layer (its own, or each sublayer's): the
    // variables the config gives it.
    std::map<std::string, int64_t> wants = {{groups[i] + "/vars", 0}};
    for (int v = 0; v < row.variables; ++v) {
      const bool sub = static_cast<size_t>(v) < row.sublayers.size();
      ++wants[sub ? absl::StrCat(groups[i], "/", row.sublayers[v], "/vars") : groups[i] + "/vars"];
    }
    for (const auto& [group, want] : wants) {
      const int64_t got = Members(file.get(), group);
      if (got != want && !(got == -1 && want == 0)) {
        return absl::InvalidArgumentError(
            absl::StrCat(what, ": ", group, " (layer \"", row.name, "\", ", row.keras_class,
                         ") holds ", got < 0 ? 0 : got, " variables; the config gives it ", want,
                         ": the weights do not match the config"));
      }
    }
  }
  std::vector<std::vector<float>> params;
  for (size_t i = 0; i < vars.size(); ++i) {
    const std::string where = absl::StrCat(what, ": ", paths[i], " (", vars[i].name, ")");
    Handle ds(H5Dopen2(file.get(), paths[i].c_str(), H5P_DEFAULT), H5Dclose);
    if (!ds.ok()) return absl::InvalidArgumentError(absl::StrCat(where, ": not a dataset"));
    Handle type(H5Dget_type(ds.get()), H5Tclose);
    Handle space(H5Dget_space(ds.get()), H5Sclose);
    if (!type.ok() || H5Tget_class(type.get()) != H5T_FLOAT || !space.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": not floating point"));
    }
    const int rank = H5Sget_simple_extent_ndims(space.get());
    std::vector<hsize_t> dims(rank > 0 ? rank : 0);
    if (rank < 0 ||
        (rank > 0 && H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr) < 0)) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": unreadable shape"));
    }
    const compute::Shape got(dims.begin(), dims.end());
    if (got != vars[i].shape) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, " has shape ", compute::ShapeText(got), "; the config gives ",
                       compute::ShapeText(vars[i].shape), ": the weights do not match the config"));
    }
    std::vector<float> values(static_cast<size_t>(compute::ShapeSize(vars[i].shape)));
    if (H5Dread(ds.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()) < 0) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": cannot read"));
    }
    params.push_back(std::move(values));
  }
  return params;
}

}  // namespace keras
}  // namespace psc
