// test_train_auto.cpp: "--compress auto" (cost-model layer selection), under mpiexec
// with 2 ranks. Tiny model (L=2, C=64, NH=2, T=32) on synthetic tokens, as
// test_train.cpp. The link is forced (--link-mbps); the codec is measured.
//   slow link (10 Mbit/s): the large segments (wte, the mlp weights) are compressed,
//                          the norm/bias segments are not; the run learns.
//   fast link (100 Gbit/s): nothing is compressed; the run learns.
//   checkpoint: a resumed run takes the decision from the checkpoint and continues
//               bit-identically; a run that measured another decision is refused.
#define DOCTEST_CONFIG_IMPLEMENT
#include "train_test_harness.hpp"

#include "trainer.hpp"

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

using train::Args;
using train::CompressMode;
using Trainer = train::HostTrainer;  // the one trainer on exec::host + MPI
using train_test::scratch;
using train_test::world_rank;

namespace {

Args tiny_auto(double mbps, int steps) {
  Args a = train_test::tiny(2, steps);
  a.lr = 3e-3f;
  a.compress = CompressMode::automatic;
  a.link_mbps = mbps;
  return a;
}

const train::AutoSegment& find(const train::AutoPlan& p, const std::string& name) {
  for (const auto& s : p.segments)
    if (s.name == name) return s;
  FAIL("no segment " << name);
  return p.segments.front();
}

std::vector<double> train_steps(Trainer& t, int n) {
  std::vector<double> loss;
  for (int i = 0; i < n; ++i) loss.push_back(t.train_step().loss);
  return loss;
}

// A trainer on MPI_COMM_WORLD started from the seed, and the plan --compress auto made.
struct Started {
  tagc::mpi_communicator mpi{MPI_COMM_WORLD};
  Trainer t;
  const train::AutoPlan* plan;
  explicit Started(const Args& a) : t(a, mpi) {
    t.init_from_seed();
    plan = t.auto_plan();
    REQUIRE(plan != nullptr);
  }
};

void check_learns(const std::vector<double>& loss) {
  INFO("first " << loss.front() << " last " << loss.back());
  for (double l : loss) CHECK(std::isfinite(l));
  CHECK(loss.back() < loss.front() - 0.5);
}

}  // namespace

TEST_CASE("gpt2_train auto: a slow link compresses the large segments, not the norms and biases") {
  Args a = tiny_auto(10.0, 8);
  a.link_latency_us = 100.0;  // fixed too, so the middle-sized segments do not depend on the machine
  Started run(a);
  Trainer& t = run.t;
  const train::AutoPlan* p = run.plan;
  CHECK(p->source == "measured");
  CHECK(p->bandwidth_from == "--link-mbps");
  CHECK(p->bytes_per_second == doctest::Approx(10e6 / 8));
  // every non-empty segment is a candidate (lnf has no prefix)
  CHECK(p->segments.size() == 2 * 6 - 1);
  for (const char* big : {"embed/prefix", "mlp.0/prefix", "mlp.1/prefix"}) {
    INFO(std::string(big));
    CHECK(find(*p, big).compress);
    CHECK(find(*p, big).bits_per_param < 16.0);
  }
  for (const char* small : {"lnf/suffix", "mlp.0/suffix", "mlp.1/suffix"}) {  // norms and biases
    INFO(std::string(small));
    CHECK_FALSE(find(*p, small).compress);
    CHECK(find(*p, small).compressed_ms > find(*p, small).dense_ms);
  }
  // every rank decided the same (from the same all-gathered figures)
  std::vector<uint8_t> lo(t.segment_paths().size()), hi(lo.size());
  MPI_Allreduce(t.segment_paths().data(), lo.data(), int(lo.size()), MPI_UINT8_T, MPI_MIN, MPI_COMM_WORLD);
  MPI_Allreduce(t.segment_paths().data(), hi.data(), int(hi.size()), MPI_UINT8_T, MPI_MAX, MPI_COMM_WORLD);
  CHECK(lo == hi);
  for (const auto& s : p->segments)
    CHECK(t.segment_paths()[size_t(2 * s.unit + s.seg)] == (s.compress ? train::path_tagc : train::path_plain));
  const auto loss = train_steps(t, a.steps);
  check_learns(loss);
  if (world_rank() == 0) MESSAGE(train::format_table(*p));
}

TEST_CASE("gpt2_train auto: a fast link compresses nothing") {
  Args a = tiny_auto(100000.0, 8);  // latency measured
  Started run(a);
  Trainer& t = run.t;
  const train::AutoPlan* p = run.plan;
  CHECK(p->latency_from == "measured");
  CHECK(p->latency_seconds > 0);
  for (const auto& s : p->segments) {
    INFO(s.name);
    CHECK_FALSE(s.compress);
  }
  std::vector<double> loss;
  for (int i = 0; i < a.steps; ++i) {
    const auto m = t.train_step();
    CHECK(m.compression.empty());
    loss.push_back(m.loss);
  }
  check_learns(loss);
}

TEST_CASE("gpt2_train auto: the checkpoint keeps the decision") {
  const std::string dir = (scratch() / "ckpt").string();
  Args slow = tiny_auto(10.0, 4);
  slow.link_latency_us = 100.0;
  std::vector<double> whole, resumed;
  std::vector<uint8_t> decided;
  {
    tagc::mpi_communicator mpi(MPI_COMM_WORLD);
    Trainer t(slow, mpi);
    t.init_from_seed();
    decided = t.segment_paths();
    resumed = train_steps(t, 2);
    t.save_checkpoint(dir);
    const auto rest = train_steps(t, 2);
    whole = resumed;
    whole.insert(whole.end(), rest.begin(), rest.end());
  }
  {  // --resume: no measurement, the checkpoint's decision (even with another --link-mbps)
    Args r = tiny_auto(100000.0, 4);
    r.resume = dir;
    tagc::mpi_communicator mpi(MPI_COMM_WORLD);
    Trainer t(r, mpi);
    t.load_checkpoint(dir);
    REQUIRE(t.auto_plan() != nullptr);
    CHECK(t.auto_plan()->source == "checkpoint");
    CHECK(t.segment_paths() == decided);
    const auto rest = train_steps(t, 2);
    resumed.insert(resumed.end(), rest.begin(), rest.end());
    for (size_t i = 0; i < whole.size(); ++i) {
      INFO("step " << i + 1);
      CHECK(resumed[i] == whole[i]);
    }
  }
  {  // a run that measured (fast link: nothing compressed) must not load it
    Args fast = tiny_auto(100000.0, 4);
    tagc::mpi_communicator mpi(MPI_COMM_WORLD);
    Trainer t(fast, mpi);
    CHECK_THROWS_WITH(t.load_checkpoint(dir), doctest::Contains("must keep the checkpoint's decision"));
  }
}

int main(int argc, char** argv) { return train_test::mpi_doctest_main(argc, argv); }
