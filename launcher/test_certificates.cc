#include "launcher/test_certificates.h"

#include <fstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/base/status_macros.h"
#include "launcher/subprocess.h"

namespace psc {
namespace launcher {
namespace {

// Runs openssl with `args` (its output in dir/openssl.log).
absl::Status OpenSsl(const std::string& dir, std::vector<std::string> args) {
  const std::string step = absl::StrJoin(args.begin(), args.begin() + 1, " ");
  args.insert(args.begin(), "/usr/bin/openssl");
  SubprocessOptions o;
  o.argv = args;
  o.env = {{"HOME", dir}, {"RANDFILE", dir + "/.rnd"}};
  o.stdout_path = dir + "/openssl.log";
  o.stderr_path = "=stdout";
  PSC_ASSIGN_OR_RETURN(auto child, Subprocess::Spawn(o));
  PSC_ASSIGN_OR_RETURN(ExitInfo exit, child->Wait(absl::Seconds(60)));
  if (!exit.exited || exit.exit_code != 0) {
    std::ifstream log(dir + "/openssl.log");
    const std::string output((std::istreambuf_iterator<char>(log)),
                             std::istreambuf_iterator<char>());
    return absl::InternalError(absl::StrCat("openssl ", step, ": ", exit.ToString(), ": ", output));
  }
  return absl::OkStatus();
}

std::vector<std::string> With(std::vector<std::string> a) {
  for (const char* s : {"-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"}) {
    a.push_back(s);
  }
  return a;
}

}  // namespace

absl::Status MakeTestCertificates(const std::string& dir) {
  PSC_RETURN_IF_ERROR(OpenSsl(dir, With({"req", "-x509", "-days", "2", "-subj", "/CN=psc-test-ca",
                                         "-keyout", dir + "/ca.key", "-out", dir + "/ca.pem"})));
  PSC_RETURN_IF_ERROR(
      OpenSsl(dir, With({"req", "-x509", "-days", "2", "-subj", "/CN=other-ca", "-keyout",
                         dir + "/other.key", "-out", dir + "/other.pem"})));
  PSC_RETURN_IF_ERROR(OpenSsl(dir, With({"req", "-subj", "/CN=127.0.0.1", "-keyout",
                                         dir + "/node.key", "-out", dir + "/node.csr"})));
  std::ofstream(dir + "/ext.cnf")
      << "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n";
  return OpenSsl(dir, {"x509", "-req", "-days", "2", "-in", dir + "/node.csr", "-CA",
                       dir + "/ca.pem", "-CAkey", dir + "/ca.key", "-CAcreateserial", "-extfile",
                       dir + "/ext.cnf", "-out", dir + "/node.pem"});
}

}  // namespace launcher
}  // namespace psc
