// test_train.cpp: the sharded trainer end to end, under mpiexec with 2 ranks.
//
// Every test case is collective (both ranks run it). "One rank" references run on
// MPI_COMM_SELF inside the same job, so a 2-rank run and its 1-rank equivalent are
// compared in one program. Tiny model (L=2, C=64, NH=2, T=32) on synthetic tokens
// written with gpt2::write_shard; OMP_NUM_THREADS=1 (set by ctest) keeps runs
// bit-reproducible.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "args.hpp"
#include "trainer.hpp"
#include "token_shard.hpp"

#include <mpi.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using train::Args;
using train::CompressMode;
using train::Trainer;

namespace {

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

// A per-job scratch directory (rank 0 picks the name, everyone agrees).
const fs::path& scratch() {
  static fs::path dir = [] {
    long id = world_rank() == 0 ? long(getpid()) : 0;
    MPI_Bcast(&id, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    return fs::temp_directory_path() / ("tagc_gpt2_train_test_" + std::to_string(id));
  }();
  return dir;
}

// Learnable synthetic text: repeated "sentences" of a few dozen token ids.
void make_data() {
  if (world_rank() == 0) {
    fs::create_directories(scratch());
    std::vector<uint32_t> tokens;
    uint32_t x = 12345;
    for (int i = 0; i < 40000; ++i) {
      if (i % 16 == 0) x = x * 1103515245u + 12345u;  // a new "sentence" start
      tokens.push_back(100 + ((x >> 8) % 23 + uint32_t(i % 16) * 5) % 200);
    }
    gpt2::write_shard(scratch() / "t_train.bin", tokens);
    gpt2::write_shard(scratch() / "t_val.bin", std::span(tokens).subspan(0, 8000));
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

Args tiny(int B, int steps) {
  static bool made = (make_data(), true);
  (void)made;
  Args a;
  a.command = "train";
  a.model = "d2";
  a.L = 2;
  a.C = 64;
  a.NH = 2;
  a.maxT = 64;
  a.T = 32;
  a.B = B;
  a.steps = steps;
  a.lr = 1e-3f;
  a.schedule = train::Schedule::cosine;
  a.warmup = 1;
  a.compress = CompressMode::none;
  a.train_data = (scratch() / "t_train.bin").string();
  a.val_data = (scratch() / "t_val.bin").string();
  a.val_batches = 1;
  return a;
}

struct Run {
  std::vector<double> loss, norm;
};

// n steps of a fresh trainer on `comm` (MPI_COMM_WORLD or MPI_COMM_SELF).
Run run(const Args& a, MPI_Comm comm, int n, const std::string& save_dir = "", const std::string& resume = "") {
  tagc::mpi_communicator mpi(comm);
  REQUIRE(mpi.init_status().ok());
  Trainer t(a, mpi);
  if (!resume.empty()) t.load_checkpoint(resume);
  else t.init_from_seed();
  Run r;
  for (int i = 0; i < n; ++i) {
    const auto m = t.train_step();
    r.loss.push_back(m.loss);
    r.norm.push_back(m.grad_norm);
  }
  if (!save_dir.empty()) t.save_checkpoint(save_dir);
  return r;
}

void expect_close(const Run& a, const Run& b, double tol) {
  REQUIRE(a.loss.size() == b.loss.size());
  for (size_t i = 0; i < a.loss.size(); ++i) {
    INFO("step " << i + 1 << " rank " << world_rank());
    CHECK(a.loss[i] == doctest::Approx(b.loss[i]).epsilon(tol));
    CHECK(a.norm[i] == doctest::Approx(b.norm[i]).epsilon(tol * 10));
  }
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
  const Run whole = run(a, MPI_COMM_WORLD, 6);
  const Run first = run(a, MPI_COMM_WORLD, 3, dir);
  const Run second = run(a, MPI_COMM_WORLD, 3, "", dir);
  std::vector<double> resumed = first.loss;
  resumed.insert(resumed.end(), second.loss.begin(), second.loss.end());
  for (size_t i = 0; i < 6; ++i) {
    INFO("step " << i + 1);
    CHECK(resumed[i] == whole.loss[i]);  // bit-identical, not approximately equal
  }
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
  CHECK_THROWS_WITH(run(other, MPI_COMM_WORLD, 1, "", dir), doctest::Contains("B 2, this run 4"));
  Args comp = tiny(2, 2);
  comp.compress = CompressMode::all;
  CHECK_THROWS_WITH(run(comp, MPI_COMM_WORLD, 1, "", dir), doctest::Contains("another configuration"));
  CHECK_THROWS_WITH(run(a, MPI_COMM_WORLD, 1, "", (scratch() / "nowhere").string()), doctest::Contains("cannot open"));

  Args nodata = tiny(2, 1);
  nodata.train_data = (scratch() / "missing_train.bin").string();
  CHECK_THROWS(run(nodata, MPI_COMM_WORLD, 1));
}

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  const int rank = world_rank();
  doctest::Context ctx;
  ctx.applyCommandLine(argc, argv);
  if (rank != 0) ctx.setOption("minimal", true);
  const int failed = ctx.run() != 0 ? 1 : 0;
  int any = failed;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) fs::remove_all(scratch());
  MPI_Finalize();
  return any;
}
