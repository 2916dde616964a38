// defines: the tagc._C Python extension — a reducer built from the catalogue
//          (catalogue.hpp, the library's builder) bound to a torch.distributed
//          ProcessGroup, driven from Python (tagc/torch.py).
//
// The heavy calls (all_reduce, reduce_scatter) release the GIL: the Python
// comm hook runs them on a worker thread while autograd keeps computing.
// Errors are raised as RuntimeError("tagc: <message>"); because the Reducer
// gives every rank the same verdict, every rank raises the same error.

#include <cstring>
#include <string>

#include <torch/extension.h>

#include "catalogue.hpp"
#include "process_group_transport.hpp"

namespace py = pybind11;

namespace tagc_torch {
namespace {

[[noreturn]] void raise(const tagc::status& s) { throw std::runtime_error("tagc: " + s.message()); }
void check(const tagc::status& s) {
  if (!s.ok()) raise(s);
}

tagc::topology parse_topology(const std::string& t) {
  if (t == "replicated") return tagc::topology::replicated;
  if (t == "sharded") return tagc::topology::sharded;
  throw std::invalid_argument("tagc: topology '" + t + "' is neither 'replicated' (DDP) nor 'sharded' (FSDP)");
}

// TagcState.config (tagc/torch.py): the reducer's compile-time choices (values, ratio,
// index) and its runtime arguments, one dict that Python keeps, checkpoints and
// compares on resume.
template <class T>
T get(const py::dict& config, const char* key) {
  if (!config.contains(key)) throw std::invalid_argument(std::string("tagc: the configuration has no '") + key + "'");
  return config[key].cast<T>();
}

// The description the builder looks up (values, ratio, index); the knobs travel in
// the reducer arguments. A malformed value is refused by the description's parser
// naming the key; one the catalogue lacks, by build_reducer naming what it has.
tagc::reducer_description description_of(const py::dict& config) {
  const std::string values = get<std::string>(config, "values");
  std::string text = "values=" + values + " index=" + get<std::string>(config, "index");
  if (values.rfind("sketch", 0) == 0) text += " ratio=" + std::to_string(get<int>(config, "ratio"));
  tagc::reducer_description d;
  check(tagc::parse_reducer_description(text, d));
  return d;
}

void build(const py::dict& config, any_reducer& out) {
  check(tagc::build_reducer(python_catalogue(), description_of(config), out));
}

tagc::schedule_shape parse_schedule_shape(const std::string& s) {
  if (s == "exp") return tagc::schedule_shape::exponential;
  if (s == "linear") return tagc::schedule_shape::linear;
  throw std::invalid_argument("tagc: sparsity_schedule '" + s + "' is neither 'exp' nor 'linear'");
}

tagc::reducer_arguments make_arguments(const py::dict& config, std::size_t length, int world, int rank,
                                       const std::string& topo) {
  tagc::reducer_arguments a;
  a.length = length;
  a.world_size = world;
  a.rank = rank;
  a.topo = parse_topology(topo);
  a.op = tagc::reduce_op::mean;  // what DDP's and FSDP's default hooks deliver
  a.sparsity = get<double>(config, "sparsity");
  a.check_inputs = get<bool>(config, "check_inputs");
  a.adapt.enabled = get<bool>(config, "adaptive");
  const auto warmup = get<long long>(config, "sparsity_warmup");
  if (warmup < 0) throw std::invalid_argument("tagc: sparsity_warmup " + std::to_string(warmup) + " is negative");
  a.schedule.warmup_steps = std::uint64_t(warmup);
  a.schedule.start = get<double>(config, "sparsity_start");
  a.schedule.shape = parse_schedule_shape(get<std::string>(config, "sparsity_schedule"));
  a.union_bound = config.contains("union_bound") ? config["union_bound"].cast<double>() : 0.0;  // older checkpoints lack it
  return a;
}

std::span<const float> const_floats(const at::Tensor& t, const char* what) {
  if (t.device().type() != at::kCPU || t.scalar_type() != at::kFloat || !t.is_contiguous())
    throw std::invalid_argument(std::string("tagc: ") + what + " must be a contiguous float32 CPU tensor, got " +
                                t.toString() + (t.is_contiguous() ? "" : " (not contiguous)"));
  return {t.data_ptr<float>(), std::size_t(t.numel())};
}
std::span<float> floats(at::Tensor& t, const char* what) {
  auto c = const_floats(t, what);
  return {const_cast<float*>(c.data()), c.size()};
}

py::dict stats_dict(const tagc::reduce_stats& s) {
  py::dict d;
  d["elements"] = s.elements;
  d["kept"] = s.kept;
  d["deferred"] = s.deferred;
  d["retransmitted"] = s.retransmitted;
  d["sparsity"] = s.sparsity;
  d["theta"] = s.theta;
  d["index_bits"] = s.index_bits;
  d["exact_index"] = s.exact_index;
  d["dense"] = s.dense;
  d["load"] = s.load;
  d["unresolved"] = s.unresolved;
  d["packed_slots"] = s.packed_slots;
  d["control_bytes"] = s.control_bytes;
  d["index_bytes"] = s.index_bytes;
  d["value_bytes"] = s.value_bytes;
  d["retransmit_bytes"] = s.retransmit_bytes;
  d["total_bytes"] = s.total_bytes();
  // Stage wall times (zero unless the reducer profiles: Reducer.profiling = True).
  py::dict sec;
  sec["check"] = s.seconds.check;
  sec["sparsify"] = s.seconds.sparsify;
  sec["index"] = s.seconds.index;
  sec["index_exchange"] = s.seconds.index_exchange;
  sec["sketch"] = s.seconds.sketch;
  sec["value_exchange"] = s.seconds.value_exchange;
  sec["decode"] = s.seconds.decode;
  sec["residual"] = s.seconds.residual;
  d["seconds"] = sec;
  return d;
}

// One Reducer bound to one process group.
class bound_reducer {
 public:
  bound_reducer(const py::dict& config, std::size_t length, py::object group, const std::string& topo)
      : transport_(make_process_group_transport(group.cast<c10::intrusive_ptr<c10d::ProcessGroup>>())),
        comm_(*transport_),
        counted_(comm_) {
    build(config, reducer_);
    check(reducer_.initialize(make_arguments(config, length, comm_.size(), comm_.rank(), topo)));
  }

  py::dict all_reduce(const at::Tensor& in, at::Tensor& out) {
    return run(false, in, "the bucket", out, "the output");
  }
  py::dict reduce_scatter(const at::Tensor& in, at::Tensor& out) {
    return run(true, in, "the gradient", out, "the output shard");
  }
  at::Tensor residual() const {
    auto r = reducer_.residual_to_host();
    return at::from_blob(r.data(), {int64_t(r.size())}, at::kFloat).clone();
  }
  void set_residual(const at::Tensor& r) {
    at::Tensor c = r.contiguous();
    check(replace_residual(const_floats(c, "the residual")));
  }
  py::bytes save_state() const {
    auto b = reducer_.save_state();
    return py::bytes(reinterpret_cast<const char*>(b.data()), b.size());
  }
  void load_state(const py::bytes& b) {
    std::string s = b;
    check(reducer_.load_state(std::span<const std::byte>(reinterpret_cast<const std::byte*>(s.data()), s.size())));
  }
  double bytes_sent() const { return counted_.counters().total_bytes_sent(); }
  std::size_t output_size() const { return reducer_.output_size(); }
  double sparsity() const { return reducer_.sparsity(); }
  void set_sparsity(double t) { check(reducer_.set_sparsity(t)); }
  std::string name() const { return reducer_.description_text(); }
  bool profiling() const { return profiling_; }
  void set_profiling(bool on) {
    reducer_.set_profiling(on);
    profiling_ = on;
  }

 private:
  // One reduction with the GIL released (the hook's worker thread runs it while
  // autograd goes on); the tensors are checked before, the status raised after.
  py::dict run(bool scatter, const at::Tensor& in, const char* in_what, at::Tensor& out, const char* out_what) {
    auto i = const_floats(in, in_what);
    auto o = floats(out, out_what);
    tagc::reduce_stats s;
    tagc::status st;
    {
      py::gil_scoped_release unlocked;
      st = scatter ? reducer_.reduce_scatter(counted_, i, o, &s) : reducer_.all_reduce(counted_, i, o, &s);
    }
    check(st);
    return stats_dict(s);
  }

  // Bucket rebuilds move residuals between reducers. The saved state ends with the
  // residual (reducer.hpp save_state): take this reducer's state, replace its tail,
  // load it back, so the state's own checks (version, layout) guard the result.
  tagc::status replace_residual(std::span<const float> res) {
    if (reducer_.description().residual != tagc::residual_kind::fp32)
      return {tagc::errc::invalid_argument, "set_residual needs float residual storage, " + reducer_.description_text()};
    const std::size_t length = reducer_.arguments().length;
    if (res.size() != length)
      return {tagc::errc::size_mismatch, "residual has " + std::to_string(res.size()) + " elements, the reducer " +
                                             std::to_string(length)};
    auto blob = reducer_.save_state();
    const std::size_t bytes = res.size() * sizeof(float);
    if (blob.size() < bytes) return {tagc::errc::internal, "reducer state shorter than its residual"};
    std::memcpy(blob.data() + blob.size() - bytes, res.data(), bytes);
    return reducer_.load_state(blob);
  }

  std::shared_ptr<collective_transport> transport_;
  pg_communicator comm_;
  counted_comm counted_;
  any_reducer reducer_;
  bool profiling_ = false;
};

// can_implement without a process group: TagcState checks its configuration
// against the world before the first backward. initialize() runs the reducer's
// can_implement first and needs no communicator; at the length TagcState passes
// (1) its workspace is a few bytes.
void can_implement(const py::dict& config, std::size_t length, int world, int rank, const std::string& topo) {
  any_reducer r;
  build(config, r);
  check(r.initialize(make_arguments(config, length, world, rank, topo)));
}

std::string catalogue_text() { return python_catalogue().listing(); }

}  // namespace
}  // namespace tagc_torch

PYBIND11_MODULE(_C, m) {
  using namespace tagc_torch;
  m.doc() = "tagc reducers over torch.distributed process groups (see tagc.torch)";
  py::class_<bound_reducer>(m, "Reducer")
      .def(py::init<const py::dict&, std::size_t, py::object, const std::string&>(), py::arg("config"),
           py::arg("length"), py::arg("group"), py::arg("topology"))
      .def("all_reduce", &bound_reducer::all_reduce)
      .def("reduce_scatter", &bound_reducer::reduce_scatter)
      .def("residual", &bound_reducer::residual)
      .def("set_residual", &bound_reducer::set_residual)
      .def("save_state", &bound_reducer::save_state)
      .def("load_state", &bound_reducer::load_state)
      .def("set_sparsity", &bound_reducer::set_sparsity)
      .def_property_readonly("bytes_sent", &bound_reducer::bytes_sent)
      .def_property_readonly("output_size", &bound_reducer::output_size)
      .def_property_readonly("sparsity", &bound_reducer::sparsity)
      .def_property_readonly("name", &bound_reducer::name)
      .def_property("profiling", &bound_reducer::profiling, &bound_reducer::set_profiling);
  m.def("can_implement", &can_implement, py::arg("config"), py::arg("length"), py::arg("world"), py::arg("rank"),
        py::arg("topology"));
  m.def("catalogue", &catalogue_text);
}
