// test_train.cpp: the sharded trainer end to end, under mpiexec with 2 ranks.
//
// Every test case is collective (both ranks run it). "One rank" references run on
// MPI_COMM_SELF inside the same job, so a 2-rank run and its 1-rank equivalent are
// compared in one program. The tiny model on synthetic tokens (train_test_harness.hpp).
#define DOCTEST_CONFIG_IMPLEMENT
#include "train_test_harness.hpp"
#include "trainer_runs.hpp"

#include "metrics.hpp"
#include "trainer.hpp"

#include <array>
#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using train::Args;
using train::CompressMode;
using Trainer = train::HostTrainer;  // the one trainer on exec::host + MPI
// Run, run, check_resume_continues (trainer_runs.hpp); scratch, tiny, world_rank (train_test_harness.hpp)
using namespace train_test;

namespace {

void expect_close(const Run& a, const Run& b, double tol) {
  REQUIRE(a.loss.size() == b.loss.size());
  for (size_t i = 0; i < a.loss.size(); ++i) {
    INFO("step " << i + 1 << " rank " << world_rank());
    CHECK(a.loss[i] == doctest::Approx(b.loss[i]).epsilon(tol));
    CHECK(a.norm[i] == doctest::Approx(b.norm[i]).epsilon(tol * 10));
  }
}

// TAGC with packed bf16 values over the exact index, theta ramped from dense over `warmup` steps.
Args packed_dense_start(int steps, int warmup) {
  Args a = tiny(2, steps);
  a.compress = CompressMode::non_attention;
  a.values = tagc::values_kind::packed_bf16;
  a.index_bits = tagc::index_auto;
  a.sparsity_warmup = warmup;
  a.sparsity_start = 0.0;
  return a;
}

}  // namespace

TEST_CASE("gpt2_train: 2 ranks x B=2 match 1 rank x B=4, accumulation and zero2 (fp32 baseline)") {
  const int steps = 4;
  const Run sharded = run(tiny(2, steps), MPI_COMM_WORLD, steps);
  const Run single = run(tiny(4, steps), MPI_COMM_SELF, steps);
  expect_close(sharded, single, 1e-5);
  Args acc = tiny(2, steps);
  acc.accum = 2;
  expect_close(run(acc, MPI_COMM_SELF, steps), single, 1e-5);
  Args z2 = tiny(2, steps);
  z2.zero2 = true;
  expect_close(run(z2, MPI_COMM_WORLD, steps), sharded, 1e-6);
  // llm.c's bf16 reduce-scatter: close to fp32, not equal (8 mantissa bits per hop)
  Args bf = tiny(2, steps);
  bf.baseline_dtype = "bf16";
  const Run bf16 = run(bf, MPI_COMM_WORLD, steps);
  for (size_t i = 0; i < bf16.loss.size(); ++i) CHECK(bf16.loss[i] == doctest::Approx(sharded.loss[i]).epsilon(2e-3));
}

TEST_CASE("gpt2_train: 1 rank runs no collective on the gradient path; lossy formats keep their reducer") {
  // Each rank alone (MPI_COMM_SELF): the owned shard is the whole model, so parameters are
  // not gathered and the fp32 plain segments are not reduced. The losses equal the 2-rank
  // run's (first test case); here: the collectives a step issues.
  tagc::mpi_communicator self(MPI_COMM_SELF);
  REQUIRE(self.init_status().ok());
  using tagc::collective;
  Args none = tiny(4, 2);
  Trainer t(none, self);
  t.init_from_seed();
  for (int i = 0; i < 2; ++i) {
    const train::StepMetrics m = t.train_step();
    CHECK(m.traffic[collective::all_gather].calls == 0);
    CHECK(m.traffic[collective::reduce_scatter].calls == 0);
    CHECK(m.traffic[collective::all_reduce].calls == 1);  // the step's norm / loss / finiteness sums
    CHECK(m.compression.empty());
  }
  CHECK(std::isfinite(t.evaluate(1)));  // evaluation reads the parameters in place too
  // the bf16 baseline rounds what it reduces: still reduced on 1 rank (the flags' numerics)
  Args bf = tiny(4, 1);
  bf.baseline_dtype = "bf16";
  Trainer tb(bf, self);
  tb.init_from_seed();
  const train::StepMetrics mb = tb.train_step();
  CHECK(mb.traffic[collective::all_gather].calls == 0);
  CHECK(mb.traffic[collective::reduce_scatter].calls + mb.traffic[collective::all_reduce].calls > 1);
  // compressed segments keep their reducer (error feedback and all): the compression
  // still shapes a 1-rank run; checkpoints hold the same reducer states as before
  Args comp = tiny(4, 6);
  comp.compress = CompressMode::non_attention;
  comp.index_bits = 1;
  const std::string dir = (scratch() / ("ckpt_self_" + std::to_string(world_rank()))).string();
  check_resume_continues(comp, MPI_COMM_SELF, 6, 3, dir);  // mixed local/reduced units
  Trainer tc(comp, self);
  tc.init_from_seed();
  const train::StepMetrics mc = tc.train_step();
  CHECK_FALSE(mc.compression.empty());  // (its own collectives, all-gathers included, still run)
}

TEST_CASE("gpt2_train: a short 2-rank TAGC run (non-attention, 10x, 4-bit) learns") {
  Args a = tiny(2, 12);
  a.compress = CompressMode::non_attention;
  a.lr = 3e-3f;
  tagc::mpi_communicator mpi(MPI_COMM_WORLD);
  Trainer t(a, mpi);
  t.init_from_seed();
  std::vector<double> loss;
  train::StepMetrics last;
  for (int i = 0; i < a.steps; ++i) {
    last = t.train_step();
    loss.push_back(last.loss);
  }
  INFO("first " << loss.front() << " last " << loss.back());
  CHECK(loss.back() < loss.front() - 1.0);
  REQUIRE(!last.compression.empty());
  // the embedding's compressed prefix is large enough to be sketched, at the paper's theta
  const auto& emb = last.compression.front();
  CHECK(emb.unit == "embed");
  CHECK_FALSE(emb.stats.dense);
  CHECK(emb.stats.sparsity >= 0.98);
  CHECK(last.grad_bytes > 0);
  const double val = t.evaluate(1);
  CHECK(std::isfinite(val));
}

TEST_CASE("gpt2_train: checkpoint round trip resumes bit-identically (TAGC state included)") {
  Args a = tiny(2, 6);
  a.compress = CompressMode::non_attention;
  a.index_bits = 1;
  const std::string dir = (scratch() / "ckpt").string();
  check_resume_continues(a, MPI_COMM_WORLD, 6, 3, dir);  // bit-identical, not approximately equal
}

TEST_CASE("gpt2_train: a sparsity warm-up ramps theta to the target, resumes bit-identically, is checked on resume") {
  Args a = packed_dense_start(6, 3);
  {
    tagc::mpi_communicator mpi(MPI_COMM_WORLD);
    Trainer t(a, mpi);
    t.init_from_seed();
    std::vector<double> theta;
    for (int i = 0; i < 4; ++i) {
      const auto m = t.train_step();
      REQUIRE(!m.compression.empty());
      theta.push_back(m.compression.front().stats.theta);
    }
    CHECK(theta[0] == 0.0);  // dense first step
    CHECK(theta[1] > theta[0]);
    CHECK(theta[2] > theta[1]);
    CHECK(theta[2] < 0.9875);
    CHECK(theta[3] == 0.9875);  // the target from step W + 1 on
  }
  const std::string dir = (scratch() / "ckpt_schedule").string();
  check_resume_continues(a, MPI_COMM_WORLD, 6, 2, dir);  // saved inside the warm-up
  Args other = a;
  other.sparsity_warmup = 5;
  CHECK_THROWS_WITH(run(other, MPI_COMM_WORLD, 1, "", dir), doctest::Contains("--sparsity-warmup: 3 in the checkpoint, 5 in this run"));
  CHECK_THROWS_AS(train::parse_args(4, std::array<const char*, 4>{"x", "train", "--sparsity-start", "1"}.data()),
                  train::ArgsError);
  CHECK_THROWS_AS(train::parse_args(4, std::array<const char*, 4>{"x", "train", "--sparsity-schedule", "cubic"}.data()),
                  train::ArgsError);
}

TEST_CASE("gpt2_train: --unit-sparsity sets theta per unit and kind, under the warm-up too; checked on resume") {
  Args a = packed_dense_start(4, 2);
  a.unit_sparsity = {{"mlp", 0.5}, {"mlp.1", 0.75}, {"embed", 0.95}};  // the last entry naming a unit wins
  const auto theta_of = [](const train::StepMetrics& m) {
    std::map<std::string, double> t;
    for (const auto& s : m.compression) t[s.unit] = s.stats.theta;
    return t;
  };
  {
    tagc::mpi_communicator mpi(MPI_COMM_WORLD);
    Trainer t(a, mpi);
    t.init_from_seed();
    std::vector<std::map<std::string, double>> theta;
    for (int i = 0; i < 3; ++i) theta.push_back(theta_of(t.train_step()));
    CHECK(theta[0].at("embed") == 0.0);  // the warm-up's dense start, on every unit
    CHECK(theta[0].at("mlp.0") == 0.0);
    CHECK(theta[1].at("mlp.0") > 0.0);   // ramping towards its own target, below it
    CHECK(theta[1].at("mlp.0") < 0.5);
    CHECK(theta[2].at("embed") == 0.95);  // each unit's target from step W + 1 on
    CHECK(theta[2].at("mlp.0") == 0.5);
    CHECK(theta[2].at("mlp.1") == 0.75);
    for (const auto& [unit, th] : theta[2])
      if (unit.rfind("attn", 0) == 0) CHECK(th == 0.9875);  // not named: --sparsity's (the paper's)
  }
  const std::string dir = (scratch() / "ckpt_unit_sparsity").string();
  check_resume_continues(a, MPI_COMM_WORLD, 4, 2, dir);
  Args other = a;
  other.unit_sparsity = {{"mlp", 0.5}, {"embed", 0.95}};
  CHECK_THROWS_WITH(run(other, MPI_COMM_WORLD, 1, "", dir), doctest::Contains("unit-sparsity"));
  // a name no unit has is refused on every rank, before the first step
  Args typo = a;
  typo.unit_sparsity = {{"mpl", 0.5}};
  CHECK_THROWS_WITH(run(typo, MPI_COMM_WORLD, 1), doctest::Contains("--unit-sparsity mpl: no unit"));
  Args plain = a;  // attention units are sent uncompressed under --compress none
  plain.compress = CompressMode::none;
  plain.unit_sparsity = {{"attn", 0.5}};
  CHECK_THROWS_WITH(run(plain, MPI_COMM_WORLD, 1), doctest::Contains("uncompressed"));
  const auto parse = [](const char* v) {
    return train::parse_args(4, std::array<const char*, 4>{"x", "train", "--unit-sparsity", v}.data());
  };
  CHECK(parse("embed=0.99,mlp.1=0").unit_sparsity == std::vector<train::UnitSparsity>{{"embed", 0.99}, {"mlp.1", 0.0}});
  for (const char* bad : {"mlp", "=0.9", "mlp=1.5", "mlp=x", "mlp=0.9,", "ml p=0.9"}) {
    INFO(bad);
    CHECK_THROWS_AS(parse(bad), train::ArgsError);
  }
}

TEST_CASE("gpt2_train: --shuffle trains on another order, resumes bit-identically, is checked on resume") {
  Args a = tiny(2, 6);
  a.compress = CompressMode::non_attention;
  a.shuffle = true;
  a.shuffle_seed = 5;
  Args in_order = a;
  in_order.shuffle = false;
  const Run shuffled = run(a, MPI_COMM_WORLD, 2);
  const Run sequential = run(in_order, MPI_COMM_WORLD, 2);
  CHECK(shuffled.loss[0] != sequential.loss[0]);  // another first batch
  const std::string dir = (scratch() / "ckpt_shuffle").string();
  check_resume_continues(a, MPI_COMM_WORLD, 6, 3, dir);
  Args other_seed = a;
  other_seed.shuffle_seed = 6;
  CHECK_THROWS_WITH(run(other_seed, MPI_COMM_WORLD, 1, "", dir), doctest::Contains("--shuffle-seed: 5 in the checkpoint, 6 in this run"));
  CHECK_THROWS_WITH(run(in_order, MPI_COMM_WORLD, 1, "", dir), doctest::Contains("--shuffle: on in the checkpoint, off in this run"));
  const Args parsed = train::parse_args(4, std::array<const char*, 4>{"x", "train", "--shuffle-seed", "9"}.data());
  CHECK(parsed.shuffle);
  CHECK(parsed.shuffle_seed == 9);
}

TEST_CASE("gpt2_train: errors — bad config, mismatched checkpoint, missing data") {
  Args bad = tiny(2, 1);
  bad.C = 100;
  bad.NH = 3;
  CHECK_THROWS_WITH_AS(train::model_config(bad), doctest::Contains("divisible"), std::invalid_argument);
  CHECK_THROWS_AS(train::parse_args(3, std::array<const char*, 3>{"x", "train", "--bogus"}.data()), train::ArgsError);
  CHECK_THROWS_AS(train::parse_args(4, std::array<const char*, 4>{"x", "train", "--ratio", "3"}.data()),
                  train::ArgsError);

  Args a = tiny(2, 2);
  const std::string dir = (scratch() / "ckpt_errors").string();
  run(a, MPI_COMM_WORLD, 1, dir);
  // another world size: each rank alone reads its rank0 file written by a 2-rank job
  CHECK_THROWS_WITH(run(tiny(2, 2), MPI_COMM_SELF, 1, "", dir), doctest::Contains("world size 2, this run 1"));
  // another config on the same world size
  Args other = tiny(4, 2);
  CHECK_THROWS_WITH(run(other, MPI_COMM_WORLD, 1, "", dir), doctest::Contains("--B: 2 in the checkpoint, 4 in this run"));
  Args comp = tiny(2, 2);
  comp.compress = CompressMode::all;
  CHECK_THROWS_WITH(run(comp, MPI_COMM_WORLD, 1, "", dir), doctest::Contains("another configuration"));
  CHECK_THROWS_WITH(run(a, MPI_COMM_WORLD, 1, "", (scratch() / "nowhere").string()), doctest::Contains("cannot open"));

  Args nodata = tiny(2, 1);
  nodata.train_data = (scratch() / "missing_train.bin").string();
  CHECK_THROWS(run(nodata, MPI_COMM_WORLD, 1));
}

TEST_CASE("gpt2_train: the run line records only the compression flags that apply") {
  Args none = tiny(2, 1);
  none.compress = CompressMode::none;
  none.baseline_dtype = "bf16";
  const nlohmann::json n = train::compression_info(none);
  CHECK(n.at("compress") == "none");
  CHECK(n.at("baseline_dtype") == "bf16");
  for (const char* k : {"values", "ratio", "index_bits", "index_exchange", "decoder", "sparsity", "adaptive"})
    CHECK_MESSAGE(!n.contains(k), k);
  CHECK(train::compression_summary(none) == "compress=none baseline-dtype=bf16");

  Args packed = tiny(2, 1);
  packed.compress = CompressMode::all;
  packed.values = tagc::values_kind::packed;
  packed.index_bits = tagc::index_auto;
  const nlohmann::json p = train::compression_info(packed);
  CHECK(p.at("values") == "packed");
  CHECK(p.at("index_bits") == "exact");
  CHECK_FALSE(p.contains("ratio"));           // no sketch
  CHECK_FALSE(p.contains("decoder"));
  CHECK_FALSE(p.contains("baseline_dtype"));  // --compress all: no segment is plain

  Args sketch = tiny(2, 1);
  sketch.compress = CompressMode::non_attention;
  const nlohmann::json k = train::compression_info(sketch);
  CHECK(k.at("ratio") == sketch.ratio);
  CHECK(k.at("decoder") == "peel-estimate");
  CHECK(k.at("baseline_dtype") == "fp32");
  CHECK_FALSE(k.contains("sparsity_warmup"));  // the schedule is off: not recorded

  // theta's warm-up: recorded (it must match on resume), in the log line and the summary
  sketch.sparsity_warmup = 200;
  sketch.sparsity_shape = tagc::schedule_shape::linear;
  sketch.sparsity_start = 0.5;
  const nlohmann::json w = train::compression_info(sketch);
  CHECK(w.at("sparsity_warmup") == 200);
  CHECK(w.at("sparsity_schedule") == "linear");
  CHECK(w.at("sparsity_start") == 0.5);
  CHECK(train::compression_summary(sketch).find("sparsity-warmup=200 sparsity-schedule=linear sparsity-start=0.5") !=
        std::string::npos);
}

int main(int argc, char** argv) { return train_test::mpi_doctest_main(argc, argv); }
