// The data a job trains on, as its model reads it: Fashion-MNIST from the
// IDX files in job.data_dir() (the default), or the .npz archive of
// job.numpy_data(). The one loader the workers, the chief, the standalone
// trainer and the evaluator call, so that they all see the same examples.
#ifndef PSC_COMMON_JOB_JOB_DATA_H_
#define PSC_COMMON_JOB_JOB_DATA_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/compute/model.h"
#include "common/data/dataset.h"
#include "common/data/numpy_dataset.h"
#include "common/job/job_result.h"
#include "proto/job.pb.h"

namespace psc {
namespace job {

struct JobData {
  data::FashionMnist splits;
  DataRecord record;
  // What every split is read through: the model's own Rescaling or
  // Normalization layer when it has one, else the job's --standardize or
  // --rescale; an export writes it into the model (input_preprocessing.h).
  data::Preprocessing preprocessing;
  // Streamed data files (record_stream.h): each training file's records
  // (the validation tail and --max_train_examples off); the training
  // split then holds only their count.
  std::vector<int64_t> train_records;
};

// The NumPy loader's options for the job's model and flags; `path` names
// the data in messages. INVALID_ARGUMENT for preprocessing flags the model
// refuses (its own layer, several inputs).
absl::StatusOr<data::NumpyDatasetOptions> LoaderOptions(const proto::JobSpec& job,
                                                        const compute::Model& model,
                                                        const std::string& path,
                                                        double validation_split);

// Loads, splits and preprocesses the job's data for `model`'s input and
// classes. The training split of an .npz stays in the archive's mapped
// pages (numpy_file.h). Errors are the loaders' (data/dataset.h,
// data/numpy_dataset.h), and INVALID_ARGUMENT when an .npz leaves no
// validation examples (no x_val and --validation_split 0): the message says
// to give --validation_split.
absl::StatusOr<JobData> LoadJobData(const proto::JobSpec& job, const compute::Model& model);

// The same for a process that only trains (a cluster worker): data files'
// validation and test splits are not read (their splits are empty); the
// training split is the one LoadJobData gives.
absl::StatusOr<JobData> LoadTrainingData(const proto::JobSpec& job, const compute::Model& model);

// The preprocessing `record` describes (a result file's data record).
data::Preprocessing RecordedPreprocessing(const DataRecord& record);

// What `chief --check_job` does: creates the job's model and loads its data
// as LoadJobData does (so every error a worker would meet is met here), and
// describes them in one line: "job ok: seed_cnn (435306 parameters); data
// npz:PATH: 54000 train, 6000 validation, 10000 test examples,
// standardize". Every error is INVALID_ARGUMENT (a missing or corrupt file
// is bad input: exit 2), with the loader's message.
absl::StatusOr<std::string> CheckJob(const proto::JobSpec& job);

// "accuracy", then the job's compiled metrics' names: what the progress
// lines and the result file report.
std::string MetricNames(const proto::JobSpec& job);

}  // namespace job
}  // namespace psc

#endif  // PSC_COMMON_JOB_JOB_DATA_H_
