// The sequence stage (part of harness.cu, included after its Runs and running): the case's
// launcher called as FlashInfer calls its two grouped GEMMs, back to back on one stream with no
// host synchronization between them, and the same pair captured once into a CUDA graph and
// replayed. FlashInfer's runner (cutlass_fused_moe_kernels.cuh) gives GEMM 1 and GEMM 2 their
// own launcher inputs (tma_ws_gemm1_workspace / tma_ws_gemm2_workspace) but one CUTLASS
// workspace (gemm_workspace), in which SM90's ptr-array kernels rewrite their TMA descriptors on
// the device, and launches both with the same enable_pdl. Here GEMM 2 is a second launcher input
// of the same instantiation, writing its own D, on the same workspace and stream: a launch that
// overlaps the one before it (PDL) while both use the workspace shows as a changed D or a fault.
//
// Every run's D is compared with the checked run's on the device and only counted there (a few
// tiny kernels per run, no copy to the host), so thousands of runs cost little more than their
// GEMMs; the host synchronizes once per part.
#pragma once

#include <algorithm>
#include <cstring>
#include <string>

namespace tileconform {

// Counts the sequence keeps on the device: `pending` the changed elements of the runs just
// compared, folded by tileconform_tally_runs into the stage's record.
struct SequenceCounts {
  unsigned long long pending[2];
  unsigned long long runs, changed_runs, most_changed;
  int save_from;  // 1 or 2: D of GEMM 1 or 2 just changed more than any run before; 0: neither
};

__global__ void tileconform_tally_runs(SequenceCounts* c, int compared) {
  c->save_from = 0;
  for (int i = 0; i < compared; ++i) {
    ++c->runs;
    if (c->pending[i] != 0) ++c->changed_runs;
    if (c->pending[i] > c->most_changed) {
      c->most_changed = c->pending[i];
      c->save_from = i + 1;
    }
    c->pending[i] = 0;
  }
}

// Copies the D that tileconform_tally_runs just named (if any) into `saved`.
__global__ void tileconform_save_changed(const SequenceCounts* c, const unsigned char* d1,
                                         const unsigned char* d2, unsigned char* saved, size_t bytes) {
  const int from = c->save_from;
  if (from == 0) return;
  const unsigned char* d = from == 1 ? d1 : d2;
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < bytes; i += stride) {
    saved[i] = d[i];
  }
}

// The operands of `ops` with D replaced by `d`, all borrowed: GEMM 2's launcher input.
inline Operands with_d(const Operands& ops, const DeviceBuffer& d) {
  Operands view;
  for (DeviceBuffer Operands::*member :
       {&Operands::a, &Operands::b, &Operands::alpha, &Operands::router_scales, &Operands::dest_row,
        &Operands::a_sf, &Operands::b_sf, &Operands::bias, &Operands::b_scale,
        &Operands::token_scales, &Operands::b_packed, &Operands::b_scale_kernel, &Operands::clamp_limit}) {
    view.*member = DeviceBuffer::borrowed((ops.*member).as<void>(), (ops.*member).bytes());
  }
  view.d = DeviceBuffer::borrowed(d.as<void>(), d.bytes());
  return view;
}

// The checked run's D on the device and what the stage compares with it. In file mode the D
// that changed most is written as d.sequence.bin; with the operands in device memory it is
// copied into the worker's `d_sequence`.
class SequenceCheck {
 public:
  SequenceCheck(const DeviceBuffer& d, int bits, const OperandTable& table)
      : d_(d), size_(bits >= 8 ? bits / 8 : 1), expected_(d.bytes()), d2_(d.bytes()),
        saved_(d.bytes()), counts_(sizeof(SequenceCounts)) {
    if (table.given()) out_ = table.borrow("d_sequence", d.bytes());
  }

  // Right after the checked run (its stream synchronized).
  void keep() {
    check_cuda(cudaMemcpy(expected_.as<void>(), d_.as<void>(), d_.bytes(), cudaMemcpyDeviceToDevice),
               "cudaMemcpy D2D", "sequence");
    check_cuda(cudaMemset(counts_.as<void>(), 0, sizeof(SequenceCounts)), "cudaMemset", "sequence");
  }

  const DeviceBuffer& d2() const { return d2_; }

  // Enqueues the comparison of GEMM 1's D (and GEMM 2's with `both`) and folds it into the counts.
  void compare(cudaStream_t stream, bool both) const {
    auto* counts = counts_.as<SequenceCounts>();
    count(d_, &counts->pending[0], stream);
    if (both) count(d2_, &counts->pending[1], stream);
    tileconform_tally_runs<<<1, 1, 0, stream>>>(counts, both ? 2 : 1);
    const unsigned blocks = static_cast<unsigned>(std::min<size_t>((d_.bytes() + 255) / 256, 1024));
    if (blocks > 0) {
      tileconform_save_changed<<<blocks, 256, 0, stream>>>(counts, d_.as<unsigned char>(),
                                                          d2_.as<unsigned char>(),
                                                          saved_.as<unsigned char>(), d_.bytes());
    }
  }

  // After the stage's last run (its stream synchronized): the counts into the verdict, the D
  // that changed most where Python finds it.
  void report(ReplayInfo& info, const std::string& run_dir) const {
    SequenceCounts counts{};
    check_cuda(cudaMemcpy(&counts, counts_.as<void>(), sizeof(counts), cudaMemcpyDeviceToHost),
               "cudaMemcpy D2H", "sequence");
    info.runs = static_cast<int>(counts.runs);
    info.changed_runs = static_cast<int>(counts.changed_runs);
    info.most_changed = static_cast<long long>(counts.most_changed);
    if (counts.most_changed == 0) return;
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
  void count(const DeviceBuffer& d, unsigned long long* counter, cudaStream_t stream) const {
    const size_t elements = d.bytes() / size_;
    if (elements == 0) return;
    const unsigned blocks = static_cast<unsigned>(std::min<size_t>((elements + 255) / 256, 4096));
    switch (size_) {
      case 1: launch<unsigned char>(d, blocks, elements, counter, stream); break;
      case 2: launch<unsigned short>(d, blocks, elements, counter, stream); break;
      case 4: launch<unsigned int>(d, blocks, elements, counter, stream); break;
      default: launch<unsigned long long>(d, blocks, elements, counter, stream); break;
    }
  }

  template <class T>
  void launch(const DeviceBuffer& d, unsigned blocks, size_t elements, unsigned long long* counter,
              cudaStream_t stream) const {
    tileconform_count_changed<T><<<blocks, 256, 0, stream>>>(expected_.as<T>(), d.as<T>(), elements, counter);
  }

  const DeviceBuffer& d_;
  size_t size_;
  DeviceBuffer expected_, d2_, saved_, counts_, out_;
};

// The stage: N runs of the case alone, N pairs GEMM 1 -> GEMM 2, then one pair captured into a
// CUDA graph and replayed M times, each part enqueued whole before the host waits for it. D is
// reset before each run as FlashInfer's own calls find it (zeroed before a finalize GEMM), both
// D's before a pair, so nothing but the stage's own comparison stands between GEMM 1 and GEMM 2.
// A CUDA error ends the case here with its name; the counts decide the rest (Python).
template <class C>
void sequence_stage(Runs<C>& gemm1, Runs<C>& gemm2, SequenceCheck& check, const std::string& run_dir,
                    Verdict& verdict) {
  const ProblemInfo& p = gemm1.p;
  running(run_dir, verdict, "sequence", "GEMM 1 and GEMM 2 ran back to back");
  verdict.sequence.ran = true;
  auto pair = [&](bool capturing) {
    gemm1.reset_d("sequence");
    gemm2.reset_d("sequence");
    gemm1.launch("sequence", capturing);
    gemm2.calls = gemm1.calls;
    gemm2.launch("sequence", capturing);
    gemm1.calls = gemm2.calls;
    check.compare(gemm1.stream, /*both=*/true);
  };
  for (int i = 0; i < p.sequence_runs; ++i) {  // the case alone
    gemm1.reset_d("sequence");
    gemm1.launch("sequence");
    check.compare(gemm1.stream, /*both=*/false);
  }
  gemm1.finish("sequence");
  for (int i = 0; i < p.sequence_runs; ++i) pair(false);
  gemm1.finish("sequence");
  if (p.sequence_replays > 0) {
    const GraphApi api = GraphApi::load();
    CapturedGraph captured{api};
    api.check(api.begin_capture(gemm1.stream, CU_STREAM_CAPTURE_MODE_GLOBAL), "cuStreamBeginCapture",
              "sequence");
    try {
      pair(true);
    } catch (...) {
      CUgraph abandoned = nullptr;
      api.end_capture(gemm1.stream, &abandoned);
      if (abandoned != nullptr) api.destroy(abandoned);
      throw;
    }
    api.check(api.end_capture(gemm1.stream, &captured.graph), "cuStreamEndCapture", "sequence");
    api.check(api.instantiate(&captured.exec, captured.graph, 0), "cuGraphInstantiateWithFlags", "sequence");
    for (int i = 0; i < p.sequence_replays; ++i) {
      api.check(api.launch(captured.exec, gemm1.stream), "cuGraphLaunch", "sequence");
    }
    gemm1.finish("sequence");
  }
  check.report(verdict.sequence, run_dir);
}

}  // namespace tileconform
