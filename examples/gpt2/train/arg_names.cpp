// arg_names.cpp: the trainer's own choices (--compress, --schedule) as the command line
// spells them (args.hpp); the reducer's choices are named by the library's tables
// (tagc/builder/description.hpp). Apart from args.cpp so that code that only names values
// (checkpoint.cpp, and the checkpoint parser's fuzz target) links without the flag table
// and its checks.
// defines: train::name_table, train::to_string
#include "args.hpp"

namespace train {
namespace {

// In the order the flags' messages list them.
constexpr tagc::named<CompressMode> compress_modes[] = {{CompressMode::non_attention, "non-attention"},
                                                        {CompressMode::all, "all"},
                                                        {CompressMode::none, "none"},
                                                        {CompressMode::automatic, "auto"}};
constexpr tagc::named<Schedule> schedules[] = {{Schedule::constant, "constant"}, {Schedule::cosine, "cosine"}};

}  // namespace

std::span<const tagc::named<CompressMode>> name_table(CompressMode) { return compress_modes; }
std::span<const tagc::named<Schedule>> name_table(Schedule) { return schedules; }
// The library's lookup over these tables (it finds them by the enum's namespace).
std::string_view to_string(CompressMode m) { return tagc::to_string(m); }
std::string_view to_string(Schedule s) { return tagc::to_string(s); }

}  // namespace train
