// tileconform runner: runs the cases of harness units (harness.cu linked as shared libraries)
// in one long-lived process, so that a pytest worker creates its CUDA context and loads each
// unit once, not once per case.
//
// Serve mode (no arguments): one request per line on stdin, one reply per line on stdout.
//   request  UNIT<TAB>RUN_DIR<TAB>CASE      UNIT: path of a unit's shared library
//   reply    STATUS                         0 passed, 1 any other verdict, 2 no such case,
//                                           3 the unit could not be loaded
//            STATUS restart                 the case left the CUDA context unusable (a trap,
//                                           a fault): the runner exits after this reply
// While a case runs, everything it prints goes to RUN_DIR/harness.log; the verdict itself is
// RUN_DIR/verdict.json, written by the unit. A case that kills the process (a signal) or never
// returns is dealt with by whoever started the runner: it sees no reply.
//
// One-case mode: runner UNIT RUN_DIR CASE, exit status as STATUS above.

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <iostream>
#include <map>
#include <string>

namespace {

using RunCase = int (*)(const char* run_dir, const char* case_name, int* context_lost);

constexpr int kUnloadable = 3;

// Creates the device's primary context through the driver API, so that its cost (hundreds of
// milliseconds) is paid while the worker is still busy elsewhere (importing torch, making the
// first inputs), not when the first case asks for it. The units' CUDA runtimes use this same
// primary context. Without a driver it does nothing: the first case reports what is missing.
void create_primary_context() {
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (driver == nullptr) return;
  using Init = int (*)(unsigned);
  using DeviceGet = int (*)(int*, int);
  using Retain = int (*)(void**, int);
  auto init = reinterpret_cast<Init>(dlsym(driver, "cuInit"));
  auto device_get = reinterpret_cast<DeviceGet>(dlsym(driver, "cuDeviceGet"));
  auto retain = reinterpret_cast<Retain>(dlsym(driver, "cuDevicePrimaryCtxRetain"));
  int device = 0;
  void* context = nullptr;
  if (init != nullptr && device_get != nullptr && retain != nullptr && init(0) == 0 &&
      device_get(&device, 0) == 0) {
    retain(&context, device);  // kept for the life of the process
  }
}

// The entry point of UNIT, loaded once; nullptr (and a message on stderr) if it cannot be.
RunCase entry_of(const std::string& unit) {
  static std::map<std::string, RunCase> loaded;
  auto found = loaded.find(unit);
  if (found != loaded.end()) return found->second;
  RunCase entry = nullptr;
  // RTLD_LOCAL: each unit keeps its own copies of cudart, CUTLASS and TensorRT-LLM symbols
  if (void* handle = dlopen(unit.c_str(), RTLD_NOW | RTLD_LOCAL)) {
    entry = reinterpret_cast<RunCase>(dlsym(handle, "tileconform_run_case"));
    if (entry == nullptr) std::fprintf(stderr, "runner: %s: %s\n", unit.c_str(), dlerror());
  } else {
    std::fprintf(stderr, "runner: %s\n", dlerror());
  }
  if (entry != nullptr) loaded.emplace(unit, entry);
  return entry;
}

// Runs one case with fds 1 and 2 pointing at RUN_DIR/harness.log.
int run_logged(const std::string& unit, const std::string& run_dir, const std::string& name,
               int* context_lost) {
  std::fflush(stdout);
  std::fflush(stderr);
  const int saved_out = dup(1), saved_err = dup(2);
  const int log = open((run_dir + "/harness.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (log >= 0) {
    dup2(log, 1);
    dup2(log, 2);
    close(log);
  }
  RunCase entry = entry_of(unit);
  const int status = entry == nullptr ? kUnloadable : entry(run_dir.c_str(), name.c_str(), context_lost);
  std::fflush(stdout);
  std::fflush(stderr);
  std::cout.flush();
  std::cerr.flush();
  dup2(saved_out, 1);
  dup2(saved_err, 2);
  close(saved_out);
  close(saved_err);
  return status;
}

int serve() {
  // replies go to the original stdout; the cases' own output must never reach it
  FILE* replies = fdopen(dup(1), "w");
  if (replies == nullptr) return 1;
  dup2(2, 1);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // a case's log keeps its lines in order
  prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the worker that started us
  if (getppid() == 1) return 0;
  create_primary_context();
  std::string line;
  while (std::getline(std::cin, line)) {
    const size_t a = line.find('\t');
    const size_t b = a == std::string::npos ? a : line.find('\t', a + 1);
    if (b == std::string::npos) {
      std::fprintf(stderr, "runner: bad request: %s\n", line.c_str());
      return 1;
    }
    int context_lost = 0;
    const int status =
        run_logged(line.substr(0, a), line.substr(a + 1, b - a - 1), line.substr(b + 1), &context_lost);
    std::fprintf(replies, context_lost ? "%d restart\n" : "%d\n", status);
    std::fflush(replies);
    if (context_lost) return 0;
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 1) return serve();
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s              (serve requests from stdin)\n", argv[0]);
    std::fprintf(stderr, "       %s UNIT RUN_DIR CASE\n", argv[0]);
    return 2;
  }
  int context_lost = 0;
  RunCase entry = entry_of(argv[1]);
  return entry == nullptr ? kUnloadable : entry(argv[2], argv[3], &context_lost);
}
