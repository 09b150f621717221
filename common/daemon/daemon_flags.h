// Flags every daemon takes (ps_server, worker, chief). Defined once, in
// daemon_flags.cc; a daemon's own flags live in its main.cc.
#ifndef PSC_COMMON_DAEMON_DAEMON_FLAGS_H_
#define PSC_COMMON_DAEMON_DAEMON_FLAGS_H_

#include <string>

#include "absl/flags/declare.h"
#include "absl/time/time.h"

ABSL_DECLARE_FLAG(std::string, tf_config);
ABSL_DECLARE_FLAG(bool, dry_run);
ABSL_DECLARE_FLAG(std::string, bind);
ABSL_DECLARE_FLAG(std::string, auth_token_file);
ABSL_DECLARE_FLAG(std::string, tls_cert);
ABSL_DECLARE_FLAG(std::string, tls_key);
ABSL_DECLARE_FLAG(std::string, tls_ca);
ABSL_DECLARE_FLAG(bool, allow_insecure);
ABSL_DECLARE_FLAG(absl::Duration, shutdown_grace);
ABSL_DECLARE_FLAG(bool, data_channel);
ABSL_DECLARE_FLAG(int, metrics_port);

#endif  // PSC_COMMON_DAEMON_DAEMON_FLAGS_H_
