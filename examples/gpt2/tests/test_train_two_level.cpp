// test_train_two_level.cpp: --ranks-per-node (issue 33), under mpiexec with 4 ranks on the
// tiny model: 2 nodes x 2 ranks.
//
// What must hold: a plain run in two levels learns as the flat one does (the same
// gradients up to float summation order); only the cross level's bytes count as
// internode, which for a plain fp32 exchange is a third of what a flat run sends per rank
// (flat: 3/4 of the buffer; 2 nodes: (M-1)/M = 1/2 of a slice of 1/2 the buffer); a compressed run
// sends far fewer internode bytes than its flat twin; the parameters gather in two levels
// (tagc::TwoLevelAllGather) into exactly the flat gather's values (fp32 and bf16), with a
// third of its bytes crossing nodes per rank ((M-1)/(W-1): flat sends W-1 shards, the
// cross level M-1); a checkpoint of a two-level run (bf16 gathers, or the pooled selection
// from a dense start) resumes bit for bit; the routed index learns as the gathered one does
// (fp32 values), flat and in two levels, with fewer internode bytes, and resumes bit for
// bit from a dense start; --grad-all-reduce (DDP flat, HSDP in two levels) learns as the
// reduce-scatter does and, with a union bound, sends fewer internode bytes than without
// and resumes bit for bit; a resume with another --ranks-per-node is refused by name; a count that does not divide
// the world is refused on every rank.
#define DOCTEST_CONFIG_IMPLEMENT
#include "train_test_harness.hpp"
#include "trainer_runs.hpp"

#include "trainer.hpp"

#include <cmath>
#include <string>

using train::Args;
using Trainer = train::HostTrainer;
using namespace train_test;

namespace {

struct Bytes {
  double all = 0, internode = 0;              // gradients
  double param_all = 0, param_internode = 0;  // parameter all-gathers
  std::vector<double> loss;
};

Bytes bytes_of(const Args& a, int steps) {
  tagc::mpi_communicator mpi(MPI_COMM_WORLD);
  Trainer t(a, mpi);
  t.init_from_seed();
  Bytes b;
  for (int i = 0; i < steps; ++i) {
    const auto m = t.train_step();
    b.all += m.grad_bytes;
    b.internode += m.grad_bytes_internode;
    b.param_all += m.param_bytes;
    b.param_internode += m.param_bytes_internode;
    b.loss.push_back(m.loss);
  }
  return b;
}

Args nodes_of(Args a, int k) {
  a.ranks_per_node = k;
  return a;
}

Args g16(Args a) {
  a.gather_dtype = "bf16";
  return a;
}

Args g8(Args a) {
  a.gather_dtype = "int8";
  return a;
}

Args packed(Args a) {
  a.compress = train::CompressMode::non_attention;
  a.values = tagc::values_kind::packed_bf16;
  a.index_bits = tagc::index_auto;
  a.sparsity = 0.95;
  return a;
}

// The routed index from dense to theta 0.9 over 4 steps: the warm-up's first calls exchange
// the buffer, later ones send entries.
Args routed_from_dense() {
  Args a = packed(tiny(2, 6));
  a.index_bits = tagc::index_routed;
  a.sparsity = 0.9;
  a.sparsity_warmup = 4;
  a.sparsity_start = 0.0;
  return a;
}

}  // namespace

TEST_CASE("two levels, plain fp32: the flat run's losses; a third of its bytes cross nodes at 2 x 2") {
  int world = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  REQUIRE(world == 4);
  const Args a = tiny(2, 4);
  const Bytes flat = bytes_of(a, 4), two = bytes_of(nodes_of(a, 2), 4);
  CHECK(flat.internode == flat.all);
  // flat: (N-1)/N = 3/4 of the buffer per rank; two levels: (M-1)/M = 1/2 of a slice of
  // 1/2 the buffer = 1/4, i.e. a third of the flat bytes (plus 16-byte checks and padding)
  CHECK(two.internode == doctest::Approx(flat.all / 3.0).epsilon(0.03));
  for (size_t i = 0; i < flat.loss.size(); ++i) CHECK(two.loss[i] == doctest::Approx(flat.loss[i]).epsilon(1e-5));
  // The parameter gathers (forward and backward, every unit): flat sends W-1 = 3 shards of
  // each segment, all internode; two levels send M-1 = 1 across nodes (plus an 8-byte size
  // check per gather) and K-1 = 1 node-major block of M shards inside the node.
  CHECK(flat.param_all > 0);
  CHECK(flat.param_internode == flat.param_all);
  CHECK(two.param_all == doctest::Approx(flat.param_all).epsilon(1e-3));
  CHECK(two.param_internode == doctest::Approx(flat.param_all / 3.0).epsilon(1e-3));
}

TEST_CASE("two levels: the parameters gathered are the flat gather's, bit for bit, in fp32, bf16 and int8") {
  tagc::mpi_communicator mpi(MPI_COMM_WORLD);
  for (const Args& a : {tiny(2, 2), g16(tiny(2, 2)), g8(tiny(2, 2))}) {
    INFO("--gather-dtype " << a.gather_dtype);
    Trainer flat(a, mpi), two(nodes_of(a, 2), mpi);
    flat.init_from_seed();
    two.init_from_seed();
    CHECK(two.gather_model() == flat.gather_model());  // the fp32 master (--save-model)
    // what the model computes with: the forward's gathers (rounded to bf16 in the second, coded in the third)
    CHECK(two.evaluate_batches(2) == flat.evaluate_batches(2));
  }
}

TEST_CASE("two levels, compressed across nodes: far fewer internode bytes than flat, and it learns") {
  const Args a = packed(tiny(2, 6));
  const Bytes flat = bytes_of(a, 6), two = bytes_of(nodes_of(a, 2), 6);
  CHECK(two.internode < 0.5 * flat.internode);
  CHECK(two.loss.back() < two.loss.front());
}

TEST_CASE("two levels: a checkpoint resumes bit for bit; another --ranks-per-node is refused") {
  const Args a = nodes_of(g16(packed(tiny(2, 6))), 2);
  const std::string dir = (scratch() / "ckpt_two_level").string();
  check_resume_continues(a, MPI_COMM_WORLD, 6, 3, dir);
  CHECK_THROWS_WITH(run(nodes_of(a, 1), MPI_COMM_WORLD, 1, "", dir),
                    doctest::Contains("--ranks-per-node: 2 in the checkpoint, 1 in this run"));
}

TEST_CASE("two levels, the pooled selection across nodes from dense: a checkpoint resumes bit for bit") {
  // The warm-up from theta 0 exchanges its first calls in the buffer and moves the pooled
  // picks' overlap from call to call: the checkpoint must carry it (reducer state version 2).
  Args a = nodes_of(packed(tiny(2, 6)), 2);
  a.index_bits = tagc::index_pooled;
  a.sparsity = 0.9;
  a.sparsity_warmup = 4;
  a.sparsity_start = 0.0;
  const std::string dir = (scratch() / "ckpt_two_level_pooled").string();
  check_resume_continues(a, MPI_COMM_WORLD, 6, 3, dir);
}

TEST_CASE("the routed index, flat and across 2 nodes: the gathered index's losses with fewer internode bytes") {
  // fp32 values: every owner receives what every rank picked, the gathered index's sums bit
  // for bit, so the runs learn alike; only the positions' transport differs: no lists
  // all-gathered, each entry to its owner once.
  Args gathered = packed(tiny(2, 4));
  gathered.values = tagc::values_kind::packed;
  gathered.index_bits = tagc::index_gathered;
  Args routed = gathered;
  routed.index_bits = tagc::index_routed;
  for (const int k : {1, 2}) {
    CAPTURE(k);
    const Bytes g = bytes_of(nodes_of(gathered, k), 4), r = bytes_of(nodes_of(routed, k), 4);
    for (size_t i = 0; i < g.loss.size(); ++i) CHECK(r.loss[i] == g.loss[i]);
    CHECK(r.internode > 0);
    CHECK(r.internode < g.internode);
  }
}

TEST_CASE("the routed index from a dense start, flat and across 2 nodes: a checkpoint resumes bit for bit") {
  const Args a = routed_from_dense();
  check_resume_continues(a, MPI_COMM_WORLD, 6, 3, (scratch() / "ckpt_routed_flat").string());
  check_resume_continues(nodes_of(a, 2), MPI_COMM_WORLD, 6, 3, (scratch() / "ckpt_routed_two_level").string());
}

TEST_CASE("--grad-all-reduce: the routed index all-reduced (DDP flat, HSDP across 2 nodes) learns as reduce-scattered") {
  // fp32 values: the owners' sums are the reduce-scatter's, every rank keeping its shard of
  // them (the plain segments' all-reduce may add in another order: close, not equal); the
  // all-reduce sends more (every owner's sums to every rank), and a union bound of 1 less
  // than unbounded, holding some picks back.
  Args rs = packed(tiny(2, 4));
  rs.values = tagc::values_kind::packed;
  rs.index_bits = tagc::index_routed;
  Args ar = rs;
  ar.grad_all_reduce = true;
  Args bounded = ar;
  bounded.union_bound = 1.0;
  for (const int k : {1, 2}) {
    CAPTURE(k);
    const Bytes s = bytes_of(nodes_of(rs, k), 4), r = bytes_of(nodes_of(ar, k), 4),
                b = bytes_of(nodes_of(bounded, k), 4);
    for (size_t i = 0; i < s.loss.size(); ++i) CHECK(r.loss[i] == doctest::Approx(s.loss[i]).epsilon(1e-5));
    CHECK(r.internode > s.internode);
    CHECK(b.internode < r.internode);
    CHECK(b.loss.back() < b.loss.front());  // and it learns
  }
}

TEST_CASE("--grad-all-reduce with a union bound, flat and across 2 nodes: a checkpoint resumes bit for bit") {
  Args a = routed_from_dense();
  a.grad_all_reduce = true;
  a.union_bound = 1.0;
  check_resume_continues(a, MPI_COMM_WORLD, 6, 3, (scratch() / "ckpt_bounded_flat").string());
  check_resume_continues(nodes_of(a, 2), MPI_COMM_WORLD, 6, 3, (scratch() / "ckpt_bounded_two_level").string());
  // a bound needs the routed index and the all-reduce
  Args rs = a;
  rs.grad_all_reduce = false;
  CHECK_THROWS_WITH(train::validate_args(rs), doctest::Contains("--union-bound 1 bounds what the owners of a routed all-reduce forward"));
}

TEST_CASE("two levels: a count that does not divide the world is refused on every rank") {
  CHECK_THROWS_WITH(run(nodes_of(tiny(2, 2), 3), MPI_COMM_WORLD, 1),
                    doctest::Contains("does not divide the world size 4"));
}

TEST_CASE("a 1-bit index across more than 2 ranks is refused unless insisted on; across 2 nodes it runs") {
  Args a = tiny(2, 2);
  a.compress = train::CompressMode::non_attention;
  a.index_bits = 1;
  CHECK_THROWS_WITH(run(a, MPI_COMM_WORLD, 1), doctest::Contains("--index-bits 1 across 4 ranks"));
  Args insist = a;
  insist.allow_index_carries = true;
  CHECK(run(insist, MPI_COMM_WORLD, 2).loss.size() == 2);
  CHECK(run(nodes_of(a, 2), MPI_COMM_WORLD, 2).loss.size() == 2);  // 2 nodes: the pair repair is exact
}

int main(int argc, char** argv) { return train_test::mpi_doctest_main(argc, argv); }
