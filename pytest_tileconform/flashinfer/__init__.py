"""FlashInfer (TensorRT-LLM) MoE grouped-GEMM backend: source discovery, code generation and
the C++ conformance harness."""
