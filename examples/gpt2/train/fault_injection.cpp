// fault_injection.cpp: see fault_injection.hpp.
// defines: train::fault::nan_at, train::fault::maybe_kill_in_save, train::fault::maybe_kill_in_model_save,
//          train::fault::maybe_stall
#include "fault_injection.hpp"

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

namespace train::fault {
namespace {

// The ':'-separated fields of variable `name`, or empty if it is unset.
std::vector<std::string> fields(const char* name, size_t want) {
  const char* v = std::getenv(name);
  if (!v || !*v) return {};
  std::vector<std::string> out;
  std::stringstream ss(v);
  for (std::string f; std::getline(ss, f, ':');) out.push_back(f);
  if (out.size() != want)
    throw std::invalid_argument(std::string(name) + "=" + v + ": expected " + std::to_string(want) +
                                " ':'-separated fields");
  return out;
}

int integer(const char* name, const std::string& s) {
  try {
    size_t end = 0;
    const int x = std::stoi(s, &end);
    if (end == s.size()) return x;
  } catch (const std::exception&) {
  }
  throw std::invalid_argument(std::string(name) + ": '" + s + "' is not an integer");
}

}  // namespace

std::optional<NanAt> nan_at() {
  const auto f = fields("TAGC_GPT2_INJECT_NAN", 3);
  if (f.empty()) return std::nullopt;
  NanAt n;
  n.step = integer("TAGC_GPT2_INJECT_NAN", f[0]);
  n.unit = f[1];
  n.rank = integer("TAGC_GPT2_INJECT_NAN", f[2]);
  if (const auto slash = n.unit.find('/'); slash != std::string::npos) {
    n.suffix = n.unit.substr(slash + 1) == "suffix";
    n.unit = n.unit.substr(0, slash);
  }
  return n;
}

void maybe_kill_in_save(int step, int rank) {
  static const std::vector<std::string> f = fields("TAGC_GPT2_INJECT_KILL", 2);
  if (f.empty() || integer("TAGC_GPT2_INJECT_KILL", f[0]) != step || integer("TAGC_GPT2_INJECT_KILL", f[1]) != rank)
    return;
  std::fprintf(stderr, "TAGC_GPT2_INJECT_KILL: rank %d kills itself while writing its checkpoint of step %d\n", rank,
               step);
  std::fflush(stderr);
  ::kill(::getpid(), SIGKILL);
}

void maybe_kill_in_model_save() {
  const char* v = std::getenv("TAGC_GPT2_INJECT_KILL_MODEL");
  if (!v || std::string(v) != "1") return;
  std::fprintf(stderr, "TAGC_GPT2_INJECT_KILL_MODEL: rank 0 kills itself while writing --save-model\n");
  std::fflush(stderr);
  ::kill(::getpid(), SIGKILL);
}

void maybe_stall(int step, int rank) {
  static const std::vector<std::string> f = fields("TAGC_GPT2_INJECT_STALL", 3);
  if (f.empty() || integer("TAGC_GPT2_INJECT_STALL", f[0]) != step || integer("TAGC_GPT2_INJECT_STALL", f[1]) != rank)
    return;
  const int sec = integer("TAGC_GPT2_INJECT_STALL", f[2]);
  std::fprintf(stderr, "TAGC_GPT2_INJECT_STALL: rank %d stalls %d s before step %d\n", rank, sec, step);
  std::fflush(stderr);
  std::this_thread::sleep_for(std::chrono::seconds(sec));
}

}  // namespace train::fault
