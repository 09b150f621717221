#include "common/metrics/process_metrics.h"

#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "common/base/build_info.h"
#include "common/metrics/families.h"

namespace psc {
namespace metrics {
namespace {

std::string ReadFile(const char* path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The system's boot time, in seconds since the epoch (/proc/stat btime).
double BootTime() {
  std::istringstream lines(ReadFile("/proc/stat"));
  for (std::string line; std::getline(lines, line);) {
    double t = 0;
    if (line.rfind("btime ", 0) == 0 && absl::SimpleAtod(line.substr(6), &t)) return t;
  }
  return 0;
}

}  // namespace

std::vector<prometheus::MetricFamily> ProcessFamilies() {
  std::vector<prometheus::MetricFamily> out;
  // /proc/self/stat: "pid (comm) state ..."; comm may hold spaces, so the
  // fields are counted after its closing parenthesis (field 3 = state).
  const std::string stat = ReadFile("/proc/self/stat");
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return out;
  const std::vector<std::string> f = absl::StrSplit(stat.substr(close + 2), ' ');
  // Indices into f: field N of proc(5) is f[N - 3].
  auto field = [&f](int n) {
    double v = 0;
    const int i = n - 3;
    return i >= 0 && i < static_cast<int>(f.size()) && absl::SimpleAtod(f[i], &v) ? v : 0.0;
  };
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  if (ticks <= 0 || page <= 0) return out;
  out.push_back(Counter("process_cpu_seconds_total", "Total user and system CPU time in seconds.",
                        (field(14) + field(15)) / ticks));
  out.push_back(Gauge("process_virtual_memory_bytes", "Virtual memory size in bytes.", field(23)));
  out.push_back(
      Gauge("process_resident_memory_bytes", "Resident memory size in bytes.", field(24) * page));
  out.push_back(Gauge("process_start_time_seconds",
                      "Start time of the process since unix epoch in seconds.",
                      BootTime() + field(22) / ticks));
  out.push_back(Gauge("process_threads", "Number of OS threads in the process.", field(20)));
  std::error_code ec;
  double fds = 0;
  for (std::filesystem::directory_iterator it("/proc/self/fd", ec), end; !ec && it != end;
       it.increment(ec)) {
    ++fds;
  }
  if (!ec) out.push_back(Gauge("process_open_fds", "Number of open file descriptors.", fds));
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    out.push_back(Gauge("process_max_fds", "Maximum number of open file descriptors.",
                        static_cast<double>(limit.rlim_cur)));
  }
  return out;
}

prometheus::MetricFamily BuildInfoFamily(const std::string& role) {
  return Gauge("pscluster_build_info",
               "Always 1; the labels say what was built (the version and git commit) and which "
               "role this process is.",
               1,
               {{"version", base::Version()}, {"git_commit", base::GitCommit()}, {"role", role}});
}

}  // namespace metrics
}  // namespace psc
