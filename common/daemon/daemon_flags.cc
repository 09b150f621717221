#include "common/daemon/daemon_flags.h"

#include "absl/flags/flag.h"

ABSL_FLAG(std::string, tf_config, "",
          "The cluster and this task, as TF_CONFIG JSON, or @path to read it from a file. "
          "Overrides the TF_CONFIG environment variable.");
ABSL_FLAG(bool, dry_run, false,
          "Print this task's task_type, task_index, address and cluster as one JSON object, "
          "then exit 0.");
ABSL_FLAG(std::string, bind, "",
          "Listen on this host (or host:port) instead of the task's TF_CONFIG address, "
          "e.g. 0.0.0.0 in a container.");
ABSL_FLAG(std::string, auth_token_file, "",
          "File holding the cluster token. Every RPC carries it; calls without it get "
          "UNAUTHENTICATED. Required to listen on a non-loopback address.");
ABSL_FLAG(std::string, tls_cert, "", "PEM certificate of this daemon (mutual TLS).");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert.");
ABSL_FLAG(std::string, tls_ca, "", "PEM CA certificate that signs every daemon's certificate.");
ABSL_FLAG(bool, allow_insecure, false,
          "Allow listening on a non-loopback address without a token: anyone who can reach "
          "the port can then read and change the model.");
ABSL_FLAG(absl::Duration, shutdown_grace, absl::Seconds(10),
          "On SIGTERM/SIGINT or Shutdown, how long in-flight calls may take to finish.");
ABSL_FLAG(bool, data_channel, true,
          "Move Push/Pull tensor bytes over a plain TCP connection beside gRPC, negotiated and "
          "ticket-checked through gRPC (ps_server: offer it; worker and chief: use it when "
          "offered). Under --tls_* it runs in TLS with the same certificates.");
ABSL_FLAG(int, metrics_port, 0,
          "Serve Prometheus metrics (the role's, process_* and pscluster_build_info) at "
          "http://<listen host>:PORT/metrics; 0 = off.");
