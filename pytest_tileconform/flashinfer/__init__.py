"""FlashInfer (TensorRT-LLM) MoE grouped-GEMM backend: source discovery, code generation and
the C++ conformance harness."""

#: The backend's name, as a matrix's ``backend:`` gives it.
NAME = "flashinfer-cutlass-moe"
