// main.cpp: tagc-gpt2 and tagc-gpt2-cuda — parse the command line, start MPI for
// "train", dispatch, and turn every error into a message and an exit code (2: bad command
// line, 1: anything else). No exception escapes. "train" runs the trainer of this
// executable's backend (session.hpp: trainer_host.cpp or trainer_cuda.cu); the other
// commands (prepare, eval, sample, tokenize, help) run on the CPU in both.
//
//   scripts/mpirun_local.sh -np 2 build/examples/gpt2/train/tagc-gpt2 train --model d2 --steps 50
//   mpirun -np 4 build-cuda/examples/gpt2/train/tagc-gpt2-cuda train --model d12 ...
//   tagc-gpt2 help
// defines: main

// defines: train::parse_args, train::usage
#include "args.hpp"
// defines: train::cmd_*
#include "commands.hpp"
// defines: train::program_name
#include "session.hpp"

#include <mpi.h>

#include <cstdio>
#include <exception>
#include <string>

int main(int argc, char** argv) {
  const char* name = train::program_name();
  train::Args args;
  if (argc >= 2 && train::wants_help(argc, argv))  // "<command> --help": before any flag is judged
    if (const std::string u = train::command_usage(argv[1], name); !u.empty()) {
      std::fputs(u.c_str(), stdout);
      return 0;
    }
  try {
    args = train::parse_args(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n(run '%s help' for the flags)\n", name, e.what(), name);
    return 2;
  }
  if (args.command == "help" || args.command == "--help" || args.command == "-h") {
    std::fputs(train::usage(name).c_str(), stdout);
    return 0;
  }
  if (args.command != "train") {
    try {
      if (args.command == "prepare") return train::cmd_prepare(args);
      if (args.command == "eval") return train::cmd_eval(args);
      if (args.command == "sample") return train::cmd_sample(args);
      if (args.command == "tokenize") return train::cmd_tokenize(args);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s %s: error: %s\n", name, args.command.c_str(), e.what());
      return 1;
    }
    return 2;
  }

  // The communication worker thread issues every collective (and, on the host backend,
  // every MPI call) while training runs, and it is not the thread that initialised MPI:
  // SERIALIZED is the level that allows it.
  int provided = 0;
  if (MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS) {
    std::fprintf(stderr, "%s: MPI_Init_thread failed\n", name);
    return 1;
  }
  int rc = 1;
  if (provided < MPI_THREAD_SERIALIZED) {
    std::fprintf(stderr, "%s: this MPI provides thread level %d, MPI_THREAD_SERIALIZED is needed\n", name, provided);
  } else {
    try {
      rc = train::cmd_train(args);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "%s train: error: %s\n", name, e.what());
      rc = 1;
    }
  }
  MPI_Finalize();
  return rc;
}
