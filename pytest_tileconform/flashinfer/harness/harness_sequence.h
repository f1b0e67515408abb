// The sequence stage (part of harness.cu, included after its Runs and running): the case's
// configuration called as FlashInfer calls its two grouped GEMMs (cutlass_fused_moe_kernels.cuh,
// CutlassMoeFCRunner::runMoe): GEMM 1 (fc1) with the fusion none, then GEMM 2 (fc2) with the
// finalize fusion, back to back on one stream with no host synchronization between them, and
// the same pair captured once into a CUDA graph and replayed. FlashInfer gives the two GEMMs
// launcher inputs of their own (tma_ws_gemm1_workspace / tma_ws_gemm2_workspace) but one CUTLASS
// workspace (gemm_workspace), in which SM90's ptr-array kernels rewrite their TMA descriptors on
// the device, launches both with the same enable_pdl, and GEMM 2 reads what GEMM 1 wrote (through
// its activation kernel, itself launched with PDL). Here the unit holds both instantiations of
// the case's tile (codegen: SequencePartner, with --tile-sequence): GEMM 2 reads GEMM 1's D as
// its A where their types agree (N and K swapped, as fc2's K is fc1's N; no activation kernel
// between them, so GEMM 2 may overlap GEMM 1 further than in FlashInfer) and then sums its rows
// two by two (top-2) into a zeroed D, as FlashInfer zeroes the final output before GEMM 2; where
// the types differ (fp8 in, bf16 out: FlashInfer's activation kernel quantizes between them),
// GEMM 2 reads the case's A, with the case's routing when it has one. A configuration without a partner (another arch, fusion or launcher)
// pairs with itself.
//
// Every run's D is compared on the device with the serialized run's (the checked run for the case
// alone; the pair run once with a synchronization after each GEMM for the pairs) and only counted
// there (a few tiny kernels per run, no copy to the host), so thousands of runs cost little more
// than their GEMMs; the host synchronizes once per part.
#pragma once

#include <algorithm>
#include <cstring>
#include <string>
#include <type_traits>

namespace tileconform {

// The other fusion's instantiation of a case's tile in the same unit, for GEMM 1 -> GEMM 2;
// void when the unit holds none (codegen specializes it).
template <class C>
struct SequencePartner {
  using type = void;
};

// GEMM 1 (fusion none) and GEMM 2 (finalize) of the case's configuration; `paired` false when the
// case pairs with itself. `chained`: GEMM 2 reads GEMM 1's D as its A.
template <class C>
struct SequencePair {
  using Partner = typename SequencePartner<C>::type;
  static constexpr bool paired = !std::is_void_v<Partner>;
  using Other = std::conditional_t<paired, Partner, C>;
  using First = std::conditional_t<C::finalize, Other, C>;
  using Second = std::conditional_t<C::finalize, C, Other>;
  static constexpr bool chained = paired && First::act_bits == First::out_bits && First::block_scale == 0;
};

template <class C>
GemmSetup make_setup(const ProblemInfo& p, const Operands& ops);

// Counts the sequence keeps on the device: `pending` the changed elements of the runs just
// compared, folded by tileconform_tally_runs into the stage's record.
struct SequenceCounts {
  unsigned long long pending[2];
  unsigned long long runs, changed_runs, most_changed;
  unsigned long long saved_changed;  // elements the saved D (the case's own) differs in
  int save;  // 1: the case's D just changed more than any run before it (copy it); 0: not
};

// Folds `compared` pending counts into the record; the first is the case's own D when `own`.
__global__ void tileconform_tally_runs(SequenceCounts* c, int compared, int own) {
  c->save = 0;
  for (int i = 0; i < compared; ++i) {
    ++c->runs;
    if (c->pending[i] != 0) ++c->changed_runs;
    if (c->pending[i] > c->most_changed) c->most_changed = c->pending[i];
    if (own != 0 && i == 0 && c->pending[i] > c->saved_changed) {
      c->saved_changed = c->pending[i];
      c->save = 1;
    }
    c->pending[i] = 0;
  }
}

// Copies the case's D into `saved` when tileconform_tally_runs just said so.
__global__ void tileconform_save_changed(const SequenceCounts* c, const unsigned char* d,
                                         unsigned char* saved, size_t bytes) {
  if (c->save == 0) return;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < bytes; i += stride) {
    saved[i] = d[i];
  }
}

// `ops` all borrowed, with D replaced by `d` and, where given, A by `a`.
inline Operands borrowed_operands(const Operands& ops, const DeviceBuffer& d, const DeviceBuffer* a) {
  Operands view;
  for (DeviceBuffer Operands::*member :
       {&Operands::a, &Operands::b, &Operands::alpha, &Operands::router_scales, &Operands::dest_row,
        &Operands::a_sf, &Operands::b_sf, &Operands::bias, &Operands::b_scale,
        &Operands::token_scales, &Operands::b_packed, &Operands::b_scale_kernel, &Operands::clamp_limit}) {
    view.*member = DeviceBuffer::borrowed((ops.*member).as<void>(), (ops.*member).bytes());
  }
  view.d = DeviceBuffer::borrowed(d.as<void>(), d.bytes());
  if (a != nullptr) view.a = DeviceBuffer::borrowed(a->as<void>(), a->bytes());
  return view;
}

// What the stage compares: the case's D with the checked run's, and a pair's two D's with the
// serialized pair's. In file mode the case's D that changed most is written as d.sequence.bin;
// with the operands in device memory it is copied into the worker's `d_sequence`. A pair's D's
// are counted only (their shapes are not the case's).
class SequenceCheck {
 public:
  SequenceCheck(const DeviceBuffer& d, int bits, const OperandTable& table)
      : d_(d), bits_(bits), expected_(d.bytes()), saved_(d.bytes()), counts_(sizeof(SequenceCounts)) {
    if (table.given()) out_ = table.borrow("d_sequence", d.bytes());
  }

  // Right after the checked run (its stream synchronized).
  void keep() {
    copy(expected_, d_);
    check_cuda(cudaMemset(counts_.as<void>(), 0, sizeof(SequenceCounts)), "cudaMemset", "sequence");
  }

  // Right after the serialized pair (synchronized): what every pair's D's must be.
  void keep_pair(const DeviceBuffer& d1, int bits1, const DeviceBuffer& d2, int bits2) {
    pair_[0] = {&d1, bits1, DeviceBuffer(d1.bytes())};
    pair_[1] = {&d2, bits2, DeviceBuffer(d2.bytes())};
    for (Slot& slot : pair_) copy(slot.expected, *slot.d);
  }

  // Enqueues the comparison of the case's D with the checked run's and folds it into the counts.
  void compare_case(cudaStream_t stream) const {
    auto* counts = counts_.as<SequenceCounts>();
    count(expected_, d_, bits_, &counts->pending[0], stream);
    tileconform_tally_runs<<<1, 1, 0, stream>>>(counts, 1, /*own=*/1);
    const unsigned blocks = static_cast<unsigned>(std::min<size_t>((d_.bytes() + 255) / 256, 1024));
    if (blocks > 0) {
      tileconform_save_changed<<<blocks, 256, 0, stream>>>(counts, d_.as<unsigned char>(),
                                                          saved_.as<unsigned char>(), d_.bytes());
    }
  }

  // The same for a pair's two D's (keep_pair first).
  void compare_pair(cudaStream_t stream) const {
    auto* counts = counts_.as<SequenceCounts>();
    for (int i = 0; i < 2; ++i) count(pair_[i].expected, *pair_[i].d, pair_[i].bits, &counts->pending[i], stream);
    tileconform_tally_runs<<<1, 1, 0, stream>>>(counts, 2, /*own=*/0);
  }

  // After the stage's last run (its stream synchronized): the counts into the verdict, the
  // case's D that changed most where Python finds it.
  void report(ReplayInfo& info, const std::string& run_dir) const {
    SequenceCounts counts{};
    check_cuda(cudaMemcpy(&counts, counts_.as<void>(), sizeof(counts), cudaMemcpyDeviceToHost),
               "cudaMemcpy D2H", "sequence");
    info.runs = static_cast<int>(counts.runs);
    info.changed_runs = static_cast<int>(counts.changed_runs);
    info.most_changed = static_cast<long long>(counts.most_changed);
    if (counts.saved_changed == 0) return;
    info.saved = "d.sequence.bin";
    if (out_.bytes() > 0) {
      check_cuda(cudaMemcpy(out_.as<void>(), saved_.as<void>(), d_.bytes(), cudaMemcpyDeviceToDevice),
                 "cudaMemcpy D2D", "sequence");
      return;
    }
    std::vector<char> host(d_.bytes());
    check_cuda(cudaMemcpy(host.data(), saved_.as<void>(), host.size(), cudaMemcpyDeviceToHost),
               "cudaMemcpy D2H", "sequence");
    write_bytes(run_dir + "/" + info.saved, host, "sequence");
  }

 private:
  struct Slot {
    const DeviceBuffer* d = nullptr;
    int bits = 8;
    DeviceBuffer expected;
  };

  static void copy(const DeviceBuffer& to, const DeviceBuffer& from) {
    check_cuda(cudaMemcpy(to.as<void>(), from.as<void>(), from.bytes(), cudaMemcpyDeviceToDevice),
               "cudaMemcpy D2D", "sequence");
  }

  static void count(const DeviceBuffer& expected, const DeviceBuffer& d, int bits, unsigned long long* counter,
                    cudaStream_t stream) {
    const size_t size = bits >= 8 ? static_cast<size_t>(bits) / 8 : 1;
    const size_t elements = d.bytes() / size;
    if (elements == 0) return;
    const unsigned blocks = static_cast<unsigned>(std::min<size_t>((elements + 255) / 256, 4096));
    switch (size) {
      case 1: launch<unsigned char>(expected, d, blocks, elements, counter, stream); break;
      case 2: launch<unsigned short>(expected, d, blocks, elements, counter, stream); break;
      case 4: launch<unsigned int>(expected, d, blocks, elements, counter, stream); break;
      default: launch<unsigned long long>(expected, d, blocks, elements, counter, stream); break;
    }
  }

  template <class T>
  static void launch(const DeviceBuffer& expected, const DeviceBuffer& d, unsigned blocks, size_t elements,
                     unsigned long long* counter, cudaStream_t stream) {
    tileconform_count_changed<T><<<blocks, 256, 0, stream>>>(expected.as<T>(), d.as<T>(), elements, counter);
  }

  const DeviceBuffer& d_;
  int bits_;
  DeviceBuffer expected_, saved_, counts_, out_;
  Slot pair_[2];
};

// What GEMM 2's finalize scatters by unless it takes the case's own (GemmPair::kOwnRouting):
// permuted row r to output row r / 2, scale 1/2: every output row sums two rows (top-2: 0 + a + b
// rounds the same in either order, so the bits are the run's, not the reduction order's; GEMM 1's
// D is not on the exact inputs' grid, so more terms could round differently run to run).
struct PairRouting {
  DeviceBuffer dest_row, router_scales;
  int64_t out_rows = 0;

  explicit PairRouting(int64_t total) : out_rows((total + 1) / 2) {
    std::vector<int32_t> dest(static_cast<size_t>(total));
    for (int64_t r = 0; r < total; ++r) dest[static_cast<size_t>(r)] = static_cast<int32_t>(r / 2);
    dest_row = upload_vector(dest);
    router_scales = upload_vector(std::vector<float>(static_cast<size_t>(total), 0.5f));
  }
};

// GEMM 1 and GEMM 2 as FlashInfer pairs them (SequencePair): their problems, D's, launcher inputs
// and one workspace, as large as the larger of the two asks.
template <class C>
struct GemmPair {
  using First = typename SequencePair<C>::First;
  using Second = typename SequencePair<C>::Second;
  static constexpr bool kChained = SequencePair<C>::chained;
  static constexpr bool kOwnRouting = C::finalize && !kChained;  // the case's exact inputs

  ProblemInfo p1, p2;
  PairRouting routing;
  DeviceBuffer d1, d2, workspace;
  GemmSetup s1, s2;

  GemmPair(const ProblemInfo& p, const Operands& ops, int sm, cudaStream_t stream)
      : p1(pair_problem(p, false)), p2(pair_problem(p, true)), routing(kOwnRouting ? 0 : p.total_rows()),
        d1(d_bytes<First>(p1)), d2(d_bytes<Second>(p2)) {
    s1 = make_setup<First>(p1, borrowed_operands(ops, d1, nullptr));
    Operands second = borrowed_operands(ops, d2, kChained ? &d1 : nullptr);
    if (!kOwnRouting) {
      second.dest_row = DeviceBuffer::borrowed(routing.dest_row.as<void>(), routing.dest_row.bytes());
      second.router_scales = DeviceBuffer::borrowed(routing.router_scales.as<void>(), routing.router_scales.bytes());
    }
    if (p2.bias != p.bias) second.bias = DeviceBuffer();
    s2 = make_setup<Second>(p2, second);
    size_t w1 = 0, w2 = 0;
    try {
      call_launcher<First>(s1, p1, sm, stream, &w1);
      call_launcher<Second>(s2, p2, sm, stream, &w2);
    } catch (const std::exception& e) {
      throw StageError("prepare", "exception", e.what());
    }
    workspace = DeviceBuffer(std::max(w1, w2));
    for (GemmSetup* s : {&s1, &s2}) {
      s->input.gemm_workspace = workspace.as<uint8_t>();
      s->input.gemm_workspace_size = workspace.bytes();
    }
  }

  // GEMM 1's problem is the case's without its finalize parts; GEMM 2's reads GEMM 1's D when
  // chained (K = GEMM 1's N, N = its K: B's bytes read as the transposed shape), with the case's
  // routing (kOwnRouting) or PairRouting's.
  static ProblemInfo pair_problem(const ProblemInfo& p, bool second) {
    ProblemInfo q = p;
    const bool finalize = second ? Second::finalize : First::finalize;
    if (!finalize) {
      q.bias = false;
      q.use_reduction = false;
      return q;
    }
    if (kChained) std::swap(q.n, q.k);
    if (!kOwnRouting) {
      q.out_rows = (p.total_rows() + 1) / 2;
      q.use_reduction = p.total_rows() > 1;
      q.bias = false;
    }
    return q;
  }
};

// The stage: N runs of the case alone, N pairs GEMM 1 -> GEMM 2, then one pair captured into a
// CUDA graph and replayed M times, each part enqueued whole before the host waits for it. D is
// reset before each run as FlashInfer's own calls find it (zeroed before a finalize GEMM), both
// D's before a pair, so nothing but the stage's own comparison stands between GEMM 1 and GEMM 2.
// A CUDA error ends the case here with its name; the counts decide the rest (Python).
template <class C>
void sequence_stage(Runs<C>& runs, const Operands& ops, SequenceCheck& check, const std::string& run_dir,
                    Verdict& verdict) {
  const ProblemInfo& p = runs.p;
  running(run_dir, verdict, "sequence", "GEMM 1 and GEMM 2 ran back to back");
  verdict.sequence.ran = true;
  verdict.sequence.pair = !SequencePair<C>::paired ? "itself"
                          : SequencePair<C>::chained ? "none -> finalize, chained"
                                                      : "none -> finalize";
  for (int i = 0; i < p.sequence_runs; ++i) {  // the case alone
    runs.reset_d("sequence");
    runs.launch("sequence");
    check.compare_case(runs.stream);
  }
  runs.finish("sequence");

  GemmPair<C> pair(p, ops, runs.sm_count, runs.stream);
  Hook& hook = runs.hook;
  hook.context.workspace = pair.workspace.template as<void>();  // what a hook acts on is the pair's now
  hook.context.workspace_bytes = pair.workspace.bytes();
  Runs<typename GemmPair<C>::First> gemm1{pair.s1, pair.p1, pair.d1, runs.sm_count, runs.stream, hook};
  Runs<typename GemmPair<C>::Second> gemm2{pair.s2, pair.p2, pair.d2, runs.sm_count, runs.stream, hook};
  gemm1.calls = runs.calls;
  auto launch_pair = [&](bool capturing, bool serialized) {
    gemm1.reset_d("sequence");
    gemm2.reset_d("sequence");
    gemm1.launch("sequence", capturing);
    if (serialized) gemm1.finish("sequence");
    gemm2.calls = gemm1.calls;
    gemm2.launch("sequence", capturing);
    gemm1.calls = gemm2.calls;
  };
  launch_pair(false, true);  // the serialized pair: what the others must give
  gemm1.finish("sequence");
  check.keep_pair(pair.d1, GemmPair<C>::First::out_bits, pair.d2, GemmPair<C>::Second::out_bits);
  for (int i = 0; i < p.sequence_runs; ++i) {
    launch_pair(false, false);
    check.compare_pair(runs.stream);
  }
  gemm1.finish("sequence");
  if (p.sequence_replays > 0) {
    const GraphApi api = GraphApi::load();
    CapturedGraph captured{api};
    api.check(api.begin_capture(runs.stream, CU_STREAM_CAPTURE_MODE_GLOBAL), "cuStreamBeginCapture",
              "sequence");
    try {
      launch_pair(true, false);
      check.compare_pair(runs.stream);
    } catch (...) {
      CUgraph abandoned = nullptr;
      api.end_capture(runs.stream, &abandoned);
      if (abandoned != nullptr) api.destroy(abandoned);
      throw;
    }
    api.check(api.end_capture(runs.stream, &captured.graph), "cuStreamEndCapture", "sequence");
    api.check(api.instantiate(&captured.exec, captured.graph, 0), "cuGraphInstantiateWithFlags", "sequence");
    for (int i = 0; i < p.sequence_replays; ++i) {
      api.check(api.launch(captured.exec, runs.stream), "cuGraphLaunch", "sequence");
    }
    gemm1.finish("sequence");
  }
  runs.calls = gemm1.calls;
  check.report(verdict.sequence, run_dir);
}

}  // namespace tileconform
