// defines: the tagc._C Python extension — a Reducer from the catalogue bound to
//          a torch.distributed ProcessGroup, driven from Python (tagc/torch.py).
//
// The heavy calls (all_reduce, reduce_scatter) release the GIL: the Python
// comm hook runs them on a worker thread while autograd keeps computing.
// Errors are raised as RuntimeError("tagc: <message>"); because the Reducer
// gives every rank the same verdict, every rank raises the same error.

#include <memory>
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

// TagcState.config (tagc/torch.py): the reducer's name in the catalogue and its runtime
// arguments, one dict that Python keeps, checkpoints and compares on resume.
template <class T>
T get(const py::dict& config, const char* key) {
  if (!config.contains(key)) throw std::invalid_argument(std::string("tagc: the configuration has no '") + key + "'");
  return config[key].cast<T>();
}

reducer_config catalogue_name(const py::dict& config) {
  return {get<std::string>(config, "values"), get<int>(config, "ratio"), get<std::string>(config, "index")};
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
  return d;
}

// One Reducer bound to one process group.
class bound_reducer {
 public:
  bound_reducer(const py::dict& config, std::size_t length, py::object group, const std::string& topo)
      : transport_(make_process_group_transport(group.cast<c10::intrusive_ptr<c10d::ProcessGroup>>())),
        comm_(*transport_),
        counted_(comm_) {
    check(make_reducer(catalogue_name(config), reducer_));
    check(reducer_->initialize(make_arguments(config, length, comm_.size(), comm_.rank(), topo)));
  }

  py::dict all_reduce(const at::Tensor& in, at::Tensor& out) {
    return run(&any_reducer::all_reduce, in, "the bucket", out, "the output");
  }
  py::dict reduce_scatter(const at::Tensor& in, at::Tensor& out) {
    return run(&any_reducer::reduce_scatter, in, "the gradient", out, "the output shard");
  }
  at::Tensor residual() const {
    auto r = reducer_->residual();
    return at::from_blob(r.data(), {int64_t(r.size())}, at::kFloat).clone();
  }
  void set_residual(const at::Tensor& r) {
    at::Tensor c = r.contiguous();
    check(reducer_->set_residual(const_floats(c, "the residual")));
  }
  py::bytes save_state() const {
    auto b = reducer_->save_state();
    return py::bytes(reinterpret_cast<const char*>(b.data()), b.size());
  }
  void load_state(const py::bytes& b) {
    std::string s = b;
    check(reducer_->load_state(std::span<const std::byte>(reinterpret_cast<const std::byte*>(s.data()), s.size())));
  }
  double bytes_sent() const { return counted_.counters().total_bytes_sent(); }
  std::size_t output_size() const { return reducer_->output_size(); }
  double sparsity() const { return reducer_->sparsity(); }
  void set_sparsity(double t) { check(reducer_->set_sparsity(t)); }
  std::string name() const { return reducer_->name(); }

 private:
  using reduce_fn = tagc::status (any_reducer::*)(counted_comm&, std::span<const float>, std::span<float>,
                                                   tagc::reduce_stats*);
  // One reduction with the GIL released (the hook's worker thread runs it while
  // autograd goes on); the tensors are checked before, the status raised after.
  py::dict run(reduce_fn fn, const at::Tensor& in, const char* in_what, at::Tensor& out, const char* out_what) {
    auto i = const_floats(in, in_what);
    auto o = floats(out, out_what);
    tagc::reduce_stats s;
    tagc::status st;
    {
      py::gil_scoped_release unlocked;
      st = (reducer_.get()->*fn)(counted_, i, o, &s);
    }
    check(st);
    return stats_dict(s);
  }

  std::shared_ptr<collective_transport> transport_;
  pg_communicator comm_;
  counted_comm counted_;
  std::unique_ptr<any_reducer> reducer_;
};

// can_implement without a process group: TagcState checks its configuration
// against the world before the first backward.
void can_implement(const py::dict& config, std::size_t length, int world, int rank, const std::string& topo) {
  std::unique_ptr<any_reducer> r;
  check(make_reducer(catalogue_name(config), r));
  check(r->can_implement(make_arguments(config, length, world, rank, topo)));
}

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
      .def_property_readonly("name", &bound_reducer::name);
  m.def("can_implement", &can_implement, py::arg("config"), py::arg("length"), py::arg("world"), py::arg("rank"),
        py::arg("topology"));
  m.def("catalogue", &catalogue_text);
}
