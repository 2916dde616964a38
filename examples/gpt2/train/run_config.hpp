// run_config.hpp: a run's effective configuration as named fields — what every rank
// must agree on before the first collective, and what a resumed run must share with its
// checkpoint.
//
// Each flag of args.cpp is classified (config_fields): it shapes the collectives, the
// numerics or the data stream (compared across ranks; most of them also against the
// checkpoint), or it is local to a rank (--log, --print-every, the other commands'
// flags). tests/test_run_config.cpp fails when a flag is added without a class.
//
// Agreement across ranks (check_ranks_agree): every rank serializes its fields into a
// fixed-size record; one all-gather of a 16-byte digest settles the common case, and on
// any difference one all-gather of the whole records (fixed size: a mismatched rank
// can neither hang nor truncate it) lets every rank build the same message naming each
// differing flag and the values per rank. Both all-gathers have the --collective-timeout
// deadline.
// defines: train::config_fields, train::config_json, train::resume_differences,
//          train::check_ranks_agree, train::compare_records
#pragma once

#include "args.hpp"

#include "tagc/comm/mpi.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace train {

enum class FieldClass {
  resume_must_match,  // also compared with a checkpoint on --resume: a difference is an error
  resume_may_change,  // compared across ranks; a resume may change it (the log says so)
  local,              // this rank's business only
};

struct ConfigField {
  std::string flag;   // the command-line name, without "--"
  std::string value;  // effective value, as text
  FieldClass cls;
};

// Every flag of flag_names(), in that order, with its effective value.
std::vector<ConfigField> config_fields(const Args& a);
// The non-local fields as a JSON object {flag: value} (stored in checkpoint manifests).
nlohmann::json config_json(const Args& a);

// A resumed run against the checkpoint's config_json: throws CheckpointMismatch naming
// every must-match flag that differs ("--sparsity: 0.9 in the checkpoint, 0.95 in this
// run"); returns one note per may-change flag that differs. A must-match flag that the
// checkpoint does not record (it is older than the flag) is compared with the flag's default.
std::vector<std::string> resume_differences(const nlohmann::json& saved, const nlohmann::json& now);

// The fixed-size record of the non-local fields, and the comparison of all ranks'
// records: empty when they agree, else the message (the same on every rank).
inline constexpr size_t config_record_bytes = 8192;
std::vector<unsigned char> config_record(const Args& a);
std::string compare_records(const std::vector<std::vector<unsigned char>>& records);

// Collective over comm: throws std::runtime_error with compare_records' message (or the
// timeout's) on every rank if any differ.
void check_ranks_agree(const Args& a, tagc::mpi_communicator& comm);

}  // namespace train
