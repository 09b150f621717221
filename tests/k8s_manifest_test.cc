// Label `deploy`: the deployment manifests, without a cluster or an engine.
// Every YAML file is read through python3-yaml (YAML to JSON) and checked for
// the structure docs/guide/deploy.md promises (probes, requests and limits, the
// metrics port and its annotations or labels, compose healthchecks and log
// rotation). Then, for every replica, the test builds the TF_CONFIG its pod
// would get and runs the pod's own command with --dry_run against the real
// daemons, checking the role each one prints:
// - deploy/k8s/tfjob*.yaml: the TF_CONFIG Kubeflow's operator injects
//   ({"environment": "cloud"}, <job>-<type>-<i>.<ns>.svc:<tfjob-port>, every
//   replica type in the cluster, the evaluator included);
// - deploy/k8s/statefulset.yaml: the pod's env with Kubernetes' $(VAR)
//   expansion and its shell command, which takes the index from the ordinal;
// - deploy/docker-compose.yml: each service's TF_CONFIG and command, with
//   the defaults of its ${VAR:-default} variables.
#include <cctype>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/local_cluster.h"

namespace psc {
namespace testing {
namespace {

using json = nlohmann::json;
using Env = std::map<std::string, std::string>;

constexpr char kNamespace[] = "ml-team";
const std::set<std::string> kDaemons = {"ps_server", "worker", "chief", "evaluator"};
constexpr int kMetricsPort = 9464;

std::string SourcePath(const std::string& relative) {
  return std::string(PSC_SOURCE_DIR) + "/" + relative;
}

// Every document of a YAML file, as JSON (null documents dropped).
std::vector<json> LoadYaml(const std::string& relative) {
  static constexpr char kYamlToJson[] =
      "import json, sys, yaml\n"
      "with open(sys.argv[1]) as f:\n"
      "    docs = [d for d in yaml.safe_load_all(f) if d is not None]\n"
      "print(json.dumps(docs))\n";
  auto r = RunProgram({"/usr/bin/python3", "-c", kYamlToJson, SourcePath(relative)}, {},
                      absl::Seconds(60));
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return {};
  EXPECT_EQ(r->exit.ToString(), "exit 0")
      << relative << ": " << r->err << " (python3-yaml comes from deploy/install_deps.sh)";
  json docs = json::parse(r->out, nullptr, /*allow_exceptions=*/false);
  EXPECT_TRUE(docs.is_array()) << relative << ": " << r->out;
  return docs.is_array() ? docs.get<std::vector<json>>() : std::vector<json>{};
}

// Kubernetes' expansion of $(NAME) in an env value or argument: names defined
// in `env` are replaced, others are left as they are; $$ is a literal $.
std::string ExpandK8s(const std::string& in, const Env& env) {
  std::string out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '$' && i + 1 < in.size() && in[i + 1] == '$') {
      out += '$';
      ++i;
    } else if (in[i] == '$' && i + 1 < in.size() && in[i + 1] == '(') {
      const size_t close = in.find(')', i);
      const std::string name = close == std::string::npos ? "" : in.substr(i + 2, close - i - 2);
      auto it = env.find(name);
      if (it == env.end()) {
        out += in[i];
        continue;
      }
      out += it->second;
      i = close;
    } else {
      out += in[i];
    }
  }
  return out;
}

// A container's environment as the kubelet builds it: `value`s expanded in
// order; fieldRef metadata.namespace / metadata.name from the pod.
Env ContainerEnv(const json& container, const std::string& pod_name) {
  Env env;
  for (const json& e : container.value("env", json::array())) {
    const std::string name = e.at("name");
    if (e.contains("value")) {
      env[name] = ExpandK8s(e["value"].get<std::string>(), env);
    } else if (e.contains("valueFrom") && e["valueFrom"].contains("fieldRef")) {
      const std::string field = e["valueFrom"]["fieldRef"].at("fieldPath");
      if (field == "metadata.namespace") env[name] = kNamespace;
      if (field == "metadata.name") env[name] = pod_name;
    }
  }
  return env;
}

std::vector<std::string> Strings(const json& list) {
  std::vector<std::string> out;
  for (const json& s : list) out.push_back(s.is_string() ? s.get<std::string>() : s.dump());
  return out;
}

// The value of --flag=value in `argv`, or "".
std::string FlagValue(const std::vector<std::string>& argv, const std::string& flag) {
  for (const std::string& a : argv) {
    if (absl::StartsWith(a, flag + "=")) return a.substr(flag.size() + 1);
  }
  return "";
}

// Runs a container's argv (a daemon name or /bin/sh running one) with
// --dry_run appended and `env` on top, the daemons on PATH; returns what it
// printed, parsed (null on failure, with the failure recorded).
json DryRun(std::vector<std::string> argv, Env env, const std::string& what) {
  if (kDaemons.count(argv.at(0))) argv[0] = BinPath(argv[0]);
  argv.push_back("--dry_run");
  const std::string bin_dir = BinPath("");
  env["PATH"] = bin_dir.substr(0, bin_dir.size() - 1) + ":/usr/bin:/bin";
  auto r = RunProgram(argv, env, absl::Seconds(30));
  EXPECT_TRUE(r.ok()) << what << ": " << r.status();
  if (!r.ok()) return nullptr;
  EXPECT_EQ(r->exit.ToString(), "exit 0")
      << what << ": " << absl::StrJoin(argv, " ") << "\nstderr: " << r->err;
  json printed = json::parse(r->out, nullptr, /*allow_exceptions=*/false);
  EXPECT_TRUE(printed.is_object()) << what << " printed: " << r->out;
  return printed.is_object() ? printed : json();
}

// A Kubernetes quantity as a number: plain ("2", 1), milli ("500m") or
// binary ("512Mi", "1Gi"), the forms the manifests use; -1 for any other.
double Quantity(const json& q) {
  if (q.is_number()) return q.get<double>();
  if (!q.is_string()) return -1;
  const std::string s = q.get<std::string>();
  size_t digits = 0;
  while (digits < s.size() &&
         (std::isdigit(static_cast<unsigned char>(s[digits])) || s[digits] == '.')) {
    ++digits;
  }
  if (digits == 0) return -1;
  const double value = std::atof(s.substr(0, digits).c_str());
  const std::string suffix = s.substr(digits);
  constexpr double kKi = 1024;
  if (suffix.empty()) return value;
  if (suffix == "m") return value / 1000;
  if (suffix == "Ki") return value * kKi;
  if (suffix == "Mi") return value * kKi * kKi;
  if (suffix == "Gi") return value * kKi * kKi * kKi;
  return -1;
}

// How a pod's container is probed: the gRPC daemons by Kubernetes' native
// gRPC probe of the standard health service on port 2222; the evaluator,
// which serves no gRPC, by GET /metrics.
enum class Probe { kGrpc, kMetrics };

// Readiness and liveness probes of `c`, and how long liveness tolerates a
// daemon that does not answer before the kubelet restarts it.
void CheckProbes(const json& c, Probe probe, absl::Duration min_liveness_grace,
                 const std::string& what) {
  for (const char* name : {"readinessProbe", "livenessProbe"}) {
    SCOPED_TRACE(absl::StrCat(what, " ", name));
    ASSERT_TRUE(c.contains(name));
    const json& p = c[name];
    if (probe == Probe::kGrpc) {
      ASSERT_TRUE(p.contains("grpc")) << "native gRPC probe of the health service";
      EXPECT_EQ(p["grpc"].value("port", 0), 2222);
    } else {
      ASSERT_TRUE(p.contains("httpGet"));
      EXPECT_EQ(p["httpGet"].value("path", ""), "/metrics");
      const json port = p["httpGet"].value("port", json());
      EXPECT_TRUE(port == "metrics" || port == kMetricsPort) << port;
    }
    EXPECT_GT(p.value("periodSeconds", 0), 0);
    EXPECT_GT(p.value("timeoutSeconds", 0), 0);
    EXPECT_GT(p.value("failureThreshold", 0), 0);
  }
  const json& live = c["livenessProbe"];
  // Kubernetes' defaults: periodSeconds 10, failureThreshold 3.
  const absl::Duration grace =
      absl::Seconds(live.value("periodSeconds", 10) * live.value("failureThreshold", 3));
  EXPECT_GE(grace, min_liveness_grace)
      << what << ": liveness would restart a daemon that is busy, not dead";
}

// Requests and limits for CPU and memory, each limit at least its request.
void CheckResources(const json& c, const std::string& what) {
  const json resources = c.value("resources", json::object());
  const json requests = resources.value("requests", json::object());
  const json limits = resources.value("limits", json::object());
  for (const char* r : {"cpu", "memory"}) {
    ASSERT_TRUE(requests.contains(r)) << what << ": no " << r << " request";
    ASSERT_TRUE(limits.contains(r)) << what << ": no " << r << " limit";
    EXPECT_GT(Quantity(requests[r]), 0) << what << " " << r << ": " << requests[r];
    EXPECT_GE(Quantity(limits[r]), Quantity(requests[r])) << what << " " << r;
  }
  EXPECT_GE(Quantity(limits["memory"]), 512.0 * 1024 * 1024) << what;
}

// The Prometheus annotations of a pod template's metadata.
void CheckPrometheusAnnotations(const json& metadata, const std::string& what) {
  const json annotations = metadata.value("annotations", json::object());
  EXPECT_EQ(annotations.value("prometheus.io/scrape", ""), "true") << what;
  EXPECT_EQ(annotations.value("prometheus.io/port", ""), std::to_string(kMetricsPort)) << what;
  EXPECT_EQ(annotations.value("prometheus.io/path", ""), "/metrics") << what;
}

// The one container of a pod template, and the checks every pscluster pod
// passes: non-root as the image's user, the token from the Secret, port 2222,
// the metrics port, requests and limits.
const json& CheckPod(const json& pod_spec, const std::string& what) {
  EXPECT_EQ(pod_spec.at("containers").size(), 1u) << what;
  const json& c = pod_spec.at("containers").at(0);
  const json sc = pod_spec.value("securityContext", json::object());
  EXPECT_EQ(sc.value("runAsNonRoot", false), true) << what;
  EXPECT_EQ(sc.value("runAsUser", 0), 10001) << what;
  EXPECT_EQ(sc.value("fsGroup", 0), 10001) << what << ": volumes must be writable by uid 10001";
  EXPECT_THAT(c.value("image", ""), ::testing::StartsWith("pscluster:")) << what;

  std::map<std::string, std::string> secret_mounts;  // mountPath -> secret
  std::map<std::string, std::string> volume_secret;
  for (const json& v : pod_spec.value("volumes", json::array())) {
    if (v.contains("secret")) volume_secret[v["name"]] = v["secret"].at("secretName");
  }
  for (const json& m : c.value("volumeMounts", json::array())) {
    auto it = volume_secret.find(m.at("name"));
    if (it != volume_secret.end()) secret_mounts[m.at("mountPath")] = it->second;
  }
  std::vector<std::string> argv = Strings(c.value("command", json::array()));
  const std::vector<std::string> args = Strings(c.value("args", json::array()));
  argv.insert(argv.end(), args.begin(), args.end());
  const std::string all = absl::StrJoin(argv, " ");
  EXPECT_THAT(all, ::testing::HasSubstr("--auth_token_file=/etc/pscluster/token")) << what;
  EXPECT_EQ(secret_mounts["/etc/pscluster"], "pscluster-token") << what;
  EXPECT_THAT(all, ::testing::HasSubstr("--bind=0.0.0.0")) << what;

  EXPECT_THAT(all, ::testing::HasSubstr(absl::StrCat("--metrics_port=", kMetricsPort))) << what;

  bool port = false, metrics_port = false;
  for (const json& p : c.value("ports", json::array())) {
    port |= p.value("name", "") == "tfjob-port" && p.value("containerPort", 0) == 2222;
    metrics_port |= p.value("name", "") == "metrics" && p.value("containerPort", 0) == kMetricsPort;
  }
  EXPECT_TRUE(port) << what << ": no port 2222 named tfjob-port";
  EXPECT_TRUE(metrics_port) << what << ": no port " << kMetricsPort << " named metrics";
  CheckResources(c, what);
  return c;
}

// The claim mounted at /var/lib/pscluster, or "".
std::string DataClaim(const json& pod_spec) {
  std::map<std::string, std::string> claims;
  for (const json& v : pod_spec.value("volumes", json::array())) {
    if (v.contains("persistentVolumeClaim")) {
      claims[v["name"]] = v["persistentVolumeClaim"].at("claimName");
    }
  }
  for (const json& m : pod_spec.at("containers").at(0).value("volumeMounts", json::array())) {
    if (m.value("mountPath", "") == "/var/lib/pscluster" && claims.count(m.at("name"))) {
      return claims[m["name"]];
    }
  }
  return "";
}

std::string Lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

TEST(K8sManifestTest, PvcIsSharedByEveryPod) {
  auto docs = LoadYaml("deploy/k8s/pvc.yaml");
  ASSERT_EQ(docs.size(), 1u);
  EXPECT_EQ(docs[0]["kind"], "PersistentVolumeClaim");
  EXPECT_EQ(docs[0]["metadata"]["name"], "pscluster-data");
  EXPECT_EQ(docs[0]["spec"]["accessModes"], json::array({"ReadWriteMany"}))
      << "every ps writes its shard of a checkpoint into the one claim";
}

// What Kubeflow's operator does with a TFJob (genClusterSpec and
// genTFConfigJSONStr in pkg/controller.v1/tensorflow/tensorflow.go of
// kubeflow/training-operator): every replica type, the evaluator included,
// lower-cased, <job>-<type>-<i>.<namespace>.svc:<port>, where the port is the
// "tfjob-port" of the container named "tensorflow" (2222 without one). So the
// chief, ps and workers see an "evaluator" entry in their cluster, and the
// evaluator finds itself listed. (tf-operator v1.0 and v1.1 left the
// evaluator out; kubeflow/tf-operator#1146, in v1.2, put it in. An evaluator
// outside the cluster is accepted too: common/cluster/cluster_config_test.cc.)
void CheckTfJob(const std::string& file) {
  auto docs = LoadYaml(file);
  ASSERT_EQ(docs.size(), 1u);
  json& job = docs[0];  // non-const: a missing key reads as null, not a crash
  EXPECT_EQ(job["apiVersion"], "kubeflow.org/v1");
  ASSERT_EQ(job["kind"], "TFJob");
  const std::string name = job["metadata"]["name"];
  json& specs = job["spec"]["tfReplicaSpecs"];
  for (const char* type : {"Chief", "PS", "Worker"}) ASSERT_TRUE(specs.contains(type)) << type;
  EXPECT_EQ(specs["Chief"]["replicas"], 1);

  json cluster = json::object();
  for (const auto& [type, spec] : specs.items()) {
    ASSERT_THAT(type, ::testing::AnyOf("Chief", "PS", "Worker", "Evaluator")) << "replica type";
    int port = -1;
    for (const json& c : spec["template"]["spec"]["containers"]) {
      if (c.value("name", "") != "tensorflow") continue;
      for (const json& p : c.value("ports", json::array())) {
        if (p.value("name", "") == "tfjob-port") port = p["containerPort"];
      }
    }
    ASSERT_EQ(port, 2222) << type << ": the operator reads the port of container \"tensorflow\"";
    const std::string rt = Lower(type);
    for (int i = 0; i < spec["replicas"].get<int>(); ++i) {
      cluster[rt].push_back(absl::StrCat(name, "-", rt, "-", i, ".", kNamespace, ".svc:", port));
    }
  }

  int replicas = 0;
  for (const auto& [type, spec] : specs.items()) {
    const std::string what = absl::StrCat(file, " ", type);
    json& pod = spec["template"]["spec"];
    const json& c = CheckPod(pod, what);
    EXPECT_EQ(c.at("name"), "tensorflow") << what;
    CheckPrometheusAnnotations(spec["template"]["metadata"], what);
    // The chief's liveness must outlast a busy spell of a long job.
    CheckProbes(c, type == "Evaluator" ? Probe::kMetrics : Probe::kGrpc,
                absl::Seconds(type == "Chief" ? 120 : 60), what);
    EXPECT_THAT(spec.value("restartPolicy", ""), ::testing::AnyOf("OnFailure", "ExitCode"))
        << what << ": a failed server or worker must come back";
    if (type == "Chief" || type == "PS" || type == "Evaluator") {
      EXPECT_EQ(DataClaim(pod), "pscluster-data") << what << ": checkpoints go to the PVC";
    }
    if (type == "Worker" && absl::StrContains(file, "gpu")) {
      const json limits = c.value("resources", json::object()).value("limits", json::object());
      EXPECT_GE(limits.value("nvidia.com/gpu", 0), 1) << what;
      EXPECT_EQ(c.at("image"), "pscluster:cuda") << what;
    } else {
      EXPECT_EQ(c.at("image"), "pscluster:latest") << what;
    }
    std::vector<std::string> argv = Strings(c.at("command"));
    for (const std::string& a : Strings(c.value("args", json::array()))) argv.push_back(a);
    if (type == "Chief") {
      EXPECT_THAT(FlagValue(argv, "--checkpoint_dir"),
                  ::testing::StartsWith("/var/lib/pscluster/"));
    }

    const std::string rt = Lower(type);
    for (int i = 0; i < spec["replicas"].get<int>(); ++i) {
      const json tf_config = {
          {"cluster", cluster}, {"task", {{"type", rt}, {"index", i}}}, {"environment", "cloud"}};
      json printed = DryRun(argv, {{"TF_CONFIG", tf_config.dump()}}, absl::StrCat(what, " ", i));
      ASSERT_FALSE(printed.is_null());
      EXPECT_EQ(printed["task_type"], rt) << what;
      EXPECT_EQ(printed["task_index"], i) << what;
      EXPECT_EQ(printed["address"], cluster[rt][i]) << what;
      EXPECT_EQ(printed["cluster"], cluster) << what;
      ++replicas;
    }
  }
  EXPECT_EQ(replicas, specs.contains("Evaluator") ? 6 : 5);
}

TEST(K8sManifestTest, TfJobReplicasGetTheirRoleFromTheOperatorsTfConfig) {
  CheckTfJob("deploy/k8s/tfjob.yaml");
  ASSERT_EQ(LoadYaml("deploy/k8s/tfjob.yaml")[0]["spec"]["tfReplicaSpecs"].count("Evaluator"), 1u)
      << "the plain TFJob has an Evaluator replica";
}

TEST(K8sManifestTest, GpuWorkersKeepTheirGpuLimit) {
  auto docs = LoadYaml("deploy/k8s/tfjob-gpu.yaml");
  ASSERT_EQ(docs.size(), 1u);
  json limits = docs[0]["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
                    ["resources"]["limits"];
  EXPECT_EQ(limits.value("nvidia.com/gpu", 0), 1);
  EXPECT_GE(Quantity(limits["memory"]), 4.0 * 1024 * 1024 * 1024)
      << "the CUDA context, cuDNN and pinned buffers need host memory";
}

TEST(K8sManifestTest, GpuTfJobReplicasGetTheirRoleFromTheOperatorsTfConfig) {
  CheckTfJob("deploy/k8s/tfjob-gpu.yaml");
}

// A pod of the plain-Kubernetes variant: its name, hostname, stable address
// and container.
struct PlainPod {
  std::string role;  // app.kubernetes.io/component
  int index;
  std::string name;     // also its hostname
  std::string address;  // <hostname>.<subdomain>.<ns>.svc:2222
  json spec;
  json metadata;  // the pod template's
};

TEST(K8sManifestTest, PlainKubernetesPodsBuildTfConfigFromTheirOrdinal) {
  auto docs = LoadYaml("deploy/k8s/statefulset.yaml");
  std::map<std::string, json> services;  // headless ones, by name
  std::vector<PlainPod> pods;
  auto selects = [](const json& selector, const json& labels) {
    for (const auto& [k, v] : selector.items()) {
      if (!labels.contains(k) || labels[k] != v) return false;
    }
    return !selector.empty();
  };
  for (json& d : docs) {
    if (d["kind"] == "Service") {
      EXPECT_EQ(d["spec"]["clusterIP"], "None") << d["metadata"]["name"] << " must be headless";
      EXPECT_EQ(d["spec"]["ports"][0]["port"], 2222);
      services[d["metadata"]["name"]] = d;
    }
  }
  ASSERT_EQ(services.size(), 3u);
  for (json& d : docs) {
    const std::string what =
        absl::StrCat(d["kind"].get<std::string>(), " ", d["metadata"]["name"].get<std::string>());
    if (d["kind"] == "StatefulSet") {
      EXPECT_EQ(d["apiVersion"], "apps/v1");
      const json& labels = d["spec"]["template"]["metadata"]["labels"];
      EXPECT_TRUE(selects(d["spec"]["selector"]["matchLabels"], labels)) << what;
      const std::string service = d["spec"]["serviceName"];
      ASSERT_TRUE(services.count(service)) << what << ": no headless Service " << service;
      EXPECT_TRUE(selects(services[service]["spec"]["selector"], labels)) << what;
      for (int i = 0; i < d["spec"]["replicas"].get<int>(); ++i) {
        const std::string pod = absl::StrCat(d["metadata"]["name"].get<std::string>(), "-", i);
        pods.push_back({labels.at("app.kubernetes.io/component").get<std::string>(), i, pod,
                        absl::StrCat(pod, ".", service, ".", kNamespace, ".svc:2222"),
                        d["spec"]["template"]["spec"], d["spec"]["template"]["metadata"]});
      }
    } else if (d["kind"] == "Job") {
      EXPECT_EQ(d["apiVersion"], "batch/v1");
      const json& spec = d["spec"]["template"]["spec"];
      const json& labels = d["spec"]["template"]["metadata"]["labels"];
      const std::string service = spec.at("subdomain");
      ASSERT_TRUE(services.count(service)) << what << ": no headless Service " << service;
      EXPECT_TRUE(selects(services[service]["spec"]["selector"], labels)) << what;
      EXPECT_EQ(spec["restartPolicy"], "OnFailure") << what;
      const std::string host = spec.at("hostname");
      pods.push_back({labels.at("app.kubernetes.io/component").get<std::string>(), 0, host,
                      absl::StrCat(host, ".", service, ".", kNamespace, ".svc:2222"), spec,
                      d["spec"]["template"]["metadata"]});
    }
  }
  ASSERT_EQ(pods.size(), 5u);

  // The cluster every pod must see: exactly the pods there are.
  json expected = json::object();
  for (const PlainPod& p : pods) expected[p.role].push_back(p.address);
  EXPECT_EQ(expected["chief"].size(), 1u);

  for (const PlainPod& p : pods) {
    const std::string what = "pod " + p.name;
    const json& c = CheckPod(p.spec, what);
    CheckPrometheusAnnotations(p.metadata, what);
    CheckProbes(c, Probe::kGrpc, absl::Seconds(p.role == "chief" ? 120 : 60), what);
    if (p.role != "worker") {
      EXPECT_EQ(DataClaim(p.spec), "pscluster-data") << what;
    }
    Env env = ContainerEnv(c, p.name);
    env["HOSTNAME"] = p.name;  // the runtime sets it to the pod's hostname
    std::vector<std::string> argv;
    for (const std::string& a : Strings(c.at("command"))) argv.push_back(ExpandK8s(a, env));
    for (const std::string& a : Strings(c.value("args", json::array()))) {
      argv.push_back(ExpandK8s(a, env));
    }
    json printed = DryRun(argv, env, what);
    ASSERT_FALSE(printed.is_null());
    EXPECT_EQ(printed["task_type"], p.role) << what;
    EXPECT_EQ(printed["task_index"], p.index) << what;
    EXPECT_EQ(printed["address"], p.address) << what;
    EXPECT_EQ(printed["cluster"], expected) << what;
  }

  // `kubectl scale statefulset/pscluster-worker --replicas=3`: the new pod's
  // ordinal is beyond PSC_CLUSTER's workers, so it joins the chief's job at
  // its own name (docs/guide/membership.md).
  for (const PlainPod& p : pods) {
    if (p.role != "worker" || p.index != 0) continue;
    const json& c = p.spec.at("containers")[0];
    const std::string name = "pscluster-worker-2";
    Env env = ContainerEnv(c, name);
    env["HOSTNAME"] = name;
    std::vector<std::string> argv;
    for (const std::string& a : Strings(c.at("command"))) argv.push_back(ExpandK8s(a, env));
    json printed = DryRun(argv, env, name);
    ASSERT_FALSE(printed.is_null());
    EXPECT_EQ(printed["task_index"], 2);
    EXPECT_EQ(printed["address"],
              absl::StrCat(name, ".pscluster-worker.", kNamespace, ".svc:2222"));
    EXPECT_EQ(printed["join"], expected["chief"][0]);
  }
}

// docker-compose's interpolation of the forms the compose file uses:
// ${NAME:-default}, ${NAME-default} and ${NAME}, with no variable set.
std::string InterpolateDefaults(const std::string& in) {
  std::string out;
  size_t i = 0;
  while (i < in.size()) {
    if (in.compare(i, 2, "${") != 0) {
      out += in[i++];
      continue;
    }
    const size_t close = in.find('}', i);
    const std::string body = in.substr(i + 2, close - i - 2);
    const size_t dash = body.find('-');
    if (dash != std::string::npos) out += body.substr(dash + 1);
    i = close + 1;
  }
  return out;
}

// What every daemon service of the compose file carries besides its command:
// a healthcheck (gRPC health, or the evaluator's metrics port), rotated
// json-file logs, Prometheus labels, CPU and memory limits, and no port
// published on the host.
void CheckComposeDaemon(const std::string& name, const json& service) {
  const json health = service.value("healthcheck", json::object());
  const std::vector<std::string> test = Strings(health.value("test", json::array()));
  if (name == "evaluator") {  // it serves no gRPC: GET /metrics
    EXPECT_THAT(absl::StrJoin(test, " "),
                ::testing::HasSubstr(absl::StrCat("/dev/tcp/127.0.0.1/", kMetricsPort)));
    EXPECT_THAT(absl::StrJoin(test, " "), ::testing::HasSubstr("GET /metrics"));
  } else {
    ASSERT_GE(test.size(), 4u) << "healthcheck.test";
    EXPECT_EQ(std::vector<std::string>(test.begin(), test.begin() + 4),
              std::vector<std::string>({"CMD", "pscluster", "health", "127.0.0.1:2222"}));
  }
  for (const char* key : {"interval", "timeout", "retries", "start_period"}) {
    EXPECT_TRUE(health.contains(key)) << "healthcheck." << key;
  }
  const json logging = service.value("logging", json::object());
  EXPECT_EQ(logging.value("driver", ""), "json-file");
  const json options = logging.value("options", json::object());
  EXPECT_TRUE(options.contains("max-size") && options.contains("max-file"))
      << "logs must rotate: " << logging.dump();
  const json labels = service.value("labels", json::object());
  EXPECT_EQ(labels.value("prometheus.io/scrape", ""), "true");
  EXPECT_EQ(labels.value("prometheus.io/port", ""), std::to_string(kMetricsPort));
  // cpus and mem_limit: docker-compose 1.x (deploy/test_compose.sh) and
  // `docker compose` both honour them.
  EXPECT_GT(service.value("cpus", 0.0), 0.0);
  EXPECT_FALSE(service.value("mem_limit", "").empty());
  EXPECT_FALSE(service.contains("ports")) << "nothing is published on the host by default";
}

TEST(K8sManifestTest, ComposeServicesGetTheirRoleFromServiceNames) {
  auto docs = LoadYaml("deploy/docker-compose.yml");
  ASSERT_EQ(docs.size(), 1u);
  json& services = docs[0]["services"];
  for (const char* s :
       {"chief", "ps-0", "ps-1", "worker-0", "worker-1", "evaluator", "tensorboard"}) {
    ASSERT_TRUE(services.contains(s)) << s;
  }
  EXPECT_EQ(services["evaluator"]["profiles"], json::array({"evaluator"}));
  EXPECT_TRUE(docs[0]["secrets"].contains("pscluster_token"));
  EXPECT_TRUE(docs[0]["volumes"].contains("pscluster-data"));

  // TensorBoard: another image, only with its profile, read-only on the
  // volume, published on this host's loopback only.
  {
    const json& tb = services["tensorboard"];
    EXPECT_EQ(tb["profiles"], json::array({"tensorboard"}));
    EXPECT_THAT(InterpolateDefaults(tb.value("image", "")),
                ::testing::StartsWith("tensorflow/tensorflow"));
    EXPECT_THAT(Strings(tb.value("command", json::array())),
                ::testing::Contains("--logdir=/var/lib/pscluster/logs"));
    EXPECT_EQ(Strings(tb.value("volumes", json::array())),
              std::vector<std::string>({"pscluster-data:/var/lib/pscluster:ro"}));
    EXPECT_EQ(Strings(tb.value("ports", json::array())),
              std::vector<std::string>({"127.0.0.1:6006:6006"}));
  }

  json training_cluster;  // what chief, ps and workers see
  int checked = 0;
  for (const auto& [name, service] : services.items()) {
    if (name == "tensorboard") continue;  // no daemon
    SCOPED_TRACE("service " + name);
    CheckComposeDaemon(name, service);
    const json& compose_cmd = service.at("command");
    std::vector<std::string> argv;
    if (compose_cmd.is_string()) {  // docker-compose splits it like a shell
      argv = absl::StrSplit(InterpolateDefaults(compose_cmd.get<std::string>()), ' ',
                            absl::SkipWhitespace());
    } else {
      argv = Strings(compose_cmd);
    }
    EXPECT_EQ(service.at("secrets"), json::array({"pscluster_token"}));
    EXPECT_EQ(FlagValue(argv, "--auth_token_file"), "/run/secrets/pscluster_token");
    EXPECT_EQ(FlagValue(argv, "--metrics_port"), std::to_string(kMetricsPort));
    EXPECT_THAT(Strings(service.at("volumes")),
                ::testing::Contains("pscluster-data:/var/lib/pscluster"));
    const std::string restart = service.value("restart", "");
    EXPECT_EQ(restart, name == "chief" ? "no" : "on-failure");

    const std::string tf_config = service.at("environment").at("TF_CONFIG");
    json printed = DryRun(argv, {{"TF_CONFIG", tf_config}}, name);
    ASSERT_FALSE(printed.is_null());
    EXPECT_EQ(printed["address"], name + ":2222") << "a service's address is its own name";
    std::string role = name.substr(0, name.find('-'));
    EXPECT_EQ(printed["task_type"], role);
    EXPECT_EQ(printed["task_index"], role == name ? 0 : std::stoi(name.substr(name.find('-') + 1)));
    json cluster = printed["cluster"];
    for (const auto& [type, addresses] : cluster.items()) {
      for (const json& address : addresses) {
        const std::string a = address.get<std::string>();
        EXPECT_TRUE(services.contains(a.substr(0, a.find(':')))) << a << " is no service";
      }
    }
    if (role == "evaluator") cluster.erase("evaluator");
    // Every listener (gRPC, metrics) also on 127.0.0.1, where the
    // healthchecks call.
    EXPECT_EQ(FlagValue(argv, "--bind"), "0.0.0.0");
    if (training_cluster.is_null()) training_cluster = cluster;
    EXPECT_EQ(cluster, training_cluster) << "every service must see the same cluster";
    ++checked;
  }
  EXPECT_EQ(checked, 6);

  // The GPU override only changes existing workers.
  auto gpu = LoadYaml("deploy/docker-compose.gpu.yml");
  ASSERT_EQ(gpu.size(), 1u);
  for (const auto& [name, service] : gpu[0]["services"].items()) {
    EXPECT_TRUE(services.contains(name)) << name;
    EXPECT_THAT(name, ::testing::StartsWith("worker-"));
    const json& devices = service["deploy"]["resources"]["reservations"]["devices"];
    ASSERT_EQ(devices.size(), 1u) << name;
    EXPECT_EQ(devices[0]["driver"], "nvidia");
    EXPECT_EQ(devices[0]["capabilities"], json::array({"gpu"}));
    EXPECT_FALSE(service.contains("healthcheck")) << name << ": the base file's applies";
  }
}

}  // namespace
}  // namespace testing
}  // namespace psc
