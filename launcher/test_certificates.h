// For tests and benchmarks only: a throwaway certificate authority and one
// certificate it signed for 127.0.0.1 and localhost (every daemon's server
// and client certificate), plus a second CA that signed nothing, made with
// the openssl command (Debian's openssl). EC P-256 keys, valid two days.
#ifndef PSC_LAUNCHER_TEST_CERTIFICATES_H_
#define PSC_LAUNCHER_TEST_CERTIFICATES_H_

#include <string>

#include "absl/status/status.h"

namespace psc {
namespace launcher {

// Writes into `dir`: ca.pem, ca.key, node.pem, node.key (the CA's
// certificate for 127.0.0.1 and localhost, serverAuth and clientAuth),
// other.pem and other.key (another CA). INTERNAL naming the openssl step
// that failed, with its output.
absl::Status MakeTestCertificates(const std::string& dir);

}  // namespace launcher
}  // namespace psc

#endif  // PSC_LAUNCHER_TEST_CERTIFICATES_H_
