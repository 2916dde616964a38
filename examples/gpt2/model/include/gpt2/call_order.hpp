#pragma once
// defines: gpt2::CallOrder — the order a model's step calls must come in, checked:
//   forward_unit(0), ..., forward_unit(n-1), forward_head (again as often as wanted),
//   backward_head, backward_unit(n-1), ..., backward_unit(0).
// A forward may restart at unit 0 from any phase (evaluation between steps). Model<Real>
// and DeviceModel<Exec> keep one each, so both refuse the same misuse with the same
// message. Each check_* comes before a call's work and throws std::logic_error naming
// the call and the one expected; each *_done comes after the work, so a call that throws
// midway (a bad token id) leaves the order where it was.
#include <stdexcept>
#include <string>

namespace gpt2 {

class CallOrder {
 public:
  // model: the class named in messages ("gpt2::Model"); units: how many forward_unit calls.
  CallOrder(const char* model, int units) : model_(model), units_(units) {}

  void check_forward_unit(int u) {
    if (u == 0) { phase_ = Phase::forward; next_ = 0; }
    expect(phase_ == Phase::forward && u == next_, "forward_unit");
  }
  void forward_unit_done() {
    if (++next_ == units_) phase_ = Phase::head;
  }
  void check_forward_head() const {
    expect(phase_ == Phase::head || phase_ == Phase::backward_head, "forward_head");
  }
  void forward_head_done(bool with_targets) {
    have_targets_ = with_targets;
    phase_ = Phase::backward_head;
  }
  void check_backward_head() const {
    expect(phase_ == Phase::backward_head, "backward_head");
    if (!have_targets_)
      throw std::logic_error(std::string(model_) + "::backward_head: the last forward_head had no targets");
  }
  void backward_head_done() {
    phase_ = Phase::backward;
    next_ = units_ - 1;
  }
  void check_backward_unit(int u) const {
    expect(phase_ == Phase::backward && u == next_, "backward_unit");
  }
  void backward_unit_done() {
    if (--next_ < 0) { phase_ = Phase::forward; next_ = 0; }
  }
  // Between forward_head and backward_head: the probabilities exist.
  bool after_forward_head() const { return phase_ == Phase::backward_head; }

 private:
  enum class Phase { forward, head, backward_head, backward };

  void expect(bool ok, const char* what) const {
    if (ok) return;
    static const char* expected[] = {"forward_unit", "forward_head", "backward_head", "backward_unit"};
    const bool numbered = phase_ == Phase::forward || phase_ == Phase::backward;
    throw std::logic_error(std::string(model_) + ": out-of-order call to " + what + "; expected " +
                           expected[static_cast<int>(phase_)] +
                           (numbered ? "(" + std::to_string(next_) + ")" : std::string()));
  }

  const char* model_;
  int units_;
  Phase phase_ = Phase::forward;
  int next_ = 0;  // the unit the next forward_unit / backward_unit call must name
  bool have_targets_ = false;
};

}  // namespace gpt2
