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
//                                           4 the operands of RUN_DIR/operands.txt could not be
//                                           mapped (the reason is in RUN_DIR/harness.log)
// While a case runs, everything it prints goes to RUN_DIR/harness.log; the verdict itself is
// RUN_DIR/verdict.json, written by the unit. A case that kills the process (a signal) or never
// returns is dealt with by whoever started the runner: it sees no reply.
//
// RUN_DIR/operands.txt, when the worker wrote one, lists the case's operands in the worker's
// device memory, one per line: NAME HANDLE OFFSET BYTES (HANDLE: the cudaIpcMemHandle_t of the
// allocation, 128 hex digits; OFFSET: the operand's byte offset in it). The runner maps each
// allocation once (a handle may be opened only once per process; the units' runtimes share the
// runner's primary context) and hands the unit their addresses (tileconform_operands.h).
// Mappings no operand of the current case uses are closed, so the runner holds at most one
// problem's memory.
//
// One-case mode: runner UNIT RUN_DIR CASE, exit status as STATUS above.

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "harness/tileconform_operands.h"

namespace {

using RunCase = int (*)(const char* run_dir, const char* case_name, int* context_lost);

constexpr int kUnloadable = 3, kUnmapped = 4;

// Creates the device's primary context through the driver API, so that its cost (hundreds of
// milliseconds) is paid while the worker is still busy elsewhere (importing torch, making the
// first inputs), not when the first case asks for it. The units' CUDA runtimes use this same
// primary context. Without a driver it does nothing: the first case reports what is missing.
void* driver() {
  static void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  return handle;
}

template <class F>
F driver_entry(const char* name) {
  return driver() == nullptr ? nullptr : reinterpret_cast<F>(dlsym(driver(), name));
}

void* primary_context = nullptr;

void create_primary_context() {
  using Init = int (*)(unsigned);
  using DeviceGet = int (*)(int*, int);
  using Retain = int (*)(void**, int);
  auto init = driver_entry<Init>("cuInit");
  auto device_get = driver_entry<DeviceGet>("cuDeviceGet");
  auto retain = driver_entry<Retain>("cuDevicePrimaryCtxRetain");
  int device = 0;
  if (init != nullptr && device_get != nullptr && retain != nullptr && init(0) == 0 &&
      device_get(&device, 0) == 0) {
    retain(&primary_context, device);  // kept for the life of the process
  }
}

// The worker's allocations this process has mapped, by handle (the 128 hex digits).
class Mappings {
 public:
  // The case's operands from RUN_DIR/operands.txt, mapped; false (and why, on stderr) if one
  // could not be. Mappings the case does not use are closed.
  bool map(const std::string& path, std::vector<TileconformOperand>& operands, std::vector<std::string>& names) {
    using SetCurrent = int (*)(void*);
    using Open = int (*)(unsigned long long*, CUipcHandle, unsigned);
    auto set_current = driver_entry<SetCurrent>("cuCtxSetCurrent");
    auto open = driver_entry<Open>("cuIpcOpenMemHandle_v2");
    if (primary_context == nullptr || set_current == nullptr || open == nullptr ||
        set_current(primary_context) != 0) {
      std::fprintf(stderr, "runner: no CUDA driver context to map the operands into\n");
      return false;
    }
    struct Line {
      std::string name, hex;
      unsigned long long offset, bytes;
    };
    std::vector<Line> lines;
    std::ifstream in(path);
    Line line;
    while (in >> line.name >> line.hex >> line.offset >> line.bytes) lines.push_back(line);
    if (!in.eof()) {
      std::fprintf(stderr, "runner: %s: a line is not NAME HANDLE OFFSET BYTES\n", path.c_str());
      return false;
    }
    std::set<std::string> used;
    for (const Line& l : lines) used.insert(l.hex);
    close_except(used);  // first: an allocation freed and made again may come with a new handle
    for (const Line& l : lines) {
      auto found = mapped_.find(l.hex);
      if (found == mapped_.end()) {
        CUipcHandle handle{};
        if (!parse(l.hex, handle)) {
          std::fprintf(stderr, "runner: %s: bad handle for %s\n", path.c_str(), l.name.c_str());
          return false;
        }
        unsigned long long base = 0;
        const int result = open(&base, handle, 1 /* CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS */);
        if (result != 0) {
          std::fprintf(stderr, "runner: cuIpcOpenMemHandle for %s failed with CUresult %d\n",
                       l.name.c_str(), result);
          return false;
        }
        found = mapped_.emplace(l.hex, base).first;
      }
      names.push_back(l.name);
      operands.push_back({nullptr, reinterpret_cast<void*>(found->second + l.offset), l.bytes});
    }
    for (size_t i = 0; i < operands.size(); ++i) operands[i].name = names[i].c_str();
    return true;
  }

 private:
  struct CUipcHandle {
    char reserved[64];
  };

  static bool parse(const std::string& hex, CUipcHandle& handle) {
    if (hex.size() != 2 * sizeof(handle.reserved)) return false;
    for (size_t i = 0; i < sizeof(handle.reserved); ++i) {
      unsigned value = 0;
      if (std::sscanf(hex.c_str() + 2 * i, "%2x", &value) != 1) return false;
      handle.reserved[i] = static_cast<char>(value);
    }
    return true;
  }

  void close_except(const std::set<std::string>& used) {
    using Close = int (*)(unsigned long long);
    auto close = driver_entry<Close>("cuIpcCloseMemHandle");
    for (auto it = mapped_.begin(); it != mapped_.end();) {
      if (used.count(it->first) != 0) {
        ++it;
        continue;
      }
      if (close != nullptr) close(it->second);
      it = mapped_.erase(it);
    }
  }

  std::map<std::string, unsigned long long> mapped_;
};

// The entry points of UNIT, loaded once; nullptr (and a message on stderr) if it cannot be.
struct Entries {
  RunCase run = nullptr;
  TileconformRunCaseOn run_on = nullptr;  // absent from a unit built before operands existed
};

const Entries* entry_of(const std::string& unit) {
  static std::map<std::string, Entries> loaded;
  auto found = loaded.find(unit);
  if (found != loaded.end()) return &found->second;
  Entries entries;
  // RTLD_LOCAL: each unit keeps its own copies of cudart, CUTLASS and TensorRT-LLM symbols
  if (void* handle = dlopen(unit.c_str(), RTLD_NOW | RTLD_LOCAL)) {
    entries.run = reinterpret_cast<RunCase>(dlsym(handle, "tileconform_run_case"));
    entries.run_on = reinterpret_cast<TileconformRunCaseOn>(dlsym(handle, "tileconform_run_case_on"));
    if (entries.run == nullptr) {
      std::fprintf(stderr, "runner: %s: %s\n", unit.c_str(), dlerror());
      return nullptr;
    }
  } else {
    std::fprintf(stderr, "runner: %s\n", dlerror());
    return nullptr;
  }
  return &loaded.emplace(unit, entries).first->second;
}

Mappings mappings;

// Runs one case: with its operands mapped when RUN_DIR/operands.txt lists them, else from files.
int run_case(const std::string& unit, const std::string& run_dir, const std::string& name,
             int* context_lost) {
  const Entries* entry = entry_of(unit);
  if (entry == nullptr) return kUnloadable;
  const std::string listing = run_dir + "/operands.txt";
  if (!std::ifstream(listing).good()) return entry->run(run_dir.c_str(), name.c_str(), context_lost);
  if (entry->run_on == nullptr) {
    std::fprintf(stderr, "runner: %s takes no operands in device memory\n", unit.c_str());
    return kUnmapped;
  }
  std::vector<TileconformOperand> operands;
  std::vector<std::string> names;
  if (!mappings.map(listing, operands, names)) return kUnmapped;
  return entry->run_on(run_dir.c_str(), name.c_str(), context_lost, operands.data(),
                       static_cast<int>(operands.size()));
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
  const int status = run_case(unit, run_dir, name, context_lost);
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
  const Entries* entry = entry_of(argv[1]);
  return entry == nullptr ? kUnloadable : entry->run(argv[2], argv[3], &context_lost);
}
