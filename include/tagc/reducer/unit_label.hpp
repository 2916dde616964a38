#pragma once
// defines: tagc::unit_label — a reducer's unit name and the prefix it puts on every
//          status it returns ("unit 'mlp.fc' (step 12): ..."), so that a refusal in a
//          model of hundreds of units names the unit, and for a call the step, at fault.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "../core/status.hpp"

TAGC_BEGIN_NAMESPACE

class unit_label {
 public:
  // `unnamed`: the prefix when the unit has no name (nullptr: the status goes out as
  // it is); `kind`: a word after the name, "unit 'x' (two-level): ...".
  explicit unit_label(const char* unnamed = "reducer", const char* kind = nullptr) : unnamed_(unnamed), kind_(kind) {}

  // A copy of the caller's name: the caller's string need not outlive the reducer.
  void assign(std::string_view name) { name_.assign(name.data(), name.size()); }
  std::string_view name() const { return name_; }

  status operator()(status s) const { return prefixed(std::move(s), nullptr); }
  // For a call: the step is the reducer's own count of completed calls.
  status operator()(status s, std::uint64_t step) const { return prefixed(std::move(s), &step); }

 private:
  status prefixed(status s, const std::uint64_t* step) const {
    if (s.ok()) return s;
    std::string prefix;
    if (!name_.empty()) prefix = "unit '" + name_ + "'";
    else if (unnamed_) prefix = unnamed_;
    else return s;
    if (kind_) prefix += std::string(" (") + kind_ + ")";
    if (step) prefix += " (step " + std::to_string(*step) + ")";
    return {s.code(), prefix + ": " + s.message()};
  }

  std::string name_;
  const char* unnamed_;
  const char* kind_;
};

TAGC_END_NAMESPACE
