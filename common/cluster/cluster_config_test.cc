#include "common/cluster/cluster_config.h"

#include <cstdio>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace psc {
namespace cluster {
namespace {

using ::testing::HasSubstr;

constexpr char kGood[] = R"({
  "cluster": {"chief": ["c:2222"], "worker": ["w0:2222", "w1:2222"], "ps": ["p0:2222"]},
  "task": {"type": "worker", "index": 1}})";

TEST(ClusterConfigTest, ParsesAGoodConfig) {
  auto c = ClusterConfig::Parse(kGood);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->task_type(), TaskType::kWorker);
  EXPECT_EQ(c->task_index(), 1);
  EXPECT_EQ(c->self().address.ToString(), "w1:2222");
  EXPECT_EQ(c->num_tasks(TaskType::kWorker), 2);
  EXPECT_EQ(c->num_tasks(TaskType::kPs), 1);
  EXPECT_EQ(c->num_tasks(TaskType::kEvaluator), 0);
  EXPECT_EQ(c->tasks(TaskType::kPs)[0].Name(), "ps:0");
  EXPECT_TRUE(c->ValidateForTraining().ok());
}

TEST(ClusterConfigTest, AcceptsKubeflowExtrasAndIpv6) {
  auto c = ClusterConfig::Parse(R"({
    "cluster": {"chief": ["[::1]:2222"], "worker": ["job-worker-0.ns.svc:2222"],
                "ps": ["10.0.0.3:2222"], "evaluator": ["job-evaluator-0.ns.svc:2222"]},
    "task": {"type": "chief", "index": 0},
    "environment": "cloud", "rpc_layer": "grpc"})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->task_type(), TaskType::kChief);
  EXPECT_EQ(c->self().address.host, "::1");
  EXPECT_EQ(c->self().address.port, 2222);
  EXPECT_EQ(c->self().address.ToString(), "[::1]:2222");
}

TEST(ClusterConfigTest, MissingIndexMeansZeroAsInTensorFlow) {
  auto c = ClusterConfig::Parse(R"({"cluster": {"ps": ["a:1"], "worker": ["b:1"]},
                                    "task": {"type": "ps"}})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->task_index(), 0);
}

// TensorFlow (and tf-operator before v1.2) leaves the evaluator out of the
// cluster it gives the evaluator replica; today's operator lists it.
TEST(ClusterConfigTest, AnEvaluatorMayBeOutsideTheCluster) {
  auto c = ClusterConfig::Parse(R"({
    "cluster": {"chief": ["j-chief-0.ns.svc:2222"], "ps": ["j-ps-0.ns.svc:2222"],
                "worker": ["j-worker-0.ns.svc:2222"]},
    "task": {"type": "evaluator", "index": 0}, "environment": "cloud"})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->task_type(), TaskType::kEvaluator);
  EXPECT_FALSE(c->self_listed());
  EXPECT_EQ(c->self().Name(), "evaluator:0");
  auto j = nlohmann::json::parse(c->DryRunJson());
  EXPECT_EQ(j["task_type"], "evaluator");
  EXPECT_TRUE(j["address"].is_null());
  // Index 1 is still out of range, and other roles must be listed.
  EXPECT_EQ(ClusterConfig::Parse(R"({"cluster": {"ps": ["a:1"]},
                                     "task": {"type": "evaluator", "index": 1}})")
                .status()
                .message(),
            "TF_CONFIG: task.type \"evaluator\" is not in the cluster");
  auto listed = ClusterConfig::Parse(R"({"cluster": {"ps": ["a:1"], "evaluator": ["e:1"]},
                                         "task": {"type": "evaluator"}})");
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE(listed->self_listed());
  EXPECT_EQ(listed->self().address.ToString(), "e:1");
}

TEST(ClusterConfigTest, DryRunJsonHasTheContractKeys) {
  auto c = ClusterConfig::Parse(kGood);
  ASSERT_TRUE(c.ok());
  auto j = nlohmann::json::parse(c->DryRunJson());
  EXPECT_EQ(j["task_type"], "worker");
  EXPECT_EQ(j["task_index"], 1);
  EXPECT_EQ(j["address"], "w1:2222");
  EXPECT_EQ(j["cluster"]["worker"][1], "w1:2222");
  EXPECT_EQ(j["cluster"]["ps"][0], "p0:2222");
  EXPECT_EQ(j["cluster"]["chief"][0], "c:2222");
}

TEST(ClusterConfigTest, TrainingNeedsPsAndWorker) {
  auto no_ps = ClusterConfig::Parse(R"({"cluster": {"worker": ["a:1"]},
                                        "task": {"type": "worker", "index": 0}})");
  ASSERT_TRUE(no_ps.ok());
  EXPECT_THAT(no_ps->ValidateForTraining().message(),
              HasSubstr("TF_CONFIG: cluster has no \"ps\" task"));
  auto no_worker = ClusterConfig::Parse(R"({"cluster": {"ps": ["a:1"]},
                                            "task": {"type": "ps", "index": 0}})");
  ASSERT_TRUE(no_worker.ok());
  EXPECT_THAT(no_worker->ValidateForTraining().message(),
              HasSubstr("TF_CONFIG: cluster has no \"worker\" task"));
}

TEST(ClusterConfigTest, ACollectiveClusterHasNoPs) {
  using Layout = ClusterConfig::Layout;
  auto workers = ClusterConfig::Parse(R"({"cluster": {"worker": ["a:1", "b:1"]},
                                          "task": {"type": "worker", "index": 1}})");
  ASSERT_TRUE(workers.ok());
  EXPECT_TRUE(workers->ValidateForTraining(Layout::kCollective).ok());
  EXPECT_TRUE(workers->ValidateForTraining(Layout::kAny).ok());
  EXPECT_THAT(workers->ValidateForTraining(Layout::kParameterServer).message(),
              HasSubstr("--strategy=multi_worker_mirrored, which trains without"));
  auto with_ps = ClusterConfig::Parse(R"({"cluster": {"worker": ["a:1"], "ps": ["p:1"]},
                                          "task": {"type": "worker", "index": 0}})");
  ASSERT_TRUE(with_ps.ok());
  EXPECT_THAT(with_ps->ValidateForTraining(Layout::kCollective).message(),
              HasSubstr("cluster has 1 \"ps\" task(s); --strategy=multi_worker_mirrored takes "
                        "none"));
  EXPECT_TRUE(with_ps->ValidateForTraining(Layout::kAny).ok());
}

struct BadConfig {
  const char* name;
  const char* json;
  const char* message;  // expected substring of the one-line error
};

// Every rejection: INVALID_ARGUMENT, one line, starts with "TF_CONFIG: ",
// and says which field and why.
const BadConfig kBadConfigs[] = {
    {"empty", "", "TF_CONFIG: empty"},
    {"not_json", "{cluster: ", "TF_CONFIG: not valid JSON: parse error at line 1, column 2"},
    {"trailing_garbage", R"({"cluster": {}} x)", "TF_CONFIG: not valid JSON"},
    {"not_an_object", R"(["ps"])", "TF_CONFIG: must be a JSON object, not array"},
    {"missing_cluster", R"({"task": {"type": "ps", "index": 0}})",
     "TF_CONFIG: missing \"cluster\""},
    // Kubeflow's TFJob with enableDynamicWorker: true, as its operator writes it.
    {"sparse_cluster",
     R"({"sparseCluster": {"chief": ["j-chief-0.ns.svc:2222"], "ps": ["j-ps-0.ns.svc:2222"],
         "worker": {"3": "j-worker-3.ns.svc:2222"}},
         "task": {"type": "worker", "index": 3}, "environment": "cloud"})",
     "TF_CONFIG: \"sparseCluster\" (Kubeflow's enableDynamicWorker: true) is not supported"},
    {"cluster_not_object", R"({"cluster": ["a:1"], "task": {"type": "ps"}})",
     "TF_CONFIG: cluster must be an object, not array"},
    {"empty_cluster", R"({"cluster": {}, "task": {"type": "ps", "index": 0}})",
     "TF_CONFIG: cluster is empty"},
    {"unknown_type_in_cluster", R"({"cluster": {"trainer": ["a:1"]}, "task": {"type": "ps"}})",
     "TF_CONFIG: cluster.\"trainer\": unknown task type \"trainer\""},
    {"tf1_master", R"({"cluster": {"master": ["a:1"]}, "task": {"type": "master"}})",
     "(TF1's \"master\" is \"chief\" here)"},
    {"task_list_not_array", R"({"cluster": {"ps": "a:1"}, "task": {"type": "ps"}})",
     "TF_CONFIG: cluster.\"ps\" must be a list of \"host:port\", not string"},
    {"empty_task_list", R"({"cluster": {"ps": ["a:1"], "worker": []}, "task": {"type": "ps"}})",
     "TF_CONFIG: cluster.\"worker\" is empty"},
    {"address_not_string", R"({"cluster": {"ps": [2222]}, "task": {"type": "ps"}})",
     "TF_CONFIG: cluster.\"ps\"[0] must be a \"host:port\" string, not number"},
    {"missing_port", R"({"cluster": {"ps": ["host"]}, "task": {"type": "ps"}})",
     "TF_CONFIG: cluster.\"ps\"[0] \"host\": missing port"},
    {"empty_port", R"({"cluster": {"ps": ["host:"]}, "task": {"type": "ps"}})",
     "TF_CONFIG: cluster.\"ps\"[0] \"host:\": missing port"},
    {"port_not_number", R"({"cluster": {"ps": ["host:http"]}, "task": {"type": "ps"}})",
     "TF_CONFIG: cluster.\"ps\"[0] \"host:http\": port \"http\" is not a number"},
    {"port_out_of_range", R"({"cluster": {"ps": ["a:1", "b:70000"]}, "task": {"type": "ps"}})",
     "TF_CONFIG: cluster.\"ps\"[1] \"b:70000\": port 70000 out of range 1-65535"},
    {"port_zero", R"({"cluster": {"ps": ["a:0"]}, "task": {"type": "ps"}})",
     "port 0 out of range 1-65535"},
    {"negative_port", R"({"cluster": {"ps": ["a:-5"]}, "task": {"type": "ps"}})",
     "port \"-5\" is not a number"},
    {"missing_host", R"({"cluster": {"ps": [":2222"]}, "task": {"type": "ps"}})",
     "TF_CONFIG: cluster.\"ps\"[0] \":2222\": missing host"},
    {"bad_host_chars", R"({"cluster": {"ps": ["my host:2222"]}, "task": {"type": "ps"}})",
     "\"my host\" is not a valid host name"},
    {"url_not_address", R"({"cluster": {"ps": ["grpc://a:2222"]}, "task": {"type": "ps"}})",
     "TF_CONFIG: cluster.\"ps\"[0] \"grpc://a:2222\""},
    {"ipv6_without_brackets", R"({"cluster": {"ps": ["::1:2222"]}, "task": {"type": "ps"}})",
     "an IPv6 address needs brackets"},
    {"ipv6_unclosed", R"({"cluster": {"ps": ["[::1:2222"]}, "task": {"type": "ps"}})",
     "unclosed '[' in IPv6 address"},
    {"ipv6_bad_literal", R"({"cluster": {"ps": ["[zz::1]:2222"]}, "task": {"type": "ps"}})",
     "\"zz::1\" is not an IPv6 address"},
    {"two_chiefs",
     R"({"cluster": {"chief": ["a:1", "b:1"], "ps": ["c:1"]}, "task": {"type": "ps"}})",
     "TF_CONFIG: cluster.\"chief\" has 2 tasks; at most one is allowed"},
    {"two_evaluators",
     R"({"cluster": {"evaluator": ["a:1", "b:1"], "ps": ["c:1"]}, "task": {"type": "ps"}})",
     "TF_CONFIG: cluster.\"evaluator\" has 2 tasks; at most one is allowed"},
    {"duplicate_address",
     R"({"cluster": {"ps": ["a:1"], "worker": ["b:1", "a:1"]}, "task": {"type": "ps"}})",
     "TF_CONFIG: cluster.\"worker\"[1] \"a:1\" is also the address of ps:0"},
    {"duplicate_address_case",
     R"({"cluster": {"ps": ["Host:1", "host:1"]}, "task": {"type": "ps"}})",
     "is also the address of ps:0"},
    {"missing_task", R"({"cluster": {"ps": ["a:1"]}})", "TF_CONFIG: missing \"task\""},
    {"task_not_object", R"({"cluster": {"ps": ["a:1"]}, "task": "ps"})",
     "TF_CONFIG: task must be an object, not string"},
    {"missing_task_type", R"({"cluster": {"ps": ["a:1"]}, "task": {"index": 0}})",
     "TF_CONFIG: missing task.type"},
    {"task_type_not_string", R"({"cluster": {"ps": ["a:1"]}, "task": {"type": 1}})",
     "TF_CONFIG: task.type must be a string, not number"},
    {"unknown_task_type", R"({"cluster": {"ps": ["a:1"]}, "task": {"type": "driver", "index": 0}})",
     "TF_CONFIG: task.type: unknown task type \"driver\""},
    {"task_not_in_cluster",
     R"({"cluster": {"ps": ["a:1"]}, "task": {"type": "worker", "index": 0}})",
     "TF_CONFIG: task.type \"worker\" is not in the cluster"},
    {"index_out_of_range",
     R"({"cluster": {"ps": ["p:1"], "worker": ["a:1", "b:1"]}, "task": {"type": "worker", "index": 3}})",
     "TF_CONFIG: task.index 3 out of range: cluster has 2 \"worker\" tasks"},
    {"index_out_of_range_singular",
     R"({"cluster": {"ps": ["p:1"]}, "task": {"type": "ps", "index": 1}})",
     "TF_CONFIG: task.index 1 out of range: cluster has 1 \"ps\" task"},
    {"negative_index", R"({"cluster": {"ps": ["a:1"]}, "task": {"type": "ps", "index": -1}})",
     "TF_CONFIG: task.index -1 is negative"},
    {"index_as_string", R"({"cluster": {"ps": ["a:1"]}, "task": {"type": "ps", "index": "0"}})",
     "TF_CONFIG: task.index must be an integer, not string"},
    {"index_fraction", R"({"cluster": {"ps": ["a:1"]}, "task": {"type": "ps", "index": 0.5}})",
     "TF_CONFIG: task.index must be an integer, not 0.5"},
};

class BadConfigTest : public ::testing::TestWithParam<BadConfig> {};

TEST_P(BadConfigTest, IsRejectedWithAOneLineMessageNamingTheField) {
  const BadConfig& bad = GetParam();
  auto c = ClusterConfig::Parse(bad.json);
  ASSERT_FALSE(c.ok()) << bad.name << " was accepted";
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string message(c.status().message());
  EXPECT_THAT(message, HasSubstr(bad.message));
  EXPECT_EQ(message.rfind("TF_CONFIG: ", 0), 0u) << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

INSTANTIATE_TEST_SUITE_P(Table, BadConfigTest, ::testing::ValuesIn(kBadConfigs),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(ReadTfConfigTextTest, FlagWinsOverEnvironment) {
  auto t = ReadTfConfigText("{\"a\":1}", "{\"b\":2}");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, "{\"a\":1}");
  t = ReadTfConfigText("", "{\"b\":2}");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, "{\"b\":2}");
}

TEST(ReadTfConfigTextTest, ReadsAFileAfterAt) {
  std::string path = ::testing::TempDir() + "/tf_config.json";
  {
    std::ofstream out(path);
    out << kGood;
  }
  auto t = ReadTfConfigText("@" + path, nullptr);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(*t, kGood);
  std::remove(path.c_str());
}

TEST(ReadTfConfigTextTest, ErrorsNameTheSource) {
  auto missing = ReadTfConfigText("@/nonexistent/tf.json", nullptr);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(missing.status().message(),
              HasSubstr("--tf_config=@/nonexistent/tf.json: cannot read file"));
  auto unset = ReadTfConfigText("", nullptr);
  EXPECT_THAT(unset.status().message(), HasSubstr("TF_CONFIG is not set"));
  auto empty = ReadTfConfigText("", "");
  EXPECT_THAT(empty.status().message(), HasSubstr("TF_CONFIG is not set"));
}

TEST(HostPortTest, ParsesAndFormats) {
  auto hp = ParseHostPort("[::1]:8080");
  ASSERT_TRUE(hp.ok());
  EXPECT_EQ(hp->host, "::1");
  EXPECT_EQ(hp->ToString(), "[::1]:8080");
  hp = ParseHostPort("127.0.0.1:1");
  ASSERT_TRUE(hp.ok());
  EXPECT_EQ(hp->port, 1);
  EXPECT_FALSE(ParseHostPort("a:65536").ok());
  EXPECT_FALSE(ParseHostPort("a:0000002").ok());
}

TEST(HostPortTest, LoopbackDetection) {
  EXPECT_TRUE(IsLoopbackHost("127.0.0.1"));
  EXPECT_TRUE(IsLoopbackHost("127.1.2.3"));
  EXPECT_TRUE(IsLoopbackHost("::1"));
  EXPECT_TRUE(IsLoopbackHost("localhost"));
  EXPECT_FALSE(IsLoopbackHost("0.0.0.0"));
  EXPECT_FALSE(IsLoopbackHost("::"));
  EXPECT_FALSE(IsLoopbackHost("10.1.2.3"));
  EXPECT_FALSE(IsLoopbackHost("no-such-host.invalid"));
}

}  // namespace
}  // namespace cluster
}  // namespace psc
